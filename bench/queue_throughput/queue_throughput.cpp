// SPDX-License-Identifier: BSL-1.0
// Queue throughput: P producers x C consumers, capacities 1024 and 65536: the bounded queues,
// and the unbounded peers, which pre-allocate the capacity (ours is in unbounded_throughput).
// A single-producer single-consumer queue runs 1p1c only.
#include "adapters/queues.h"

int main(int argc, char** argv) {
  using namespace async_bench;
  const binary_info info{"bounded queues, P producers and C consumers, capacities 1024 and 65536",
                         "items", true};
  return run_main(argc, argv, info, [] {
    const std::vector<std::size_t> caps = {1024, 65536};
    for_each_queue([&](auto competitor) {
      using queue = typename decltype(competitor)::type;
      if constexpr (queue::bounded || !queue::ours) {
        register_throughput<queue>(caps);
      }
    });
  });
}
