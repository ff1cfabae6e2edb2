// SPDX-License-Identifier: BSL-1.0
// The library's protocols under Relacy (Dmitry Vyukov's checker for the C++ memory model).
//
// The deterministic scheduler (det_schedule.h) explores interleavings of sequentially consistent
// steps; Relacy explores executions that the C++ memory model allows: a relaxed or acquire load
// may return an older store than the latest, a store may become visible to another thread late,
// and a load may pass an earlier store to another word. Its atomics keep a short history of
// stores per word and a vector clock per thread, and its checked variables (rl::var) report a
// data race when two accesses, one a write, are not ordered by happens-before.
//
// What this header gives the tests:
//   - rl_model::atomic<V>: std::atomic's interface as the library uses it, on rl::atomic<V>.
//     Every std::memory_order that the library passes is handed to Relacy as it is, so a weaker
//     order in a header weakens the model's execution. The queues and the pool take it through
//     their traits' `atomic` member (or the scheduler's atomic template parameter).
//   - Parking: detail::park on an rl_model::atomic is a futex modelled on a Relacy mutex and
//     condition variable. The word is compared under the mutex, and unpark_all() takes the
//     mutex before it wakes, so a wake-up after the comparison is never lost (as the kernel's
//     bucket lock does for a futex). A timed park may time out at any point (Relacy decides),
//     unless its deadline is more than a minute off: then it waits as an untimed one, so that
//     a wake-up lost by a timed call shows as a deadlock too.
//     A lost wake-up shows as Relacy's deadlock: every thread blocked.
//   - rl_model::value: an element type whose every access is also an access to a checked
//     variable (rl::var) of its address, memory_cells. The producer's construction writes it,
//     the consumer's move reads it and its destruction writes it, and the next producer of the
//     slot writes it again: an element published without a release/acquire pair, or a slot
//     reused before its last element's end happens before, is a data race that Relacy reports.
//
// Relacy runs a test's threads as fibers of one system thread: thread_local variables are shared
// by them, and real blocking (a futex, a sleep) would stop every thread, which is why parking
// goes through Relacy's own primitives. Spin loops of the library call std::this_thread::yield,
// which costs nothing here; each atomic operation is a scheduling point.
//
// Include this header after the library's headers: relacy.hpp defines macros (new, delete,
// malloc, free, assert, memory_order_*) that would rewrite the library's code. They are undefined
// at the end of this header, so the tests below it use the ordinary names.
#ifndef ASYNC_TESTS_SUPPORT_RELACY_MODEL_H
#define ASYNC_TESTS_SUPPORT_RELACY_MODEL_H

#include <async/detail/deadline.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <ostream>
#include <streambuf>
#include <string>
#include <vector>

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wall"
#pragma GCC diagnostic ignored "-Wextra"
#pragma GCC diagnostic ignored "-Wpedantic"
#elif defined(__clang__)
#pragma clang diagnostic push
#pragma clang diagnostic ignored "-Weverything"
#endif
#include <relacy/relacy.hpp>
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#elif defined(__clang__)
#pragma clang diagnostic pop
#endif

#undef new
#undef delete
#undef malloc
#undef calloc
#undef realloc
#undef free
#undef assert
#undef errno
#undef memory_order_relaxed
#undef memory_order_consume
#undef memory_order_acquire
#undef memory_order_release
#undef memory_order_acq_rel
#undef memory_order_seq_cst

namespace async_test {
namespace rl_model {

inline rl::memory_order order(std::memory_order o) noexcept {
  switch (o) {
  case std::memory_order_relaxed:
    return rl::mo_relaxed;
  case std::memory_order_consume:
  case std::memory_order_acquire:
    return rl::mo_acquire;
  case std::memory_order_release:
    return rl::mo_release;
  case std::memory_order_acq_rel:
    return rl::mo_acq_rel;
  case std::memory_order_seq_cst:
    break;
  }
  return rl::mo_seq_cst;
}

// What a failed compare-exchange reads with, given only the order of success (the rule of
// std::atomic's one-order overloads).
inline std::memory_order failure_of(std::memory_order o) noexcept {
  return o == std::memory_order_acq_rel   ? std::memory_order_acquire
         : o == std::memory_order_release ? std::memory_order_relaxed
                                          : o;
}

/// Whether a compare-exchange may fail with order f after succeeding with s: C++14 wants the
/// failure order no stronger than the success order, and never release or acq_rel. (Relacy
/// checks this only in its debug builds; otherwise it quietly runs the failure with the order
/// that success allows, a weaker model than the code asks for.)
inline bool valid_failure_order(std::memory_order s, std::memory_order f) noexcept {
  if (f == std::memory_order_release || f == std::memory_order_acq_rel) {
    return false;
  }
  switch (s) {
  case std::memory_order_relaxed:
  case std::memory_order_release:
    return f == std::memory_order_relaxed;
  case std::memory_order_consume:
    return f == std::memory_order_relaxed || f == std::memory_order_consume;
  case std::memory_order_acquire:
  case std::memory_order_acq_rel:
    return f != std::memory_order_seq_cst;
  default:
    return true;
  }
}

/// The futex model: one mutex and one condition variable for every parked word of a run (a
/// wake-up wakes every parked thread, each compares its own word again). A test suite owns one
/// and installs it for its run (Relacy constructs a suite in each iteration).
struct parking_lot {
  rl::mutex mutex;
  rl::condition_variable cv;

