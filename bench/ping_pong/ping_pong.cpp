// SPDX-License-Identifier: BSL-1.0
// Ping-pong: one value bouncing between two threads through two queues (latency of a hand-off).
#include "adapters/async_bounded_queue.h"
#include "adapters/async_queue.h"
#if ASYNC_BENCH_HAVE_ATOMIC_QUEUE
#include "adapters/atomic_queue.h"
#endif
#if ASYNC_BENCH_HAVE_ASIO
#include "adapters/boost_spsc.h"
#endif

int main(int argc, char** argv) {
  using namespace async_bench;
  return run_main(argc, argv, [] {
    register_ping_pong<async_bounded_blocking>(1024);
    register_ping_pong<async_bounded_try>(1024);
    register_ping_pong<async_unbounded>(0);
    register_ping_pong<async_unbounded_blocking>(0);
#if ASYNC_BENCH_HAVE_ATOMIC_QUEUE
    register_ping_pong<atomic_queue_blocking>(1024);
    register_ping_pong<atomic_queue_try>(1024);
#endif
#if ASYNC_BENCH_HAVE_ASIO
    register_ping_pong<boost_spsc_queue>(1024);
#endif
  });
}
