// expect: NODE_LEVEL1, NODE_LEVEL2 and NODE_LEVEL3
// MIGRATION.md M5: a traits struct that sets the original's L1bits, L2bits or L3bits is rejected,
// naming the node storage's level knobs.
#include "queue.h"

#include <cstdint>

struct my_traits : async::traits {
  static constexpr std::uint64_t L2bits = 12;
};

int main() {
  async::queue<int, my_traits> q;
  return q.enqueue(1) ? 0 : 1;
}
