// SPDX-License-Identifier: BSL-1.0
//
// idle_workers: the pool's workers that have nothing to do, and the protocol that wakes them.
// A worker with nothing to do *searches* (looks at every queue, spinning a little) and then
// *parks* (sleeps on its own parker, listed here). Posters never take a lock on their way
// unless somebody must be woken, and they wake somebody only when nobody searches: a searcher
// will find their task. The rules, in the manner of Go's and Tokio's schedulers:
//
//   state word   (parked << 32) | searching        changed by seq_cst read-modify-writes only
//
//   poster       makes its task visible (a seq_cst store), then notify(): if nobody searches
//                and somebody is parked, pops a parked worker (under the lock) and wakes it;
//                the woken worker counts as searching from then on.
//   searcher     that finds a task stops searching; if it was the last searcher, notify():
//                a poster may have counted on it for another task.
//   parker       registers (listed, parked + 1, searching - 1 if it searched) and, if no
//                searcher is left, looks everywhere once more before it sleeps; one retired
//                meanwhile skips that look and notify()s instead, so somebody makes it.
//
// Why no task is left behind: a poster that saw a searcher, or saw nobody parked, relied on
// a worker that is awake. The last one to stop searching either found a task (and wakes
// another) or registers to park, which it does with a seq_cst read-modify-write after the
// poster's load (IW1 / IW2): its last look comes after the poster's store and sees the task.
// Every other change of the state word is seq_cst too, though the argument needs only that
// they are read-modify-writes: C++14 lets a seq_cst load return a change that is not seq_cst
// and does not happen before the last seq_cst one, so IW1 could read a state older than the
// last registration (C++20 forbids that, P0668; the weak-memory tests cannot show it).
//
// The watcher: tasks in next slots are not announced this way (a chain would pay a wake-up per
// link). One parked worker at most, the watcher, sleeps with a deadline while a task waits in
// some next slot, and looks again when it passes. A worker that fills a slot wakes a sleeper
// when nobody searches and nobody watches (IW3). A watcher that stops watching stores that
// with seq_cst and looks at the slots once more (a Dekker pair with IW3). Taking the watch
// needs no such pair: a filler that sees it taken relies on a watcher whose timed looks come
// anyway. It is an acquire all the same, for C++14's rule above: the watch a filler reads
// must not be an older watcher's, one that has given it up since (the acquire of the previous
// unwatch() puts that older watch before the last seq_cst one).
#ifndef ASYNC_DETAIL_POOL_IDLE_WORKERS_H
#define ASYNC_DETAIL_POOL_IDLE_WORKERS_H

#include "../config.h"

#include "../perturb.h"
#include "../word_lock.h"

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>

namespace async {
namespace detail {

/// Worker needs `idle_next` (Worker*), `listed` (bool) and `parker` (detail::parker), the first
/// two touched only under this object's lock. Thread-safe.
template <typename Worker, template <typename> class Atom = std::atomic>
class idle_workers {
public:
  static std::uint32_t searching(std::uint64_t state) noexcept {
    return static_cast<std::uint32_t>(state & 0xffffffffu);
  }
  static std::uint32_t parked(std::uint64_t state) noexcept {
    return static_cast<std::uint32_t>(state >> 32);
  }

  /// Workers parked right now (a racy count).
  std::uint32_t parked() const noexcept { return parked(state_.load(std::memory_order_relaxed)); }

  /// Whether no worker searches or sleeps right now but the caller (who searches if
  /// `self_searching`): a racy look.
  bool all_busy(bool self_searching) const noexcept {
    return state_.load(std::memory_order_relaxed) == (self_searching ? 1u : 0u);
  }

  // ---- searching --------------------------------------------------------------------------------

  /// Counts the caller as a searcher, unless searchers are already at least half of the busy
  /// workers (`active` minus the parked): then it only looks once before it parks, so that a
  /// trickle of posts keeps few cores spinning. False when refused.
  bool start_searching(std::size_t active) noexcept {
    std::uint64_t s = state_.load(std::memory_order_relaxed);
    for (;;) {
      const std::size_t busy = active > parked(s) ? active - parked(s) : 0;
      if (searching(s) != 0 && 2 * std::size_t(searching(s)) >= busy) {
        return false;
      }
      // seq_cst: the searcher's looks come after it is counted (see notify()).
      if (state_.compare_exchange_weak(s, s + 1, std::memory_order_seq_cst,
                                       std::memory_order_relaxed)) {
        return true;
      }
    }
  }

  /// A searcher that found a task stops searching; the last one wakes somebody (see above).
  void stop_searching() {
    if (searching(state_.fetch_sub(1, std::memory_order_seq_cst)) == 1) {
      notify();
    }
  }

