// SPDX-License-Identifier: BSL-1.0
// max0x7ba/atomic_queue (Debian: libatomic-queue-dev) with a run-time capacity: AtomicQueueB for
// uint64_t (the element is the atomic word), AtomicQueueB2 for other element types (a state word
// beside each element), through its blocking push/pop (spinning; its fastest mode) and its try
// calls.
#ifndef ASYNC_BENCH_ADAPTERS_ATOMIC_QUEUE_H
#define ASYNC_BENCH_ADAPTERS_ATOMIC_QUEUE_H

#if ASYNC_BENCH_HAVE_ATOMIC_QUEUE

#include "retrying.h"

#include <atomic_queue/atomic_queue.h>

#include <utility>

namespace async_bench {

// 0 is AtomicQueueB's empty marker: the harness pushes values from 1.
// (AtomicQueueB cannot even be named for a T that is no template argument of a value: a
// specialisation picks it.)
template <typename T>
struct atomic_queue_pick {
  using type = atomic_queue::AtomicQueueB2<T>;
};
template <>
struct atomic_queue_pick<std::uint64_t> {
  using type = atomic_queue::AtomicQueueB<std::uint64_t>;
};
template <typename T>
using atomic_queue_of = typename atomic_queue_pick<T>::type;

template <typename T>
struct atomic_queue_blocking : owning_adapter<atomic_queue_of<T>, T> {
  using queue = atomic_queue_of<T>;
  static const char* name() { return "atomic_queue"; }
  static constexpr bool bounded = true;
  static constexpr bool blocking = true;
  static void push(queue& q, T v) { q.push(std::move(v)); }
  static T pop(queue& q) { return q.pop(); }
  static bool try_pop(queue& q, T& v) { return q.try_pop(v); }
};

template <typename T>
struct atomic_queue_try : retrying_adapter<atomic_queue_try<T>, atomic_queue_of<T>, T> {
  using queue = atomic_queue_of<T>;
  static const char* name() { return "atomic_queue try"; }
  static constexpr bool bounded = true;
  static constexpr bool primary = false;
  static bool try_push(queue& q, T& v) { return q.try_push(std::move(v)); }
  static bool try_pop(queue& q, T& v) { return q.try_pop(v); }
};

} // namespace async_bench

#define ASYNC_BENCH_QUEUES_ATOMIC_QUEUE                                                            \
  async_bench::atomic_queue_blocking<T>, async_bench::atomic_queue_try<T>,

#else

#define ASYNC_BENCH_QUEUES_ATOMIC_QUEUE

#endif

#endif
