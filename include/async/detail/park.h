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
#ifndef ASYNC_DETAIL_PARK_H
#define ASYNC_DETAIL_PARK_H

#include "config.h"

#include "deadline.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>

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

} // namespace detail
} // namespace async

#endif // ASYNC_DETAIL_PARK_H
