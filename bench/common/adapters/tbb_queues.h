// SPDX-License-Identifier: BSL-1.0
// oneTBB's queues: concurrent_bounded_queue (blocking push/pop at a set capacity) and
// concurrent_queue (unbounded; try_pop with the harness's spin_wait).
#ifndef ASYNC_BENCH_ADAPTERS_TBB_QUEUES_H
#define ASYNC_BENCH_ADAPTERS_TBB_QUEUES_H

#if ASYNC_BENCH_HAVE_TBB

#include "retrying.h"

#include <tbb/concurrent_queue.h>

#include <utility>

namespace async_bench {

template <typename T>
struct tbb_bounded_queue : queue_traits {
  using queue = tbb::concurrent_bounded_queue<T>;
  using value_type = T;
  static const char* name() { return "tbb::concurrent_bounded_queue"; }
  static constexpr bool bounded = true;
  static constexpr bool blocking = true;
  static std::unique_ptr<queue> make(std::size_t capacity) {
    std::unique_ptr<queue> q(new queue);
    q->set_capacity(static_cast<std::ptrdiff_t>(capacity));
    return q;
  }
  static void push(queue& q, T v) { q.push(std::move(v)); }
  static T pop(queue& q) {
    T v{};
    q.pop(v);
    return v;
  }
  static bool try_pop(queue& q, T& v) { return q.try_pop(v); }
};

/// Its push never fails, so push is that call; pop retries try_pop.
template <typename T>
struct tbb_queue : retrying_adapter<tbb_queue<T>, tbb::concurrent_queue<T>, T> {
  using queue = tbb::concurrent_queue<T>;
  static const char* name() { return "tbb::concurrent_queue"; }
  static std::unique_ptr<queue> make(std::size_t) { return std::unique_ptr<queue>(new queue); }
  static void push(queue& q, T v) { q.push(std::move(v)); }
  static bool try_pop(queue& q, T& v) { return q.try_pop(v); }
};

} // namespace async_bench

#define ASYNC_BENCH_QUEUES_TBB async_bench::tbb_bounded_queue<T>, async_bench::tbb_queue<T>,

#else

#define ASYNC_BENCH_QUEUES_TBB

#endif

#endif
