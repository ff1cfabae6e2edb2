// SPDX-License-Identifier: BSL-1.0
//
// Active waiting, the library's one policy for it:
//   cpu_pause()            the architecture's spin-wait hint (and cpu_pause_name() for reports)
//   wait_policy            pause rounds, then a few yields within a short window, then park
//   basic_backoff/backoff  that policy for one waiting call; the caller parks when it says so
//   spin_then_yield        for a wait on a step that never blocks (nobody would wake a parker)
//   lock_spinning_briefly  a few try_locks, spaced out, before a mutex's sleeping lock()
#ifndef ASYNC_DETAIL_BACKOFF_H
#define ASYNC_DETAIL_BACKOFF_H

#include "config.h"

#include "deadline.h"

#include <atomic>
#include <chrono>
#include <thread>

namespace async {
namespace detail {

// The spin-wait hint of the target, chosen once for cpu_pause() and for the name below.
#if (defined(ASYNC_ARCH_X86_64) || defined(ASYNC_ARCH_X86)) &&                                     \
    (defined(__GNUC__) || defined(__clang__))
#define ASYNC_DETAIL_SPIN_HINT_PAUSE 1
#elif defined(ASYNC_ARCH_AARCH64) && (defined(__GNUC__) || defined(__clang__))
#define ASYNC_DETAIL_SPIN_HINT_ISB 1
#elif defined(ASYNC_ARCH_ARM) && (defined(__GNUC__) || defined(__clang__)) &&                      \
    (defined(__ARM_ARCH) && __ARM_ARCH >= 7)
#define ASYNC_DETAIL_SPIN_HINT_YIELD 1
#endif

/// Tells the core that the calling thread is spinning: it saves power, frees the sibling
/// hyper-thread and avoids the memory-order mis-speculation penalty on exit from the loop.
/// Thread-safe; has no effect on memory.
ASYNC_ALWAYS_INLINE void cpu_pause() noexcept {
#if defined(ASYNC_DETAIL_SPIN_HINT_PAUSE)
  __builtin_ia32_pause();
#elif defined(ASYNC_DETAIL_SPIN_HINT_ISB)
  // `isb` stalls for tens of cycles on current cores, closer to x86's pause than `yield`,
  // which most AArch64 implementations treat as a plain nop.
  __asm__ __volatile__("isb" ::: "memory");
#elif defined(ASYNC_DETAIL_SPIN_HINT_YIELD)
  __asm__ __volatile__("yield" ::: "memory");
#else
  // No hint known: a compiler barrier at least keeps the loop from being folded away.
  std::atomic_signal_fence(std::memory_order_seq_cst);
#endif
}

/// The instruction cpu_pause() issues, for reports ("none": a compiler barrier only).
constexpr const char* cpu_pause_name() noexcept {
#if defined(ASYNC_DETAIL_SPIN_HINT_PAUSE)
  return "pause";
#elif defined(ASYNC_DETAIL_SPIN_HINT_ISB)
  return "isb";
#elif defined(ASYNC_DETAIL_SPIN_HINT_YIELD)
  return "yield";
#else
  return "none";
#endif
}

/// The library's one waiting policy, shared by both queues and the pool: a thread that has
/// nothing to do spins with the pause instruction, then yields a few times within a short
/// window, then parks. Bounding the yield phase by time matters when there are more runnable
/// threads than cores: each yield can then take tens of microseconds, and a waiter that keeps
/// yielding stays runnable and delays the very thread it waits for, where a parked one would
/// get out of its way. (The queues used these numbers before; the pool, which used 64 pauses
/// and 64 yields within 50 us, was measured before and after it took them: docs/benchmarks.md, "The
/// pool's lock".)
struct wait_policy {
  /// Pause rounds before the yield phase (a queue's SPIN_BUDGET replaces it).
  static constexpr unsigned pauses = 256;
  /// At most this many yields ...
  static constexpr unsigned yields = 16;
  /// ... within this much wall time.
  static constexpr std::chrono::microseconds yield_window() noexcept {
    return std::chrono::microseconds(20);
  }
};

/// Takes `m` (a std::mutex or any Lockable), trying first for a short while without sleeping:
/// `tries` attempts, then m.lock(). For locks held a few dozen instructions at a time by threads
/// that are running: a std::mutex found taken puts its caller to sleep in the kernel at once,
/// and its holder then pays a wake-up syscall when it unlocks. Between attempts it pauses 1, 2,
/// then 4 times: every failed try_lock is a locked write that takes the lock's line away from
/// its holder, who needs it back to unlock (64 attempts one pause apart spent a quarter of the
/// deep-window execute() samples in pthread_mutex_trylock; see docs/benchmarks.md).
template <typename Lockable>
void lock_spinning_briefly(Lockable& m, unsigned tries = 32) {
  unsigned pauses = 1;
  for (unsigned i = 0; i < tries; ++i) {
    if (m.try_lock()) {
      return;
    }
    for (unsigned k = 0; k < pauses; ++k) {
      cpu_pause();
    }
    pauses = pauses < 4 ? 2 * pauses : pauses;
  }
  m.lock();
}

/// Active waiting before a thread parks, by wait_policy: `pauses` rounds of the pause
/// instruction, then yields (wait_policy::yields, within wait_policy::yield_window()). With
/// pauses == 0 there is no active waiting at all: the caller parks at once. Not thread-safe
/// (one per waiting call).
template <typename Clock>
class basic_backoff {
public:
  explicit basic_backoff(unsigned pauses = wait_policy::pauses) noexcept
      : pauses_(pauses), yields_(pauses == 0 ? 0 : wait_policy::yields) {}

  /// Waits a little and returns true, or returns false at once: time to park.
  bool wait() {
    if (rounds_ < pauses_) {
      ++rounds_;
      cpu_pause();
      return true;
    }
    if (rounds_ - pauses_ >= yields_) {
      return false;
    }
    const auto now = Clock::now();
    if (rounds_ == pauses_) {
      yield_start_ = now;
    } else if (now - yield_start_ >= wait_policy::yield_window()) {
      return false;
    }
    ++rounds_;
    std::this_thread::yield();
    return true;
  }

  /// Starts over (after useful work was found).
  void reset() noexcept { rounds_ = 0; }

  /// Whether the pause rounds are used up: the waiter has yielded or parked, or is about to.
  bool spun_out() const noexcept { return rounds_ >= pauses_; }

private:
  unsigned pauses_;
  unsigned yields_;
  unsigned rounds_ = 0;
  typename Clock::time_point yield_start_{};
};

/// The policy on the steady clock (the tests' deterministic scheduler gives the pool a clock
/// of its own, so that a run replays).
using backoff = basic_backoff<wait_clock>;

/// Waiting for another thread that is in the middle of a short step that never blocks (it
/// cannot be parked on: nobody would wake the waiter): `pauses` rounds of the pause
/// instruction, then a yield per round. Not thread-safe (one per waiting call).
class spin_then_yield {
public:
  explicit spin_then_yield(unsigned pauses = wait_policy::pauses) noexcept : pauses_(pauses) {}

  void wait() noexcept {
    if (rounds_ < pauses_) {
      ++rounds_;
      cpu_pause();
    } else {
      std::this_thread::yield();
    }
  }

private:
  unsigned pauses_;
  unsigned rounds_ = 0;
};

} // namespace detail
} // namespace async

#endif // ASYNC_DETAIL_BACKOFF_H
