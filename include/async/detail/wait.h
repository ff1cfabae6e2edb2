// SPDX-License-Identifier: BSL-1.0
//
// Parking on a 64-bit atomic word: a thread that has nothing to do sleeps in the kernel until
// another thread changes the word and wakes it. The protocol is the futex one:
//
//   waiter:  read the word (x); decide to sleep; park(word, x)   -- returns at once if word != x
//   waker:   change the word;  unpark_all(word)
//
// Because park() re-checks the value under the kernel's (or the bucket's) lock, a change made
// before the waker calls unpark_all can never be missed. Callers keep a "somebody sleeps" bit in
// the word itself so that the waker calls unpark_all only when needed (no syscall otherwise).
//
// Linux: futex on the low 32 bits of the word (every change the callers make alters those bits).
// Elsewhere (or with ASYNC_NO_FUTEX=1): a fixed table of mutex + condition-variable buckets
// hashed by address.
#ifndef ASYNC_DETAIL_WAIT_H
#define ASYNC_DETAIL_WAIT_H

#include "config.h"

#include "cache.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <ratio>
#include <thread>
#include <type_traits>

#if ASYNC_HAS_FUTEX
#include <cerrno>
#include <climits>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace async {
namespace detail {

static_assert(ATOMIC_LLONG_LOCK_FREE == 2,
              "async needs lock-free 64-bit atomics (tickets and turns are 64-bit everywhere).");

using wait_clock = std::chrono::steady_clock;

/// The deadline that park() reads as "no deadline at all".
constexpr wait_clock::time_point no_deadline() noexcept { return (wait_clock::time_point::max)(); }

// d on the waiting clock, for a d that fits there: duration_cast where the conversion only
// multiplies or only divides (no step then exceeds the result), long double where it does both.
template <typename Rep, typename Period>
wait_clock::duration to_wait_duration(const std::chrono::duration<Rep, Period>& d, std::true_type) {
  return std::chrono::duration_cast<wait_clock::duration>(d);
}

template <typename Rep, typename Period>
wait_clock::duration to_wait_duration(const std::chrono::duration<Rep, Period>& d,
                                      std::false_type) {
  using precise = std::chrono::duration<long double, wait_clock::period>;
  return std::chrono::duration_cast<wait_clock::duration>(std::chrono::duration_cast<precise>(d));
}

/// now + timeout on the waiting clock (timed calls take any std::chrono duration, integral or
/// floating). A timeout too large to add to now (duration::max() of any unit, hours::max(), a
/// huge floating count) saturates to no_deadline(): the call waits as long as it must, it does
/// not overflow into the past and give up at once. Zero and negative timeouts give now.
template <typename Rep, typename Period>
wait_clock::time_point deadline_after(const std::chrono::duration<Rep, Period>& timeout) {
  const wait_clock::time_point now = wait_clock::now();
  if (timeout <= std::chrono::duration<Rep, Period>::zero()) {
    return now;
  }
  // Compared in floating point, where no unit conversion can overflow; the margin of a
  // millisecond covers the rounding of a double near 2^63 nanoseconds.
  using seconds_f = std::chrono::duration<long double>;
  const seconds_f room = std::chrono::duration_cast<seconds_f>(no_deadline() - now);
  if (std::chrono::duration_cast<seconds_f>(timeout) >= room - seconds_f(1e-3L)) {
    return no_deadline();
  }
  // Where the conversion both multiplies and divides (a unit such as 1001/30000 s), duration_cast
  // multiplies first and can overflow for a timeout that fits: that one goes through long double.
  using factor = std::ratio_divide<Period, wait_clock::period>;
  using exact = std::integral_constant<bool, factor::num == 1 || factor::den == 1>;
  return now + to_wait_duration(timeout, exact{});
}

/// The deadline on the waiting clock for the time point `until` of any clock. Computed in
/// floating point, so that time points far away of any unit saturate as deadline_after's
/// timeouts do: max() waits as long as it must, min() (or any past point) only looks.
template <typename Clock, typename Duration>
wait_clock::time_point deadline_at(const std::chrono::time_point<Clock, Duration>& until) {
  using seconds_f = std::chrono::duration<long double>;
  const seconds_f left = std::chrono::duration_cast<seconds_f>(until.time_since_epoch()) -
                         std::chrono::duration_cast<seconds_f>(Clock::now().time_since_epoch());
  return deadline_after(left);
}

/// cv.wait_until(lock, deadline), where no_deadline() waits without a timeout:
/// wait_until(time_point::max()) overflows inside some standard libraries. Returns false on
/// timeout. (Like wait_until, it may also return on a spurious wake-up.)
inline bool cv_wait_until(std::condition_variable& cv, std::unique_lock<std::mutex>& lock,
                          wait_clock::time_point deadline) {
  if (deadline == no_deadline()) {
    cv.wait(lock);
    return true;
  }
  return cv.wait_until(lock, deadline) == std::cv_status::no_timeout;
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

#if ASYNC_HAS_FUTEX

/// The 32-bit half of `word` that holds its least significant bits (the half futex watches).
inline std::uint32_t* futex_half(std::atomic<std::uint64_t>* word) noexcept {
  static_assert(sizeof(std::atomic<std::uint64_t>) == sizeof(std::uint64_t),
                "std::atomic<std::uint64_t> must have the size of its value to be a futex word.");
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
  return reinterpret_cast<std::uint32_t*>(word) + 1;
#else
  return reinterpret_cast<std::uint32_t*>(word);
#endif
}

// The futex system calls, and the timeout each reads: the kernel's type, not the C library's
// timespec (with _TIME_BITS=64 on a 32-bit target, a timespec handed to the 32-bit call had its
// seconds read as seconds and nanoseconds, and timed waits spun through the kernel).
//   SYS_futex: two longs (64-bit targets; 32-bit seconds on 32-bit ones), two 64-bit fields
//   on x32.
//   SYS_futex_time64 (32-bit targets, Linux 5.1 and later): two 64-bit fields. Where it is
//   defined it is tried first, since a kernel built without 32-bit time calls refuses the old
//   one; a kernel without it (ENOSYS) gets the old call from then on.
#if defined(SYS_futex) && !(defined(__x86_64__) && defined(__ILP32__))
struct futex_timeout {
  long tv_sec;
  long tv_nsec;
};
#else
struct futex_timeout {
  long long tv_sec;
  long long tv_nsec;
};
#endif

#if defined(SYS_futex_time64) && defined(SYS_futex) && !defined(__LP64__) &&                       \
    !(defined(__x86_64__) && defined(__ILP32__))
#define ASYNC_FUTEX_TIME64_FIRST 1
struct futex_timeout64 {
  long long tv_sec;
  long long tv_nsec;
};

/// Set once SYS_futex_time64 answered ENOSYS: the old call is used from then on (a test may set
/// it to take that way).
inline std::atomic<bool>& futex_time64_missing() noexcept {
  static std::atomic<bool> missing{false};
  return missing;
}
#else
#define ASYNC_FUTEX_TIME64_FIRST 0
#endif

// One futex operation; timeout_ns < 0: none. Returns what the system call returned.
inline long futex_op(std::uint32_t* address, int op, std::uint32_t value,
                     std::int64_t timeout_ns) noexcept {
#if ASYNC_FUTEX_TIME64_FIRST
  if (!futex_time64_missing().load(std::memory_order_relaxed)) {
    futex_timeout64 t{timeout_ns / 1000000000, timeout_ns % 1000000000};
    const long r =
        syscall(SYS_futex_time64, address, op, value, timeout_ns < 0 ? nullptr : &t, nullptr, 0);
    if (r != -1 || errno != ENOSYS) {
      return r;
    }
    futex_time64_missing().store(true, std::memory_order_relaxed);
  }
#endif
  futex_timeout t{static_cast<decltype(t.tv_sec)>(timeout_ns / 1000000000),
                  static_cast<decltype(t.tv_nsec)>(timeout_ns % 1000000000)};
#if defined(SYS_futex)
  return syscall(SYS_futex, address, op, value, timeout_ns < 0 ? nullptr : &t, nullptr, 0);
#else
  return syscall(SYS_futex_time64, address, op, value, timeout_ns < 0 ? nullptr : &t, nullptr, 0);
#endif
}

/// Sleeps while `word` still holds `expected`, until woken, until `deadline` (if not null), or
/// spuriously. Returns false only when the deadline has passed. Thread-safe.
inline bool park(std::atomic<std::uint64_t>* word, std::uint64_t expected,
                 const wait_clock::time_point* deadline) noexcept {
  std::int64_t timeout_ns = -1;
  if (deadline != nullptr && *deadline != no_deadline()) {
    const auto left = *deadline - wait_clock::now();
    if (left <= wait_clock::duration::zero()) {
      return false;
    }
    // At most a day per sleep (any seconds field holds that); a longer wait parks again.
    constexpr std::int64_t day = std::int64_t(86400) * 1000000000;
    timeout_ns =
        (std::min<std::int64_t>)(std::chrono::duration_cast<std::chrono::nanoseconds>(left).count(),
                                 day);
  }
  // FUTEX_WAIT compares the low half with `expected` atomically with going to sleep. Watching
  // the low half is enough: callers change the word by amounts that alter it, and whoever
  // changes a word that carries the caller's sleeper bit calls unpark_all afterwards.
  futex_op(futex_half(word), FUTEX_WAIT_PRIVATE, static_cast<std::uint32_t>(expected), timeout_ns);
  return deadline == nullptr || wait_clock::now() < *deadline;
}

/// Wakes every thread parked on `word`. Call after changing the word. Thread-safe.
inline void unpark_all(std::atomic<std::uint64_t>* word) noexcept {
  futex_op(futex_half(word), FUTEX_WAKE_PRIVATE, static_cast<std::uint32_t>(INT_MAX), -1);
}

/// Wakes one thread parked on `word` (for words where any one waiter can take what changed: a
/// lock's). Call after changing the word. Thread-safe.
inline void unpark_one(std::atomic<std::uint64_t>* word) noexcept {
  futex_op(futex_half(word), FUTEX_WAKE_PRIVATE, 1, -1);
}

#else // condition-variable parking lot

struct parking_bucket {
  std::mutex mutex;
  std::condition_variable cv;
};

ASYNC_PROCESS_WIDE inline parking_bucket& bucket_for(const void* address) noexcept {
  static parking_bucket table[64];
  const auto a = reinterpret_cast<std::uintptr_t>(address);
  return table[(a >> 4) % 64];
}

inline bool park(std::atomic<std::uint64_t>* word, std::uint64_t expected,
                 const wait_clock::time_point* deadline) {
  parking_bucket& b = bucket_for(word);
  std::unique_lock<std::mutex> lock(b.mutex);
  // Re-checked under the bucket lock: a waker changes the word before taking this lock.
  if (word->load(std::memory_order_acquire) != expected) {
    return true;
  }
  return cv_wait_until(b.cv, lock, deadline != nullptr ? *deadline : no_deadline());
}

inline void unpark_all(std::atomic<std::uint64_t>* word) {
  parking_bucket& b = bucket_for(word);
  { std::lock_guard<std::mutex> lock(b.mutex); }
  b.cv.notify_all();
}

// A bucket's condition variable serves every word hashed to it: waking one thread there could
// wake a waiter of another word, so every waiter of the bucket is woken (each looks again).
inline void unpark_one(std::atomic<std::uint64_t>* word) { unpark_all(word); }

#endif

/// Parking on a word of another atomic type (the tests' scheduled atomic, which parks and
/// wakes its threads itself). The std::atomic overloads above are exact matches, so they win.
template <typename Word>
bool park(Word* word, std::uint64_t expected, const wait_clock::time_point* deadline) {
  return word->park(expected, deadline);
}
template <typename Word>
void unpark_all(Word* word) {
  word->unpark_all();
}
template <typename Word>
void unpark_one(Word* word) {
  word->unpark_all();
}

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
    const std::uint64_t epoch = epoch_.value.load(std::memory_order_seq_cst);
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
    epoch_.value.fetch_add(1, std::memory_order_seq_cst);
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

#endif // ASYNC_DETAIL_WAIT_H
