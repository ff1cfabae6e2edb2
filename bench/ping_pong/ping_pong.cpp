// SPDX-License-Identifier: BSL-1.0
// Ping-pong: one value bouncing between two threads through two queues (latency of a hand-off):
// every call style of ours, and the bounded peers (capacity 1024).
#include "adapters/queues.h"

int main(int argc, char** argv) {
  using namespace async_bench;
  const binary_info info{"one element bouncing between two threads: round trips per second",
                         "round trips", true};
  return run_main(argc, argv, info, [] {
    for_each_queue([](auto competitor) {
      using queue = typename decltype(competitor)::type;
      if constexpr (queue::ours || queue::bounded) {
        register_ping_pong<queue>(queue::bounded ? 1024 : 0);
      }
    });
  });
}