  parking_lot() { current() = this; }
  ~parking_lot() { current() = nullptr; }
  parking_lot(const parking_lot&) = delete;
  parking_lot& operator=(const parking_lot&) = delete;

  static parking_lot*& current() {
    static parking_lot* lot = nullptr;
    return lot;
  }
};

/// Whether the queues made in a run find asymmetric fences (set before the queue is made; the
/// bounded queue picks its hand-over by it).
inline bool& fences_available() {
  static bool on = false;
  return on;
}

/// The asymmetric fences as the checker sees them: the light and the heavy one are each a
/// seq_cst fence. That is what membarrier makes of them (every light fence that a heavy one
/// meets acts as a full fence); the model is stronger than the kernel in one way: a light fence
/// orders even where no heavy fence runs, which no protocol here relies on.
struct modelled_fences {
  static bool available() { return fences_available(); }
  static void light() { rl::atomic_thread_fence(rl::mo_seq_cst, $); }
  static bool heavy() {
    rl::atomic_thread_fence(rl::mo_seq_cst, $);
    return true;
  }
};

template <typename V>
class atomic {
public:
  using asymmetric_fences = modelled_fences;

  atomic() noexcept : a_(V()) {}
  atomic(V v) noexcept : a_(v) {} // NOLINT: implicit, as std::atomic's
  atomic(const atomic&) = delete;
  atomic& operator=(const atomic&) = delete;

  V load(std::memory_order o = std::memory_order_seq_cst) const { return a_.load(order(o), $); }
  void store(V v, std::memory_order o = std::memory_order_seq_cst) { a_.store(v, order(o), $); }
  V exchange(V v, std::memory_order o = std::memory_order_seq_cst) {
    return a_.exchange(v, order(o), $);
  }
  bool compare_exchange_strong(V& expected, V desired, std::memory_order s, std::memory_order f) {
    RL_ASSERT(valid_failure_order(s, f));
    return a_.compare_exchange_strong(expected, desired, order(s), $, order(f), $);
  }
  bool compare_exchange_strong(V& expected, V desired,
                               std::memory_order o = std::memory_order_seq_cst) {
    return compare_exchange_strong(expected, desired, o, failure_of(o));
  }
  bool compare_exchange_weak(V& expected, V desired, std::memory_order s, std::memory_order f) {
    RL_ASSERT(valid_failure_order(s, f));
    return a_.compare_exchange_weak(expected, desired, order(s), $, order(f), $);
  }
  bool compare_exchange_weak(V& expected, V desired,
                             std::memory_order o = std::memory_order_seq_cst) {
    return compare_exchange_weak(expected, desired, o, failure_of(o));
  }
  V fetch_add(V d, std::memory_order o = std::memory_order_seq_cst) {
    return a_.fetch_add(d, order(o), $);
  }
  V fetch_sub(V d, std::memory_order o = std::memory_order_seq_cst) {
    return a_.fetch_sub(d, order(o), $);
  }
  V fetch_or(V d, std::memory_order o = std::memory_order_seq_cst) {
    return a_.fetch_or(d, order(o), $);
  }
  V fetch_and(V d, std::memory_order o = std::memory_order_seq_cst) {
    return a_.fetch_and(d, order(o), $);
  }

  /// detail::park on this word: sleeps while its low half holds that of `expected`, as a futex
  /// does. Returns false when a timed park timed out.
  bool park(std::uint64_t expected, const async::detail::wait_clock::time_point* deadline) {
    parking_lot& lot = *parking_lot::current();
    lot.mutex.lock($);
    bool in_time = true;
    if (static_cast<std::uint32_t>(a_.load(rl::mo_relaxed, $)) ==
        static_cast<std::uint32_t>(expected)) {
      // A deadline more than a minute off is no deadline here: a timed park could otherwise
      // time out at any point, and a wake-up lost by a timed call (which would sleep until
      // its deadline) would go unseen.
      const bool timed = deadline != nullptr && *deadline != async::detail::no_deadline() &&
                         *deadline - async::detail::wait_clock::now() < std::chrono::minutes(1);
      if (timed) {
        in_time = lot.cv.wait_for(lot.mutex, 1, $);
      } else {
        lot.cv.wait(lot.mutex, $);
      }
    }
    lot.mutex.unlock($);
    return in_time;
  }

