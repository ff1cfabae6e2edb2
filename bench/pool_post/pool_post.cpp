// SPDX-License-Identifier: BSL-1.0
// post + future.get of tiny tasks from 1 and 4 submitters, W workers: every competitor whose
// post returns a future (for a thread per call, the worker count does not apply).
#include "adapters/pools.h"
#include "pool_harness.h"

int main(int argc, char** argv) {
  using namespace async_bench;
  const binary_info info{"post + future.get of tiny tasks from 1 and 4 submitters", "tasks"};
  return run_main(argc, argv, info, [] {
    for_each_competitor(pool_competitors(), [](auto competitor) {
      using pool = typename decltype(competitor)::type;
      if constexpr (pool::futures) {
        register_pool_post<pool>(!pool::thread_per_call);
      }
    });
  });
}
