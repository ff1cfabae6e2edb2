// SPDX-License-Identifier: BSL-1.0
// max0x7ba/atomic_queue (Debian: libatomic-queue-dev): AtomicQueueB with a run-time capacity,
// through its blocking push/pop (spinning; its fastest mode) and its try calls.
#ifndef ASYNC_BENCH_ADAPTERS_ATOMIC_QUEUE_H
#define ASYNC_BENCH_ADAPTERS_ATOMIC_QUEUE_H

#include "../harness.h"

#include <atomic_queue/atomic_queue.h>

namespace async_bench {

struct atomic_queue_blocking {
  using queue = atomic_queue::AtomicQueueB<std::uint64_t>; // 0 is its empty marker
  static const char* name() { return "atomic_queue"; }
  static std::unique_ptr<queue> make(std::size_t capacity) {
    return std::unique_ptr<queue>(new queue(static_cast<unsigned>(capacity)));
  }
  static void push(queue& q, std::uint64_t v) { q.push(v); }
  static std::uint64_t pop(queue& q) { return q.pop(); }
};

struct atomic_queue_try {
  using queue = atomic_queue::AtomicQueueB<std::uint64_t>;
  static const char* name() { return "atomic_queue try"; }
  static std::unique_ptr<queue> make(std::size_t capacity) {
    return std::unique_ptr<queue>(new queue(static_cast<unsigned>(capacity)));
  }
  static void push(queue& q, std::uint64_t v) {
    retry([&] { return q.try_push(v); });
  }
  static std::uint64_t pop(queue& q) {
    std::uint64_t v = 0;
    retry([&] { return q.try_pop(v); });
    return v;
  }
};

} // namespace async_bench

#endif
