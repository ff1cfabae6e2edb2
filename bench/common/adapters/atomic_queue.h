// SPDX-License-Identifier: BSL-1.0
// max0x7ba/atomic_queue (Debian: libatomic-queue-dev): AtomicQueueB with a run-time capacity,
// through its blocking push/pop (spinning; its fastest mode) and its try calls.
#ifndef ASYNC_BENCH_ADAPTERS_ATOMIC_QUEUE_H
#define ASYNC_BENCH_ADAPTERS_ATOMIC_QUEUE_H

#if ASYNC_BENCH_HAVE_ATOMIC_QUEUE

#include "../harness.h"

#include <atomic_queue/atomic_queue.h>

namespace async_bench {

// 0 is AtomicQueueB's empty marker: the harness pushes values from 1.
struct atomic_queue_blocking : owning_adapter<atomic_queue::AtomicQueueB<std::uint64_t>> {
  static const char* name() { return "atomic_queue"; }
  static constexpr bool bounded = true;
  static constexpr bool blocking = true;
  static void push(queue& q, std::uint64_t v) { q.push(v); }
  static std::uint64_t pop(queue& q) { return q.pop(); }
  static bool try_pop(queue& q, std::uint64_t& v) { return q.try_pop(v); }
};

struct atomic_queue_try : owning_adapter<atomic_queue::AtomicQueueB<std::uint64_t>> {
  static const char* name() { return "atomic_queue try"; }
  static constexpr bool bounded = true;
  static constexpr bool primary = false;
  static void push(queue& q, std::uint64_t v) {
    retry([&] { return q.try_push(v); });
  }
  static std::uint64_t pop(queue& q) {
    std::uint64_t v = 0;
    retry([&] { return try_pop(q, v); });
    return v;
  }
  static bool try_pop(queue& q, std::uint64_t& v) { return q.try_pop(v); }
};

} // namespace async_bench

#define ASYNC_BENCH_QUEUES_ATOMIC_QUEUE                                                            \
  async_bench::atomic_queue_blocking, async_bench::atomic_queue_try,

#else

#define ASYNC_BENCH_QUEUES_ATOMIC_QUEUE

#endif

#endif
