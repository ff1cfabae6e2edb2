// SPDX-License-Identifier: BSL-1.0
// async::bounded_queue: its blocking calls (fetch_add tickets, park when waiting) and its try
// calls (CAS tickets) with the harness's spin_wait.
#ifndef ASYNC_BENCH_ADAPTERS_ASYNC_BOUNDED_QUEUE_H
#define ASYNC_BENCH_ADAPTERS_ASYNC_BOUNDED_QUEUE_H

#include "../harness.h"

#include <async/bounded_queue.h>

namespace async_bench {

struct async_bounded_blocking : owning_adapter<async::bounded_queue<std::uint64_t>> {
  static const char* name() { return "async::bounded_queue"; }
  static constexpr bool ours = true;
  static constexpr bool bounded = true;
  static constexpr bool blocking = true;
  static void push(queue& q, std::uint64_t v) { q.blocking_enqueue(v); }
  static std::uint64_t pop(queue& q) {
    std::uint64_t v = 0;
    q.blocking_dequeue(v);
    return v;
  }
  static bool try_pop(queue& q, std::uint64_t& v) { return q.dequeue(v); }
};

struct async_bounded_try : owning_adapter<async::bounded_queue<std::uint64_t>> {
  static const char* name() { return "async::bounded_queue try"; }
  static constexpr bool ours = true;
  static constexpr bool bounded = true;
  static constexpr bool primary = false;
  static void push(queue& q, std::uint64_t v) {
    retry([&] { return q.enqueue(v); });
  }
  static std::uint64_t pop(queue& q) {
    std::uint64_t v = 0;
    retry([&] { return try_pop(q, v); });
    return v;
  }
  static bool try_pop(queue& q, std::uint64_t& v) { return q.dequeue(v); }
};

} // namespace async_bench

#define ASYNC_BENCH_QUEUES_ASYNC_BOUNDED                                                           \
  async_bench::async_bounded_blocking, async_bench::async_bounded_try,

#endif
