// SPDX-License-Identifier: BSL-1.0
//
// The unbounded queue's parking: consumers that find the queue empty register and park on an
// epoch word; producers pay for a wake-up only when somebody is registered.
#ifndef ASYNC_DETAIL_UNBOUNDED_EVENT_COUNT_H
#define ASYNC_DETAIL_UNBOUNDED_EVENT_COUNT_H

#include "../config.h"

#include "../cache.h"
#include "../deadline.h"
#include "../park.h"

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace async {
namespace detail {

/// An event count: a thread that finds nothing to do registers, looks once more, and parks on
/// an epoch word; a thread that makes work available pays for a wake-up only when somebody is
/// registered (one load of a line that stays shared otherwise). Atom is the atomic type
/// template, Line the padding granule. Thread-safe.
///
///   waiter:  e = prepare_wait(); look again; if still nothing: wait(e); cancel_wait()
///   waker:   make the work visible (seq_cst); notify()
template <template <typename> class Atom, std::size_t Line>
class event_count {
public:
  /// Registers the caller; returns the epoch to pass to wait(). The caller must look for work
  /// once more before it waits, and call cancel_wait() afterwards in every case.
  std::uint64_t prepare_wait() noexcept {
    // (EC0) acquire: pairs with (EC3); a waiter that reads a wake-up's epoch sees what its waker
    // did before it (an older epoch only ends the park at once, the futex compares).
    const std::uint64_t epoch = epoch_.value.load(std::memory_order_acquire);
    // (EC1) seq_cst: registers the waiter before its second look; pairs with (EC2). Either
    // the waker's seq_cst publication comes first in the single total order and the second
    // look sees the work, or the waker's (EC2) load sees this registration.
    waiters_.value.fetch_add(1, std::memory_order_seq_cst);
    return epoch;
  }

  void cancel_wait() noexcept { waiters_.value.fetch_sub(1, std::memory_order_relaxed); }

  /// Parks until woken, until *deadline (if not null), or spuriously. False on timeout.
  bool wait(std::uint64_t epoch, const wait_clock::time_point* deadline) {
    return park(&epoch_.value, epoch, deadline);
  }

  /// Wakes every registered waiter, if there is one. Call after a seq_cst publication. Always
  /// inlined: it is a load and a branch on every publication, and a large caller (a producer
  /// loop with the queue's rare paths inlined) can otherwise exhaust the compiler's budget and
  /// turn it into a call (forced in optimized builds only: ASYNC_HOT_INLINE).
  ASYNC_HOT_INLINE void notify() noexcept {
    // (EC2) seq_cst: after the waker's publication; pairs with (EC1).
    if (ASYNC_UNLIKELY(waiters_.value.load(std::memory_order_seq_cst) != 0)) {
      wake_all();
    }
  }

  /// Wakes every waiter, registered or about to park (close()).
  void wake_all() noexcept {
    // (EC3) release: pairs with prepare_wait()'s acquire of the epoch.
    epoch_.value.fetch_add(1, std::memory_order_release);
    unpark_all(&epoch_.value);
  }

private:
  // Written by waiters: how many are registered.
  padded<Atom<std::uint32_t>, Line> waiters_;
  // Written by wakers: the word waiters park on.
  padded<Atom<std::uint64_t>, Line> epoch_;
};

} // namespace detail
} // namespace async

#endif // ASYNC_DETAIL_UNBOUNDED_EVENT_COUNT_H
