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
//   owner:  park()    0 -> 1, sleeps while 1;  2 -> 0 (takes the token, by an exchange)
//   waker:  unpark()  any -> 2, and a futex wake-up only if it was 1
//
// The owner takes a token with a read-modify-write, not a plain store: a second unpark() that
// finds a token already there leaves it and wakes nobody, counting on the owner's take. A
// store after the owner's look would erase that second token without reading it, and the
// owner would return ordered after the first waker only (a pool worker then missed its
// retire flag, set before the second unpark(), and slept for ever: Relacy, pool scenarios).
// The exchange reads the last token in the word's order, so what every waker whose unpark()
// came before it did happens before the owner's return.
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
    // relaxed: success reads the owner's own `empty`; a token found is taken by take_token(),
    // which acquires.
    if (!word_.compare_exchange_strong(s, parked, std::memory_order_relaxed,
                                       std::memory_order_relaxed)) {
      return take_token(); // s was `notified`
    }
    const wait_clock::time_point* until = deadline == no_deadline() ? nullptr : &deadline;
    for (;;) {
      const bool in_time = detail::park(&word_, parked, until);
      // relaxed: a look; take_token() acquires.
      s = word_.load(std::memory_order_relaxed);
      if (s == notified) {
        return take_token();
      }
      if (!in_time) {
        // relaxed: nothing to acquire without a token (on failure: one came in just now).
        if (word_.compare_exchange_strong(s, empty, std::memory_order_relaxed,
                                          std::memory_order_relaxed)) {
          return false;
        }
        return take_token();
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
  // The word holds a token (only wakers write while it does): takes it and every later one.
  bool take_token() {
    // (PK1) acquire: pairs with (PK2); reads the last waker's exchange (see above).
    word_.exchange(empty, std::memory_order_acquire);
    return true;
  }

  // The word's values (an enum: constants that need no definition outside the class in C++14).
  enum : std::uint64_t { empty = 0, parked = 1, notified = 2 };

  Atom<std::uint64_t> word_{empty};
};

} // namespace detail
} // namespace async

#endif // ASYNC_DETAIL_PARKER_H