  void unpark_all() {
    parking_lot& lot = *parking_lot::current();
    lot.mutex.lock($);
    lot.cv.notify_all($);
    lot.mutex.unlock($);
  }

private:
  mutable rl::atomic<V> a_;
};

/// The checked memory of elements: one rl::var per address that an element has lived at, for
/// the run. Every access to an element (construction, a read, a move from it, destruction) is
/// also an access to its address's cell, so two lives of an element at one address (a slot
/// used again) must be ordered by happens-before, as must a producer's construction and the
/// consumer's move. (A member rl::var would not show the first: each life would be a new
/// variable, unrelated to the last.) A test suite owns one (Relacy constructs a suite in each
/// execution).
class memory_cells {
public:
  memory_cells() { current() = this; }
  ~memory_cells() { current() = nullptr; }
  memory_cells(const memory_cells&) = delete;
  memory_cells& operator=(const memory_cells&) = delete;

  static rl::var<int>& at(const void* address) {
    memory_cells& m = *current();
    for (int i = 0; i < m.used_; ++i) {
      if (m.addresses_[i] == address) {
        return m.cells_[i];
      }
    }
    RL_ASSERT(m.used_ < capacity);
    m.addresses_[m.used_] = address;
    return m.cells_[m.used_++];
  }

private:
  static constexpr int capacity = 256;
  static memory_cells*& current() {
    static memory_cells* m = nullptr;
    return m;
  }
  rl::var<int> cells_[capacity];
  const void* addresses_[capacity] = {};
  int used_ = 0;
};

/// An element whose accesses are data-race checked through the cell of its address (see
/// memory_cells). Moved-from values read -1.
class value {
public:
  value() : v_(0) { write(); }
  explicit value(int v) : v_(v) { write(); }
  value(value&& o) noexcept : v_(o.read()) {
    o.v_ = -1;
    o.write();
    write();
  }
  value(const value& o) : v_(o.read()) { write(); }
  value& operator=(value&& o) noexcept {
    v_ = o.read();
    o.v_ = -1;
    o.write();
    write();
    return *this;
  }
  value& operator=(const value& o) {
    v_ = o.read();
    write();
    return *this;
  }
  ~value() { memory_cells::at(this)($).store(-2); }
  int get() const { return read(); }

private:
  int read() const {
    static_cast<void>(static_cast<int>(memory_cells::at(this)($)));
    return v_;
  }
  void write() { memory_cells::at(this)($).store(v_); }

  int v_;
};

/// A payload whose own accesses are data-race checked (a member rl::var): for objects that live
/// in memory the library allocates and frees, such as a pool's tasks. (memory_cells would see
/// a race where the allocator hands a freed block to another thread, whose ordering the model
/// does not show.) Moved-from payloads read -1.
class payload {
public:
  explicit payload(int v) : v_(v) {}
  payload(payload&& o) noexcept : v_(o.v_($).load()) { o.v_($).store(-1); }
  payload(const payload& o) : v_(o.v_($).load()) {}
  payload& operator=(const payload&) = delete;
  ~payload() = default;
  int get() const { return v_($).load(); }

private:
  rl::var<int> v_;
};

/// Runs one test suite with the random scheduler; prints its name, and Relacy's report when it
/// fails. `iterations` executions.
template <typename Suite>
bool run(const char* name, int iterations) {
  rl::test_params p;
  p.iteration_count = iterations;
  p.search_type = rl::random_scheduler_type;
  p.output_history = false;
  p.execution_depth_limit = 20000;
  // Relacy writes its report while it runs an execution, where operator new is its own: the
  // streams must not allocate (an ostringstream would free a buffer that was not Relacy's).
  struct stdout_buf : std::streambuf {
    int overflow(int c) override { return c == EOF ? 0 : std::fputc(c, stdout); }
    std::streamsize xsputn(const char* s, std::streamsize n) override {
      return static_cast<std::streamsize>(std::fwrite(s, 1, static_cast<std::size_t>(n), stdout));
    }
  };
  struct null_buf : std::streambuf {
    int overflow(int c) override { return c == EOF ? 0 : c; }
  };
  stdout_buf out_buf;
  null_buf progress_buf;
  std::ostream out(&out_buf);
  std::ostream progress(&progress_buf);
  p.output_stream = &out;
  p.progress_stream = &progress;
  std::printf("relacy: %s (%d executions)\n", name, iterations);
  std::fflush(stdout);
  const bool ok = rl::simulate<Suite>(p);
  std::printf("relacy: %s: %s (%s, after %llu executions)\n", name, ok ? "passed" : "FAILED",
              rl::test_result_str(p.test_result),
              static_cast<unsigned long long>(p.stop_iteration));
  std::fflush(stdout);
  return ok;
}

} // namespace rl_model
} // namespace async_test

#endif // ASYNC_TESTS_SUPPORT_RELACY_MODEL_H
