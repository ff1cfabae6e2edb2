// SPDX-License-Identifier: BSL-1.0
// Helpers shared by the test binaries: stress sizes, a start barrier, element types that count
// their lifetimes or throw on demand, the CPU time of the process, and a base for atomics put
// into the queues' atomic seam.
#ifndef ASYNC_TESTS_SUPPORT_TEST_SUPPORT_H
#define ASYNC_TESTS_SUPPORT_TEST_SUPPORT_H

#include <async/detail/asymmetric_fence.h>
#include <async/detail/config.h>
#include <async/detail/deadline.h>
#include <async/detail/park.h>
#include <async/detail/perturb.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <time.h>

#if defined(__unix__)
#include <csignal>
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>
#endif

namespace async_test {

#if ASYNC_TEST_PERTURB
// A perturbed build prints its seed first, so that a failing run can be replayed.
struct announce_perturb_seed {
  announce_perturb_seed() {
    std::printf("schedule perturbation on, seed %llu (ASYNC_PERTURB_SEED=<seed> replays it)\n",
                static_cast<unsigned long long>(async::detail::perturb_seed()));
    std::fflush(stdout);
  }
};
static const announce_perturb_seed announce_perturb_seed_once{};
#endif

/// The member types of the tests' hand-written output iterators (std::iterator is deprecated
/// in C++17): derive from it and define *, ++ and the assignment.
struct output_iterator_types {
  using iterator_category = std::output_iterator_tag;
  using value_type = void;
  using difference_type = std::ptrdiff_t;
  using pointer = void;
  using reference = void;
};

/// ASYNC_STRESS_SCALE from the environment (1 = full size; presets lower it under sanitizers
/// and qemu).
inline double stress_scale() {
  const char* s = std::getenv("ASYNC_STRESS_SCALE");
  const double v = s != nullptr ? std::atof(s) : 1.0;
  return v > 0 ? v : 1.0;
}

/// `n` scaled by ASYNC_STRESS_SCALE, at least `minimum`. A perturbed build (ASYNC_TEST_PERTURB)
/// runs a quarter of that: its value is in the schedules it forces, not in the volume.
inline std::size_t scaled(std::size_t n, std::size_t minimum = 1000) {
#if ASYNC_TEST_PERTURB
  const double perturbed = 0.25;
#else
  const double perturbed = 1.0;
#endif
  const auto v = static_cast<std::size_t>(static_cast<double>(n) * stress_scale() * perturbed);
  return std::max(v, minimum);
}

/// While one lives, the bounded queues made hand their slots over by exchange, as where the
/// kernel offers no asymmetric fence (detail/asymmetric_fence.h, detail/bounded/turn.h): the
/// other protocol, on a machine that has the fence. A queue keeps the way it was made with.
class exchange_hand_overs {
public:
  exchange_hand_overs() { async::detail::asymmetric_fences_refused().store(true); }
  exchange_hand_overs(const exchange_hand_overs&) = delete;
  exchange_hand_overs& operator=(const exchange_hand_overs&) = delete;
  ~exchange_hand_overs() { async::detail::asymmetric_fences_refused().store(false); }
};

/// Releases all participants at once, so that threads really run against each other.
class start_barrier {
public:
  explicit start_barrier(std::size_t parties) : waiting_(parties) {}
  void arrive_and_wait() {
    std::unique_lock<std::mutex> lock(mutex_);
    if (--waiting_ == 0) {
      cv_.notify_all();
      return;
    }
    cv_.wait(lock, [this] { return waiting_ == 0; });
  }

private:
  std::mutex mutex_;
  std::condition_variable cv_;
  std::size_t waiting_;
};

/// Counts every construction and destruction; an odd size (not a multiple of 8) on purpose.
struct tracked {
  static std::atomic<long>& constructed() {
    static std::atomic<long> n{0};
    return n;
  }
  static std::atomic<long>& destroyed() {
    static std::atomic<long> n{0};
    return n;
  }
  static long alive() { return constructed().load() - destroyed().load(); }
  static void reset() {
    constructed() = 0;
    destroyed() = 0;
  }

  explicit tracked(int v = 0) : value(v) { constructed().fetch_add(1); }
  tracked(const tracked& o) : value(o.value) { constructed().fetch_add(1); }
  tracked(tracked&& o) noexcept : value(o.value) { constructed().fetch_add(1); }
  tracked& operator=(const tracked&) = default;
  tracked& operator=(tracked&&) noexcept = default;
  ~tracked() { destroyed().fetch_add(1); }

