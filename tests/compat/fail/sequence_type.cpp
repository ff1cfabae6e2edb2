// expect: sequence_type .*must be a 64-bit unsigned type
// MIGRATION.md M4: bounded_traits::sequence_type other than a 64-bit unsigned type is rejected.
#include "bounded_queue.h"

#include <cstdint>

struct my_traits : async::bounded_traits {
  using sequence_type = std::uint32_t;
};

int main() {
  async::bounded_queue<int, my_traits> q(4);
  return q.enqueue(1) ? 0 : 1;
}
