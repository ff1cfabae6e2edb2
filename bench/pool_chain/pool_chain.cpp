// SPDX-License-Identifier: BSL-1.0
// Chained tasks: I roots, each task posting the next link of its chain (D links per chain).
#include "adapters/pools.h"
#include "pool_harness.h"

int main(int argc, char** argv) {
  using namespace async_bench;
  const binary_info info{"chained tasks: each task posts the next link of its chain", "tasks"};
  return run_main(argc, argv, info, [] {
    for (int roots : {1, 16}) {
      for_each_competitor(pool_competitors(), [roots](auto competitor) {
        using pool = typename decltype(competitor)::type;
        if constexpr (pool::chains) {
          register_pool_chain<pool>(roots);
        }
      });
    }
  });
}
