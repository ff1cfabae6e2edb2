// SPDX-License-Identifier: BSL-1.0
// Stand-in queues for the harness's own tests: a mutex and a deque, FIFO, or swapping every other
// pair of values (so that a per-producer FIFO check has something to find).
#ifndef ASYNC_BENCH_SELFTEST_DEQUE_ADAPTERS_H
#define ASYNC_BENCH_SELFTEST_DEQUE_ADAPTERS_H

#include "harness.h"

#include <deque>
#include <mutex>

namespace async_bench {

/// A mutex and a deque; `swaps` makes every other pop take the second value instead of the first.
template <bool swaps>
struct locked_deque {
  explicit locked_deque(std::size_t /*capacity: unbounded*/) {}
  std::mutex lock;
  std::deque<std::uint64_t> items;
  bool flip = false;
};

template <bool swaps>
struct deque_adapter : owning_adapter<locked_deque<swaps>> {
  using queue = locked_deque<swaps>;
  static const char* name() { return swaps ? "swapping deque" : "async::fifo deque"; }
  static void push(queue& q, std::uint64_t v) {
    std::lock_guard<std::mutex> g(q.lock);
    q.items.push_back(v);
  }
  static bool try_pop(queue& q, std::uint64_t& v) {
    std::lock_guard<std::mutex> g(q.lock);
    if (q.items.empty()) {
      return false;
    }
    q.flip = !q.flip;
    if (swaps && q.flip && q.items.size() >= 2) {
      v = q.items[1];
      q.items.erase(q.items.begin() + 1);
    } else {
      v = q.items.front();
      q.items.pop_front();
    }
    return true;
  }
  static std::uint64_t pop(queue& q) {
    std::uint64_t v = 0;
    retry([&] { return try_pop(q, v); });
    return v;
  }
};

} // namespace async_bench

#endif
