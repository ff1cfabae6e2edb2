// SPDX-License-Identifier: BSL-1.0
// Funnel, after the benchmark of the tachyonix channel: 13 producers and one consumer in a tight
// loop (the usual "MPSC benchmark"), the capacity swept. It runs through the same loop as
// queue_throughput, with 14 threads whatever N is. Unbounded queues have no capacity to sweep:
// they are measured once, in the row "unbounded". atomic_queue rounds a capacity up to a power of
// two of at least 256 (its index shuffling needs that), so its small capacities are not small.
#include "adapters/async_bounded_queue.h"
#include "adapters/async_queue.h"
#if ASYNC_BENCH_HAVE_ATOMIC_QUEUE
#include "adapters/atomic_queue.h"
#endif
#if ASYNC_BENCH_HAVE_ASIO
#include "adapters/boost_lockfree.h"
#endif
#if ASYNC_BENCH_HAVE_MOODYCAMEL
#include "adapters/moodycamel.h"
#endif
#if ASYNC_BENCH_HAVE_TBB
#include "adapters/tbb_queues.h"
#endif

namespace async_bench {

constexpr shape funnel_shape{13, 1};

template <typename Adapter>
void register_funnel(const std::vector<std::size_t>& capacities) {
  for (std::size_t cap : capacities) {
    const std::string params =
        funnel_shape.name() + "/" + (cap ? "cap:" + std::to_string(cap) : "unbounded");
    configure(benchmark::RegisterBenchmark(
        bench_name("funnel", params, Adapter::name()).c_str(),
        [cap](benchmark::State& st) { queue_throughput<Adapter>(st, funnel_shape, cap); }));
  }
}

} // namespace async_bench

int main(int argc, char** argv) {
  using namespace async_bench;
  return run_main(argc, argv, [] {
    const std::vector<std::size_t> caps = {1, 16, 128, 1024, 8192};
    const std::vector<std::size_t> unbounded = {0};
    register_funnel<async_bounded_blocking>(caps);
    register_funnel<async_bounded_try>(caps);
#if ASYNC_BENCH_HAVE_ATOMIC_QUEUE
    register_funnel<atomic_queue_blocking>(caps);
    register_funnel<atomic_queue_try>(caps);
#endif
#if ASYNC_BENCH_HAVE_TBB
    register_funnel<tbb_bounded_queue>(caps);
#endif
    register_funnel<async_unbounded>(unbounded);
    register_funnel<async_unbounded_blocking>(unbounded);
#if ASYNC_BENCH_HAVE_MOODYCAMEL
    register_funnel<moodycamel_queue>(unbounded);
    register_funnel<moodycamel_queue_tokens>(unbounded);
#endif
#if ASYNC_BENCH_HAVE_TBB
    register_funnel<tbb_queue>(unbounded);
#endif
#if ASYNC_BENCH_HAVE_ASIO
    register_funnel<boost_lockfree_queue>(unbounded);
#endif
  });
}
