// SPDX-License-Identifier: BSL-1.0
//
// idle_workers: the pool's workers that have nothing to do. They park on a condition variable
// under the pool's lock; posters, which do not take that lock on their fast paths, look at two
// counters first and pay for a notification only when somebody sleeps:
//
//   sleepers   workers parked or about to park (counted before their last look for work)
//   parked     workers waiting on the condition variable right now (idlesize())
//   watching   one parked worker wakes up now and then to look at the next slots
#ifndef ASYNC_DETAIL_IDLE_WORKERS_H
#define ASYNC_DETAIL_IDLE_WORKERS_H

#include "config.h"

#include "wait.h"

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <mutex>

namespace async {
namespace detail {

/// Thread-safe; the members that say so need the pool's lock (the one the condition variable
/// waits with).
class idle_workers {
public:
  // ---- posters, without the pool's lock -------------------------------------------------------

  /// Whether a worker is parked or about to park. (IW1) seq_cst: after the poster published
  /// its task; pairs with (IW2). Either the worker about to park sees the task in its last
  /// look, or the poster sees it counted and wakes it.
  bool anyone_asleep() const noexcept { return sleepers_.load(std::memory_order_seq_cst) != 0; }

  /// Whether a worker sleeps and none watches the next slots (so a task put in a next slot
  /// must wake one). seq_cst: pairs with (IW2) and with (IW3).
  bool asleep_unwatched() const noexcept {
    return sleepers_.load(std::memory_order_seq_cst) != 0 &&
           !watching_.load(std::memory_order_seq_cst);
  }

  /// Workers waiting on the condition variable right now (a racy count).
  std::size_t parked() const noexcept { return parked_.load(std::memory_order_relaxed); }

  // ---- the pool's lock held -----------------------------------------------------------------

  /// A worker that found nothing counts itself as a sleeper before its last look for work.
  /// (IW2) seq_cst: pairs with (IW1).
  void fall_asleep() noexcept { sleepers_.fetch_add(1, std::memory_order_seq_cst); }
  void wake_up() noexcept { sleepers_.fetch_sub(1, std::memory_order_relaxed); }
  /// The sleepers (exact: the count changes only under the lock).
  std::size_t sleepers() const noexcept { return sleepers_.load(std::memory_order_relaxed); }

  /// Whether a parked worker watches the next slots; one at most.
  bool watched() const noexcept { return watching_.load(std::memory_order_relaxed); }
  /// (IW3) seq_cst: a watcher that stops looks at the slots once more afterwards; pairs with
  /// asleep_unwatched().
  void watch(bool on) noexcept { watching_.store(on, std::memory_order_seq_cst); }

  /// Parks the calling worker until notified, spuriously, or until `deadline`; false on
  /// timeout.
  bool park(std::unique_lock<std::mutex>& lock, wait_clock::time_point deadline) {
    parked_.fetch_add(1, std::memory_order_relaxed);
    const bool woken = cv_wait_until(cv_, lock, deadline);
    parked_.fetch_sub(1, std::memory_order_relaxed);
    return woken;
  }

  void notify_one() { cv_.notify_one(); }
  void notify_all() { cv_.notify_all(); }
  /// Wakes a parked worker if there is one (the lock held: it cannot be missed).
  void notify_one_if_parked() {
    if (parked() != 0) {
      cv_.notify_one();
    }
  }

private:
  std::condition_variable cv_;
  std::atomic<std::size_t> sleepers_{0};
  std::atomic<std::size_t> parked_{0};
  std::atomic<bool> watching_{false};
};

} // namespace detail
} // namespace async

#endif // ASYNC_DETAIL_IDLE_WORKERS_H
