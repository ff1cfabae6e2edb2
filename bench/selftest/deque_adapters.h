// SPDX-License-Identifier: BSL-1.0
// Stand-in queues for the harness's own tests: a mutex and a deque, FIFO, or swapping every other
// pair of values (so that a per-producer FIFO check has something to find), or damaging one
// element in a thousand (so that the check of whole elements has something to find).
#ifndef ASYNC_BENCH_SELFTEST_DEQUE_ADAPTERS_H
#define ASYNC_BENCH_SELFTEST_DEQUE_ADAPTERS_H

#include "adapters/retrying.h"

#include <deque>
#include <mutex>
#include <string>
#include <utility>

namespace async_bench {

/// A mutex and a deque; `swaps` makes every other pop take the second value instead of the first.
template <bool swaps, typename T = std::uint64_t>
struct locked_deque {
  explicit locked_deque(std::size_t /*capacity: unbounded*/) {}
  std::mutex lock;
  std::deque<T> items;
  bool flip = false;
  std::size_t pushed = 0;
};

/// Damages elements. A uint64_t has no redundancy: its damage loses a producer's values k and
/// k + 2 and sends k + 1 twice instead, which leaves the sum as it was (only the sum of squares
/// finds it); a struct gets a changed word and a string a changed character, one in a thousand.
inline bool damage(std::uint64_t& v, std::size_t) {
  const std::uint64_t sequence = v & sequence_mask;
  v += sequence % 1000 == 1 ? 1 : sequence % 1000 == 3 ? std::uint64_t(0) - 1 : 0;
  return true;
}
inline bool damage(payload64& p, std::size_t pushed) {
  p.check[3] ^= pushed % 1000 == 0 ? 1 : 0;
  return true;
}
inline bool damage(std::string& s, std::size_t pushed) {
  if (pushed % 1000 == 0) {
    s[s.size() - 1] = '?';
  }
  return true;
}

template <bool swaps, typename T = std::uint64_t, bool damages = false, bool is_ours = false>
struct deque_adapter
    : retrying_adapter<deque_adapter<swaps, T, damages, is_ours>, locked_deque<swaps, T>, T> {
  static constexpr bool ours = is_ours; // ours: a FIFO violation fails the case
  using queue = locked_deque<swaps, T>;
  static const char* name() {
    return damages ? "damaging deque"
           : swaps ? (is_ours ? "async::swapping deque" : "swapping deque")
                   : "async::fifo deque";
  }
  static void push(queue& q, T v) {
    std::lock_guard<std::mutex> g(q.lock);
    if (damages) {
      damage(v, ++q.pushed);
    }
    q.items.push_back(std::move(v));
  }
  static bool try_pop(queue& q, T& v) {
    std::lock_guard<std::mutex> g(q.lock);
    if (q.items.empty()) {
      return false;
    }
    q.flip = !q.flip;
    if (swaps && q.flip && q.items.size() >= 2) {
      v = std::move(q.items[1]);
      q.items.erase(q.items.begin() + 1);
    } else {
      v = std::move(q.items.front());
      q.items.pop_front();
    }
    return true;
  }
};

} // namespace async_bench

#endif