  // ---- posters ----------------------------------------------------------------------------------

  /// Call after making a task visible with a seq_cst store: wakes a parked worker, as a
  /// searcher, if nobody searches.
  void notify() {
    // (IW1) seq_cst: after the poster's store; pairs with (IW2).
    const std::uint64_t s = state_.load(std::memory_order_seq_cst);
    if (searching(s) == 0 && parked(s) != 0) {
      wake_one(true);
    }
  }

  /// For a task put in a next slot (after its seq_cst publication): wakes a parked worker if
  /// nobody searches and nobody watches the slots. (IW3) seq_cst: pairs with (IW2) and with
  /// unwatch().
  void notify_for_slot() {
    const std::uint64_t s = state_.load(std::memory_order_seq_cst);
    if (searching(s) == 0 && parked(s) != 0 && !watching_.load(std::memory_order_seq_cst)) {
      wake_one(true);
    }
  }

  /// Wakes a parked worker as a searcher, if there is one; `only_if_nobody_searches` re-checks
  /// that under the lock.
  void wake_one(bool only_if_nobody_searches) {
    Worker* w = nullptr;
    {
      std::lock_guard<word_lock<Atom>> lock(lock_);
      const std::uint64_t s = state_.load(std::memory_order_relaxed); // changes under lock_
      if (parked(s) == 0 || (only_if_nobody_searches && searching(s) != 0)) {
        return;
      }
      w = top_;
      top_ = w->idle_next;
      w->listed = false;
      // seq_cst: it searches from now on (see notify()).
      state_.fetch_sub(parked_one - 1, std::memory_order_seq_cst);
    }
    ASYNC_PERTURB(); // popped, not yet woken
    w->parker.unpark();
  }

  // ---- parking (the worker itself) --------------------------------------------------------------

  /// Lists `self` as parked (and no longer searching, if it was). Returns how many searchers
  /// are left: with none, the caller must look everywhere once more before it sleeps.
  std::uint32_t register_parked(Worker& self, bool was_searching) {
    std::lock_guard<word_lock<Atom>> lock(lock_);
    self.idle_next = top_;
    self.listed = true;
    top_ = &self;
    // (IW2) seq_cst: registered before the caller's last look; pairs with (IW1) and (IW3).
    const std::uint64_t before =
        state_.fetch_add(parked_one - (was_searching ? 1 : 0), std::memory_order_seq_cst);
    return searching(before) - (was_searching ? 1 : 0);
  }

  /// `self` leaves the list. True when it was still listed; false when a notify() took it off
  /// first: it then counts as a searcher (and has a token in its parker, or will have).
  bool unregister(Worker& self) {
    std::lock_guard<word_lock<Atom>> lock(lock_);
    if (!self.listed) {
      return false;
    }
    Worker** at = &top_;
    while (*at != &self) {
      at = &(*at)->idle_next;
    }
    *at = self.idle_next;
    self.listed = false;
    state_.fetch_sub(parked_one, std::memory_order_seq_cst);
    return true;
  }

  /// Whether `self` is still listed (not woken by a notify()).
  bool listed(const Worker& self) {
    std::lock_guard<word_lock<Atom>> lock(lock_);
    return self.listed;
  }

  // ---- the watcher ------------------------------------------------------------------------------

  /// Becomes the watcher if there is none (true). acquire: pairs with the previous watcher's
  /// unwatch() (see the file comment: no Dekker pair here, the watcher's timed looks follow).
  bool try_watch() noexcept {
    bool none = false;
    return watching_.compare_exchange_strong(none, true, std::memory_order_acquire,
                                             std::memory_order_relaxed);
  }
  /// Stops watching. seq_cst: a watcher that stops looks at the slots once more afterwards;
  /// pairs with notify_for_slot().
  void unwatch() noexcept { watching_.store(false, std::memory_order_seq_cst); }

private:
  static constexpr std::uint64_t parked_one = std::uint64_t(1) << 32;

  Atom<std::uint64_t> state_{0}; // (parked << 32) | searching: see above
  Atom<bool> watching_{false};   // a parked worker watches the next slots
  word_lock<Atom> lock_;         // guards the list
  Worker* top_ = nullptr;        // the parked workers, the most recent first
};

#if ASYNC_CPLUSPLUS < 17
template <typename Worker, template <typename> class Atom>
constexpr std::uint64_t idle_workers<Worker, Atom>::parked_one;
#endif

} // namespace detail
} // namespace async

#endif // ASYNC_DETAIL_POOL_IDLE_WORKERS_H
