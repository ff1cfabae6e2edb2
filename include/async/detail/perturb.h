// SPDX-License-Identifier: BSL-1.0
//
// The schedule-perturbation seam, for the library's own tests. ASYNC_PERTURB() marks a window
// where another thread's interleaving matters: between taking a ticket and publishing, between
// reading a word and the CAS that depends on it, before parking, inside recycling. In users'
// builds the macro expands to nothing. A test build defines ASYNC_TEST_PERTURB=1, and then each
// point, at random, does nothing, yields, or sleeps a few microseconds, so that schedules that
// need a thread to stall at exactly that point (rare on an idle machine) happen every run.
//
// The random choices come from one seed per process: ASYNC_PERTURB_SEED from the environment,
// or one drawn from the clock. perturb_seed() returns it so that a test can print it; a run is
// replayed (as far as the OS scheduler allows) by setting the same seed.
#ifndef ASYNC_DETAIL_PERTURB_H
#define ASYNC_DETAIL_PERTURB_H

#include "config.h"

#if ASYNC_TEST_PERTURB

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <thread>

namespace async {
namespace detail {

inline std::uint64_t perturb_seed() noexcept {
  static const std::uint64_t seed = [] {
    const char* env = std::getenv("ASYNC_PERTURB_SEED");
    if (env != nullptr && *env != '\0') {
      return static_cast<std::uint64_t>(std::strtoull(env, nullptr, 0));
    }
    return static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  }();
  return seed;
}

// splitmix64: a different, reproducible stream for each thread (threads are numbered in the
// order in which they first reach a point).
inline std::uint64_t perturb_next() noexcept {
  static std::atomic<std::uint64_t> threads{0};
  thread_local std::uint64_t state =
      perturb_seed() ^ (0x9e3779b97f4a7c15ull * (threads.fetch_add(1) + 1));
  std::uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// About one point in 32 yields, one in 512 sleeps for 1..64 microseconds and one in 8192 for
// 0.1..1 ms: often enough that every window is stretched many times per run (the long sleeps
// let hundreds of segments or turns pass one stalled thread), rare enough that runs finish.
inline void perturb_here() noexcept {
  const std::uint64_t r = perturb_next();
  if ((r & 8191) == 0) {
    std::this_thread::sleep_for(std::chrono::microseconds(100 + ((r >> 13) % 900)));
  } else if ((r & 511) == 0) {
    std::this_thread::sleep_for(std::chrono::microseconds(1 + ((r >> 9) & 63)));
  } else if ((r & 31) == 0) {
    std::this_thread::yield();
  }
}

} // namespace detail
} // namespace async

#define ASYNC_PERTURB() ::async::detail::perturb_here()

#else

#define ASYNC_PERTURB() static_cast<void>(0)

#endif

// Fault injection, for the library's tests too (ASYNC_TEST_FAULTS=1): a test makes the pool's
// thread starts fail, as std::thread's constructor does when the system has no thread left.
#if ASYNC_TEST_FAULTS

#include <atomic>
#include <system_error>

namespace async {
namespace detail {

/// How many more thread starts succeed before each following one fails (-1: all succeed).
inline std::atomic<int>& thread_starts_left() noexcept {
  static std::atomic<int> n{-1};
  return n;
}

inline void fault_thread_start() {
  int left = thread_starts_left().load();
  while (left >= 0) {
    if (left == 0) {
      throw std::system_error(std::make_error_code(std::errc::resource_unavailable_try_again),
                              "async test fault: thread start");
    }
    if (thread_starts_left().compare_exchange_weak(left, left - 1)) {
      return;
    }
  }
}

} // namespace detail
} // namespace async

#define ASYNC_FAULT_THREAD_START() ::async::detail::fault_thread_start()

#else

#define ASYNC_FAULT_THREAD_START() static_cast<void>(0)

#endif

#endif // ASYNC_DETAIL_PERTURB_H
