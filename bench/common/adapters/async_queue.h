// SPDX-License-Identifier: BSL-1.0
// async::queue: the unbounded queue through its non-blocking calls with the harness's
// spin_wait on empty, and through its bulk calls (bulk_enqueue / bulk_dequeue).
#ifndef ASYNC_BENCH_ADAPTERS_ASYNC_QUEUE_H
#define ASYNC_BENCH_ADAPTERS_ASYNC_QUEUE_H

#include "retrying.h"

#include <async/queue.h>

#include <iterator>
#include <utility>

namespace async_bench {

/// The calls of an async::queue<T, Traits>. Its enqueue never fails, so push is that call; pop
/// retries dequeue.
template <typename T, typename Traits>
struct async_unbounded_calls
    : retrying_adapter<async_unbounded_calls<T, Traits>, async::queue<T, Traits>, T> {
  using queue = async::queue<T, Traits>;
  static constexpr bool ours = true;
  static constexpr bool bulk = true;
  static void push(queue& q, T v) { q.enqueue(std::move(v)); }
  static bool try_pop(queue& q, T& v) { return q.dequeue(v); }
  static void push_bulk(queue& q, T* v, std::size_t n) {
    q.bulk_enqueue(std::make_move_iterator(v), n);
  }
  static std::size_t pop_bulk(queue& q, T* out, std::size_t n) { return q.bulk_dequeue(out, n); }
};

template <typename T>
struct async_unbounded : async_unbounded_calls<T, async::traits> {
  static const char* name() { return "async::queue"; }
};

/// The blocking consumer call (parks on an empty queue instead of the harness's spin_wait).
template <typename T>
struct async_unbounded_blocking : async_unbounded<T> {
  using queue = typename async_unbounded<T>::queue;
  static const char* name() { return "async::queue blocking_dequeue"; }
  static constexpr bool bulk = false; // measured once, through async_unbounded
  static constexpr bool blocking = true;
  static constexpr bool primary = false;
  static T pop(queue& q) {
    T v{};
    q.blocking_dequeue(v);
    return v;
  }
};

/// Consecutive tickets side by side in their lines (traits::SPREAD_TICKETS = false): the layout
/// for bulk calls and one producer with one consumer.
struct side_by_side_traits : async::traits {
  static constexpr bool SPREAD_TICKETS = false;
};
template <typename T>
struct async_unbounded_side_by_side : async_unbounded_calls<T, side_by_side_traits> {
  static const char* name() { return "async::queue side by side"; }
  static constexpr bool primary = false;
};

} // namespace async_bench

#define ASYNC_BENCH_QUEUES_ASYNC_UNBOUNDED                                                         \
  async_bench::async_unbounded<T>, async_bench::async_unbounded_blocking<T>,                       \
      async_bench::async_unbounded_side_by_side<T>,

#endif