  int value;
  char odd[9] = {};
};

/// Throws from its constructor when built from a value in the "bad" range.
struct throws_on {
  static std::atomic<long>& alive() {
    static std::atomic<long> n{0};
    return n;
  }
  explicit throws_on(int v) : value(v) {
    if (v < 0) {
      throw std::runtime_error("throws_on: negative value");
    }
    alive().fetch_add(1);
  }
  throws_on(const throws_on& o) : value(o.value) { alive().fetch_add(1); }
  throws_on& operator=(const throws_on&) = default;
  ~throws_on() { alive().fetch_sub(1); }
  int value;
};

/// Polls `f()` until it equals `want` or `limit` passes; true if it did.
template <typename F, typename T>
bool eventually_equal(F f, const T& want,
                      std::chrono::milliseconds limit = std::chrono::milliseconds(10000)) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (!(f() == want)) {
    if (std::chrono::steady_clock::now() > end) {
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

/// Ends the binary with a message when `done` has not become true within `limit`: for a test
/// whose threads may be stuck for good (nothing can be unwound then), so that a hang fails at
/// once and says which test it was, instead of waiting for ctest's timeout.
inline void watchdog_or_abort(const std::atomic<bool>& done, std::chrono::milliseconds limit,
                              const char* what) {
  if (!eventually_equal([&] { return done.load(); }, true, limit)) {
    std::fprintf(stderr, "FAILED: %s did not finish in %lld s\n", what,
                 static_cast<long long>(limit.count() / 1000));
    std::abort();
  }
}

/// watchdog_or_abort on a thread of its own, for the scope of a test: the scope's end (by
/// return or by a failed assertion's exception) dismisses it.
class scoped_watchdog {
public:
  scoped_watchdog(std::chrono::milliseconds limit, const char* what)
      : thread_([this, limit, what] { watchdog_or_abort(done_, limit, what); }) {}
  scoped_watchdog(const scoped_watchdog&) = delete;
  scoped_watchdog& operator=(const scoped_watchdog&) = delete;
  ~scoped_watchdog() {
    done_.store(true);
    thread_.join();
  }

private:
  std::atomic<bool> done_{false};
  std::thread thread_;
};

/// CPU seconds consumed by the whole process so far.
inline double process_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

/// CPU seconds per wall second that the whole process burns over `window`.
inline double process_cpu_fraction(std::chrono::milliseconds window) {
  const double cpu0 = process_cpu_seconds();
  const auto wall0 = std::chrono::steady_clock::now();
  std::this_thread::sleep_for(window);
  const double cpu = process_cpu_seconds() - cpu0;
  const double wall =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
  return cpu / wall;
}

/// The same measure with one more thread that spins: about what a waiter that never parks would
/// cost, taken now, on this machine, under whatever else runs on it (qemu, a sanitizer, a busy
/// CI host). The yardstick of the idle-CPU checks, which compare with it rather than with a
/// fixed share of a core.
inline double spinning_cpu_fraction(std::chrono::milliseconds window) {
  std::atomic<bool> stop{false};
  std::atomic<bool> started{false};
  std::thread spinner([&] {
    started = true;
    while (!stop.load(std::memory_order_relaxed)) {
    }
  });
  while (!started.load()) {
    std::this_thread::yield();
  }
  const double f = process_cpu_fraction(window);
  stop = true;
  spinner.join();
  return f;
}

/// Copy-only: its moves are deleted, so a queue must copy where it would move.
struct copy_only {
  copy_only() = default;
  explicit copy_only(int v) : value(v) {}
  copy_only(const copy_only&) = default;
  copy_only(copy_only&&) = delete;
  copy_only& operator=(const copy_only&) = default;
  copy_only& operator=(copy_only&&) = delete;
  int value = 0;
};

/// The seed of a randomized stress run: ASYNC_SOAK_SEED from the environment, or one drawn
/// from the clock; printed (with `what`) the first time, so that a failing run can be replayed.
inline std::uint64_t soak_seed(const char* what) {
  static const std::uint64_t seed = [what] {
    const char* env = std::getenv("ASYNC_SOAK_SEED");
    const std::uint64_t s = env != nullptr && *env != '\0'
                                ? static_cast<std::uint64_t>(std::strtoull(env, nullptr, 0))
                                : static_cast<std::uint64_t>(
                                      std::chrono::steady_clock::now().time_since_epoch().count());
    std::printf("%s: seed %llu (ASYNC_SOAK_SEED=<seed> replays it)\n", what,
                static_cast<unsigned long long>(s));
    std::fflush(stdout);
    return s;
  }();
  return seed;
}

/// splitmix64's finalizer: a well-mixed 64-bit value from any input (seed ^ index, ...).
inline std::uint64_t mix(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

/// std::atomic<V> with the parking members that the queues' atomic seam (a traits member
/// `template <class V> using atomic = ...`) asks of a type other than std::atomic. White-box
/// tests derive from it and hide one call (fetch_add, compare_exchange_weak) to count it or
/// to hold a thread at it.
template <typename V>
struct seam_atomic : std::atomic<V> {
  seam_atomic(V v = V()) noexcept : std::atomic<V>(v) {} // NOLINT: implicit, as std::atomic
  bool park(std::uint64_t expected, const async::detail::wait_clock::time_point* deadline) {
    return async::detail::park(static_cast<std::atomic<std::uint64_t>*>(this), expected, deadline);
  }
  void unpark_all() { async::detail::unpark_all(static_cast<std::atomic<std::uint64_t>*>(this)); }
};

/// A capture for a pool's exception handler that gives the pool a task counting into `ran`
/// when it is destroyed (the handler replaced, or the pool destroyed); a moved-from one does not.
template <typename Pool>
struct posts_when_dropped {
  Pool* pool;
  std::atomic<int>* ran;
  bool live = true;
  posts_when_dropped(Pool* p, std::atomic<int>* r) : pool(p), ran(r) {}
  posts_when_dropped(const posts_when_dropped& o) : pool(o.pool), ran(o.ran) {}
  posts_when_dropped(posts_when_dropped&& o) noexcept : pool(o.pool), ran(o.ran) { o.live = false; }
  ~posts_when_dropped() {
    if (live) {
      pool->execute([r = ran] { r->fetch_add(1); });
    }
  }
};

#if defined(__unix__)
#if ASYNC_TEST_GCOV_DUMP
extern "C" void __gcov_dump(void); // libgcov: writes the counters gathered so far
#endif

/// How a forked child ended, and what it wrote to stdout and stderr.
struct child_outcome {
  bool ended = false; // false: still running after the limit, then killed
  int status = 0;     // waitpid's status
  std::string output;

  bool aborted() const { return ended && WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT; }
};

/// Runs body() in a forked child (SIGABRT at its default action, stdout and stderr captured,
/// read while it runs so that a long report cannot fill the pipe) that exits with status 0 when
/// body() returns and 3 when it throws; kills it after `limit`. For the calls that are meant to
/// end the program: the child's abort reports nothing to Catch2.
template <typename Body>
child_outcome run_in_child(Body body, std::chrono::seconds limit = std::chrono::seconds(20)) {
  child_outcome outcome;
  int out[2];
  if (pipe(out) != 0) {
    throw std::runtime_error("run_in_child: pipe failed");
  }
  const pid_t pid = fork();
  if (pid < 0) {
    throw std::runtime_error("run_in_child: fork failed");
  }
  if (pid == 0) {
#if ASYNC_TEST_GCOV_DUMP
    // A coverage build writes the child's counters before it aborts (abort skips the exit-time
    // write), so that what only the child reaches counts as reached.
    std::signal(SIGABRT, [](int) {
      __gcov_dump();
      std::signal(SIGABRT, SIG_DFL);
      std::raise(SIGABRT);
    });
#else
    std::signal(SIGABRT, SIG_DFL);
#endif
    dup2(out[1], 2);
    dup2(out[1], 1);
    close(out[0]);
    try {
      body();
    } catch (...) {
      _exit(3); // never back into the test runner, in the child
    }
#if ASYNC_TEST_GCOV_DUMP
    __gcov_dump(); // _exit skips the exit-time write too
#endif
    _exit(0);
  }
  close(out[1]);
  fcntl(out[0], F_SETFL, fcntl(out[0], F_GETFL) | O_NONBLOCK);
  const auto read_available = [&] {
    char buffer[512];
    ssize_t n = 0;
    while ((n = read(out[0], buffer, sizeof buffer)) > 0) {
      outcome.output.append(buffer, static_cast<std::size_t>(n));
    }
  };
  const auto end = std::chrono::steady_clock::now() + limit;
  pid_t ended = 0;
  while ((ended = waitpid(pid, &outcome.status, WNOHANG)) == 0 &&
         std::chrono::steady_clock::now() < end) {
    read_available();
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (ended == 0) {
    kill(pid, SIGKILL);
    waitpid(pid, &outcome.status, 0);
  }
  outcome.ended = ended == pid;
  read_available();
  close(out[0]);
  return outcome;
}
#endif

} // namespace async_test

#endif // ASYNC_TESTS_SUPPORT_TEST_SUPPORT_H
