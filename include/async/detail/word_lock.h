// SPDX-License-Identifier: BSL-1.0
//
// word_lock: a mutex in one 64-bit atomic word of the atomic seam (Atom), parked on with
// detail::park (a futex on Linux, the parking table elsewhere). The pool's queues use it
// instead of std::mutex so that its whole scheduler runs on the seam: the tests' deterministic
// scheduler drives these locks like any other protocol word. The word:
//
//   0   free
//   1   held, nobody parked
//   2   held, and somebody may be parked: the unlock wakes one
//
// It is the three-state futex mutex (Drepper, "Futexes Are Tricky", 2011, mutex 3), with a
// short spin before parking: the pool holds these locks for a few dozen instructions, and a
// thread that parks at once costs its holder a wake-up system call at the unlock. Between
// tries the spin pauses 1, 2, then 4 times, as detail::lock_spinning_briefly does (every failed
// try takes the line away from the holder, which needs it back to unlock).
#ifndef ASYNC_DETAIL_WORD_LOCK_H
#define ASYNC_DETAIL_WORD_LOCK_H

#include "config.h"

#include "backoff.h"
#include "cache.h"
#include "park.h"

#include <atomic>
#include <cstdint>

namespace async {
namespace detail {

/// A Lockable (std::lock_guard and std::unique_lock take it). Not recursive. Thread-safe.
template <template <typename> class Atom = std::atomic>
class word_lock {
public:
  word_lock() noexcept = default;
  word_lock(const word_lock&) = delete;
  word_lock& operator=(const word_lock&) = delete;

  bool try_lock() noexcept {
    std::uint64_t free = 0;
    // (WL1) acquire: pairs with (WL2), the previous holder's unlock.
    return word_.compare_exchange_strong(free, 1, std::memory_order_acquire,
                                         std::memory_order_relaxed);
  }

  void lock() {
    if (!try_lock()) {
      lock_slowly();
    }
  }

  void unlock() {
    // (WL2) release: what the holder did happens before what the next holder does; pairs with
    // (WL1) and (WL3).
    if (word_.exchange(0, std::memory_order_release) == 2) {
      unpark_one(&word_);
    }
  }

private:
  static constexpr unsigned spin_tries = 32;

  ASYNC_NOINLINE void lock_slowly() {
    unsigned pauses = 1;
    for (unsigned i = 0; i < spin_tries; ++i) {
      for (unsigned k = 0; k < pauses; ++k) {
        cpu_pause();
      }
      pauses = pauses < 4 ? pauses * 2 : pauses;
      // relaxed: only a look before the try, which decides.
      if (word_.load(std::memory_order_relaxed) == 0 && try_lock()) {
        return;
      }
    }
    // (WL3) acquire, as (WL1). Marking the word 2 before parking makes the holder's unlock
    // wake somebody; a thread that takes the lock this way leaves it marked 2 (it cannot know
    // whether others still wait), which costs at most one needless wake-up.
    while (word_.exchange(2, std::memory_order_acquire) != 0) {
      detail::park(&word_, 2, nullptr);
    }
  }

  Atom<std::uint64_t> word_{0};
};

} // namespace detail
} // namespace async

#endif // ASYNC_DETAIL_WORD_LOCK_H
