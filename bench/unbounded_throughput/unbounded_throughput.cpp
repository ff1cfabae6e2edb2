// SPDX-License-Identifier: BSL-1.0
// Unbounded queues: P producers x C consumers with single calls, then with bulk calls of 16
// (producers hand over 16 values per call, consumers take up to 16). No pre-allocation: every
// queue starts empty and grows as it needs.
#include "adapters/queues.h"

int main(int argc, char** argv) {
  using namespace async_bench;
  const binary_info info{"unbounded queues, P producers and C consumers, single and bulk calls",
                         "items", true};
  return run_main(argc, argv, info, [] {
    for_each_queue([](auto competitor) {
      using queue = typename decltype(competitor)::type;
      if (!queue::bounded && (queue::primary || !queue::blocking)) {
        register_throughput<queue>({0});
      }
    });
    for_each_queue([](auto competitor) {
      using queue = typename decltype(competitor)::type;
      if (!queue::bounded && queue::bulk) {
        register_bulk<queue>(16);
      }
    });
  });
}
