// expect: set TAG_BITS
// MIGRATION.md M5: a traits struct that sets the original's Tagbits is rejected, naming TAG_BITS.
#include "queue.h"

#include <cstdint>

struct my_traits : async::traits {
  static constexpr std::uint64_t Tagbits = 16;
};

int main() {
  async::queue<int, my_traits> q;
  return q.enqueue(1) ? 0 : 1;
}
