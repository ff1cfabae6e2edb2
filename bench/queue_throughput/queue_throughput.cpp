// SPDX-License-Identifier: BSL-1.0
// Queue throughput: P producers x C consumers, capacities 1024 and 65536. Unbounded peers
// pre-allocate the capacity and otherwise ignore it.
#include "adapters/async_bounded_queue.h"
#if ASYNC_BENCH_HAVE_ATOMIC_QUEUE
#include "adapters/atomic_queue.h"
#endif
#if ASYNC_BENCH_HAVE_ASIO
#include "adapters/boost_lockfree.h"
#include "adapters/boost_spsc.h"
#endif
#if ASYNC_BENCH_HAVE_MOODYCAMEL
#include "adapters/moodycamel.h"
#endif
#if ASYNC_BENCH_HAVE_TBB
#include "adapters/tbb_queues.h"
#endif

int main(int argc, char** argv) {
  using namespace async_bench;
  return run_main(argc, argv, [] {
    const std::vector<std::size_t> caps = {1024, 65536};
    register_throughput<async_bounded_blocking>(caps);
    register_throughput<async_bounded_try>(caps);
#if ASYNC_BENCH_HAVE_ATOMIC_QUEUE
    register_throughput<atomic_queue_blocking>(caps);
    register_throughput<atomic_queue_try>(caps);
#endif
#if ASYNC_BENCH_HAVE_TBB
    register_throughput<tbb_bounded_queue>(caps);
    register_throughput<tbb_queue>(caps);
#endif
#if ASYNC_BENCH_HAVE_MOODYCAMEL
    register_throughput<moodycamel_queue>(caps);
#endif
#if ASYNC_BENCH_HAVE_ASIO
    register_throughput<boost_lockfree_queue>(caps);
    // Single producer, single consumer only: registered for 1p1c alone.
    for (std::size_t cap : caps) {
      configure(benchmark::RegisterBenchmark(
          bench_name("throughput", "cap:" + std::to_string(cap) + "/1p1c", boost_spsc_queue::name())
              .c_str(),
          [cap](benchmark::State& st) {
            queue_throughput<boost_spsc_queue>(st, {1, 1}, cap);
          }));
    }
#endif
  });
}
