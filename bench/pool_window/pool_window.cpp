// SPDX-License-Identifier: BSL-1.0
// Deep-window pool throughput: S submitters (1, 4) each keep 1024 tiny tasks in flight, W
// workers; with post + future (ours, Asio + packaged_task) and without a future (ours execute(),
// Asio post, TBB task_group run). The time per task of a busy pool, where pool_post (16 at a
// time, each waited for) measures the hand-off latency.
#include "adapters/pools.h"
#include "pool_harness.h"

int main(int argc, char** argv) {
  using namespace async_bench;
  const binary_info info{"a busy pool: submitters keep 1024 tiny tasks in flight each", "tasks"};
  return run_main(argc, argv, info, [] {
    for_each_competitor(pool_competitors(), [](auto competitor) {
      register_pool_window<typename decltype(competitor)::type>(1024);
    });
  });
}
