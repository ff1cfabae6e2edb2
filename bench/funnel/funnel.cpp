// SPDX-License-Identifier: BSL-1.0
// Funnel, after the benchmark of the tachyonix channel: 13 producers and one consumer in a tight
// loop (the usual "MPSC benchmark"), the capacity swept. It runs through the same loop as
// queue_throughput, with 14 threads whatever N is. Unbounded queues have no capacity to sweep:
// they are measured once, in the row "unbounded". atomic_queue rounds a capacity up to a power of
// two of at least 256 (its index shuffling needs that), so its small capacities are not small.
#include "adapters/queues.h"

namespace async_bench {

constexpr shape funnel_shape{13, 1};

template <typename Adapter>
void register_funnel(const std::vector<std::size_t>& capacities) {
  for (std::size_t cap : capacities) {
    const std::string params =
        funnel_shape.name() + "/" + (cap ? "cap:" + std::to_string(cap) : "unbounded");
    add_case(
        bench_name("funnel", params, Adapter::name()),
        [cap](benchmark::State& st) { queue_throughput<Adapter>(st, funnel_shape, cap); },
        call_style<Adapter>());
  }
}

} // namespace async_bench

int main(int argc, char** argv) {
  using namespace async_bench;
  const binary_info info{"13 producers into one consumer, the capacity swept", "items", true};
  return run_main(argc, argv, info, [] {
    const std::vector<std::size_t> caps = {1, 16, 128, 1024, 8192};
    for_each_queue([&](auto competitor) {
      using queue = typename decltype(competitor)::type;
      if constexpr (!queue::spsc) {
        register_funnel<queue>(queue::bounded ? caps : std::vector<std::size_t>{0});
      }
    });
  });
}
