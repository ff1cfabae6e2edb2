// SPDX-License-Identifier: BSL-1.0
// moodycamel::ConcurrentQueue (Debian: libconcurrentqueue-dev) without tokens: an unbounded
// queue of per-producer sub-queues, FIFO per producer only. The capacity argument pre-allocates.
#ifndef ASYNC_BENCH_ADAPTERS_MOODYCAMEL_H
#define ASYNC_BENCH_ADAPTERS_MOODYCAMEL_H

#if ASYNC_BENCH_HAVE_MOODYCAMEL

#include "retrying.h"

#include <iterator>
#include <memory>
#include <utility>

#include ASYNC_BENCH_MOODYCAMEL_HEADER

namespace async_bench {

template <typename T>
struct moodycamel_queue : retrying_adapter<moodycamel_queue<T>, moodycamel::ConcurrentQueue<T>, T> {
  using queue = moodycamel::ConcurrentQueue<T>;
  static const char* name() { return "moodycamel::ConcurrentQueue"; }
  static constexpr bool bulk = true;
  static bool try_push(queue& q, T& v) { return q.enqueue(std::move(v)); }
  static bool try_pop(queue& q, T& v) { return q.try_dequeue(v); }
  static void push_bulk(queue& q, T* v, std::size_t n) {
    retry([&] { return q.enqueue_bulk(std::make_move_iterator(v), n); });
  }
  static std::size_t pop_bulk(queue& q, T* out, std::size_t n) {
    return q.try_dequeue_bulk(out, n);
  }
};

/// The same queue through per-thread producer and consumer tokens: each producer gets its own
/// sub-queue and consumers sweep them, so order holds per producer only, with no shared ticket.
/// Each measured thread lives for one iteration, so its thread_local tokens die with it, before
/// the queue.
template <typename T>
struct moodycamel_queue_tokens
    : retrying_adapter<moodycamel_queue_tokens<T>, moodycamel::ConcurrentQueue<T>, T> {
  using queue = moodycamel::ConcurrentQueue<T>;
  static const char* name() { return "moodycamel::ConcurrentQueue tokens"; }
  static constexpr bool bulk = true;
  static constexpr bool primary = false;
  static moodycamel::ProducerToken& producer_token(queue& q) {
    thread_local queue* owner = nullptr;
    thread_local std::unique_ptr<moodycamel::ProducerToken> token;
    if (owner != &q) {
      token.reset(new moodycamel::ProducerToken(q));
      owner = &q;
    }
    return *token;
  }
  static moodycamel::ConsumerToken& consumer_token(queue& q) {
    thread_local queue* owner = nullptr;
    thread_local std::unique_ptr<moodycamel::ConsumerToken> token;
    if (owner != &q) {
      token.reset(new moodycamel::ConsumerToken(q));
      owner = &q;
    }
    return *token;
  }
  static bool try_push(queue& q, T& v) { return q.enqueue(producer_token(q), std::move(v)); }
  static bool try_pop(queue& q, T& v) { return q.try_dequeue(consumer_token(q), v); }
  static void push_bulk(queue& q, T* v, std::size_t n) {
    auto& token = producer_token(q);
    retry([&] { return q.enqueue_bulk(token, std::make_move_iterator(v), n); });
  }
  static std::size_t pop_bulk(queue& q, T* out, std::size_t n) {
    return q.try_dequeue_bulk(consumer_token(q), out, n);
  }
};

} // namespace async_bench

#define ASYNC_BENCH_QUEUES_MOODYCAMEL                                                              \
  async_bench::moodycamel_queue<T>, async_bench::moodycamel_queue_tokens<T>,

#else

#define ASYNC_BENCH_QUEUES_MOODYCAMEL

#endif

#endif
