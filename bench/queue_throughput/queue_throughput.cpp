// SPDX-License-Identifier: BSL-1.0
// Queue throughput: P producers x C consumers, bounded queues at capacities 1024 and 65536.
#include "adapters/async_bounded_queue.h"
#if ASYNC_BENCH_HAVE_ATOMIC_QUEUE
#include "adapters/atomic_queue.h"
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
  });
}
