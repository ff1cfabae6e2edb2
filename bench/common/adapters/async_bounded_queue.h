// SPDX-License-Identifier: BSL-1.0
// async::bounded_queue: its blocking calls (fetch_add tickets, park when waiting) and its try
// calls (CAS tickets) with the harness's spin_wait, the latter also with tickets side by side.
#ifndef ASYNC_BENCH_ADAPTERS_ASYNC_BOUNDED_QUEUE_H
#define ASYNC_BENCH_ADAPTERS_ASYNC_BOUNDED_QUEUE_H

#include "retrying.h"

#include <async/bounded_queue.h>

namespace async_bench {

template <typename T>
struct async_bounded_blocking : owning_adapter<async::bounded_queue<T>, T> {
  using queue = async::bounded_queue<T>;
  static const char* name() { return "async::bounded_queue"; }
  static constexpr bool ours = true;
  static constexpr bool bounded = true;
  static constexpr bool blocking = true;
  static void push(queue& q, T v) { q.blocking_enqueue(std::move(v)); }
  static T pop(queue& q) {
    T v{};
    q.blocking_dequeue(v);
    return v;
  }
  static bool try_pop(queue& q, T& v) { return q.dequeue(v); }
};

template <typename T>
struct async_bounded_try : retrying_adapter<async_bounded_try<T>, async::bounded_queue<T>, T> {
  using queue = async::bounded_queue<T>;
  static const char* name() { return "async::bounded_queue try"; }
  static constexpr bool ours = true;
  static constexpr bool bounded = true;
  static constexpr bool primary = false;
  static bool try_push(queue& q, T& v) { return q.enqueue(std::move(v)); }
  static bool try_pop(queue& q, T& v) { return q.dequeue(v); }
};

/// Consecutive tickets side by side in their lines (bounded_traits::SPREAD_TICKETS = false): the
/// layout for one producer with one consumer. Its try calls, the fastest pairing with the
/// reference ring's.
struct bounded_side_by_side_traits : async::bounded_traits {
  static constexpr bool SPREAD_TICKETS = false;
};
template <typename T>
struct async_bounded_side_by_side
    : retrying_adapter<async_bounded_side_by_side<T>,
                       async::bounded_queue<T, bounded_side_by_side_traits>, T> {
  using queue = async::bounded_queue<T, bounded_side_by_side_traits>;
  static const char* name() { return "async::bounded_queue side by side try"; }
  static constexpr bool ours = true;
  static constexpr bool bounded = true;
  static constexpr bool primary = false;
  static bool try_push(queue& q, T& v) { return q.enqueue(std::move(v)); }
  static bool try_pop(queue& q, T& v) { return q.dequeue(v); }
};

} // namespace async_bench

#define ASYNC_BENCH_QUEUES_ASYNC_BOUNDED                                                           \
  async_bench::async_bounded_blocking<T>, async_bench::async_bounded_try<T>,                       \
      async_bench::async_bounded_side_by_side<T>,

#endif
