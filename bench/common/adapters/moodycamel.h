// SPDX-License-Identifier: BSL-1.0
// moodycamel::ConcurrentQueue (Debian: libconcurrentqueue-dev) without tokens: an unbounded
// queue of per-producer sub-queues, FIFO per producer only. The capacity argument pre-allocates.
#ifndef ASYNC_BENCH_ADAPTERS_MOODYCAMEL_H
#define ASYNC_BENCH_ADAPTERS_MOODYCAMEL_H

#include "../harness.h"

#include ASYNC_BENCH_MOODYCAMEL_HEADER

namespace async_bench {

struct moodycamel_queue : owning_adapter<moodycamel::ConcurrentQueue<std::uint64_t>> {
  static const char* name() { return "moodycamel::ConcurrentQueue"; }
  static void push(queue& q, std::uint64_t v) {
    retry([&] { return q.enqueue(v); });
  }
  static std::uint64_t pop(queue& q) {
    std::uint64_t v = 0;
    retry([&] { return q.try_dequeue(v); });
    return v;
  }
  static void push_bulk(queue& q, const std::uint64_t* v, std::size_t n) {
    retry([&] { return q.enqueue_bulk(v, n); });
  }
  static std::size_t pop_bulk(queue& q, std::uint64_t* out, std::size_t n) {
    return q.try_dequeue_bulk(out, n);
  }
};

} // namespace async_bench

#endif
