// SPDX-License-Identifier: BSL-1.0
//
// parker: one thread (the owner) sleeps until another wakes it, with a wake-up token that is
// never lost: an unpark() that comes before the owner's park() makes that park() return at
// once (as Rust's std::thread::park, or java.util.concurrent.locks.LockSupport). The word, of
// the atomic seam (Atom):
//
//   0   empty: nobody sleeps, no token
//   1   parked: the owner sleeps, or is about to
//   2   notified: a token waits for the owner
//
//   owner:  park()    0 -> 1, sleeps while 1;  2 -> 0 (takes the token)
//   waker:  unpark()  any -> 2, and a futex wake-up only if it was 1
#ifndef ASYNC_DETAIL_PARKER_H
#define ASYNC_DETAIL_PARKER_H

#include "config.h"

#include "deadline.h"
#include "park.h"

#include <atomic>
#include <cstdint>

namespace async {
namespace detail {

/// Thread-safe in the two roles above: one owner, any number of wakers.
template <template <typename> class Atom = std::atomic>
class parker {
public:
  /// Owner: sleeps until a token comes (true; it is taken) or until `deadline` passes (false).
  /// no_deadline() waits for the token however long it takes.
  bool park(wait_clock::time_point deadline) {
    std::uint64_t s = empty;
    // (PK1) acquire, on taking a token: pairs with (PK2); what the waker did before its
    // unpark() happens before the owner's return.
    if (!word_.compare_exchange_strong(s, parked, std::memory_order_acquire,
                                       std::memory_order_acquire)) {
      word_.store(empty, std::memory_order_relaxed); // s was `notified`: the owner's own word
      return true;
    }
    const wait_clock::time_point* until = deadline == no_deadline() ? nullptr : &deadline;
    for (;;) {
      const bool in_time = detail::park(&word_, parked, until);
      // (PK1) acquire, as above.
      s = word_.load(std::memory_order_acquire);
      if (s == notified) {
        word_.store(empty, std::memory_order_relaxed);
        return true;
      }
      if (!in_time) {
        // (PK1) acquire (on failure: a token came in just now).
        if (word_.compare_exchange_strong(s, empty, std::memory_order_acquire,
                                          std::memory_order_acquire)) {
          return false;
        }
        word_.store(empty, std::memory_order_relaxed);
        return true;
      }
      // Woken without a token (a spurious return of the futex): sleep on.
    }
  }

  /// Gives the owner a token, and wakes it if it sleeps. Thread-safe.
  void unpark() {
    // (PK2) release: pairs with (PK1).
    if (word_.exchange(notified, std::memory_order_release) == parked) {
      unpark_one(&word_);
    }
  }

private:
  // The word's values (an enum: constants that need no definition outside the class in C++14).
  enum : std::uint64_t { empty = 0, parked = 1, notified = 2 };

  Atom<std::uint64_t> word_{empty};
};

} // namespace detail
} // namespace async

#endif // ASYNC_DETAIL_PARKER_H
