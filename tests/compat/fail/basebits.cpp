// expect: a node holds SEGMENT_SIZE elements
// MIGRATION.md M5: a traits struct that sets the original's Basebits is rejected, naming
// SEGMENT_SIZE and NODE_LEVEL3.
#include "queue.h"

#include <cstdint>

struct my_traits : async::traits {
  static constexpr std::uint64_t Basebits = 10;
};

int main() {
  async::queue<int, my_traits> q;
  return q.enqueue(1) ? 0 : 1;
}
