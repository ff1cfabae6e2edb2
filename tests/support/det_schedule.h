// SPDX-License-Identifier: BSL-1.0
// A deterministic scheduler for the library's risky protocols (the idea of folly's
// DeterministicSchedule, written for this project).
//
// A test runs 2 to 4 small thread functions under a `schedule`. They are real threads, but only
// one runs at a time: it holds the baton. Every operation on an async_test::det::atomic (the
// atomic type the queues take through their traits' `atomic` member) is a step: before it, the
// running thread lets the schedule pick who runs next, from a seed. So a seed is one
// interleaving of the threads' atomic operations, chosen at random, and the same seed replays
// it. (Only interleavings are explored: every operation is sequentially consistent here. Weak
// memory orders are ThreadSanitizer's and the ARM builds' business.)
//
// Two ways of picking, by seed:
//   - uniform: at every step, any runnable thread, at random;
//   - priorities (PCT, Burckhardt et al. 2010): threads get random priorities, the highest
//     runnable one runs, and at a few random steps the running thread drops to the lowest
//     priority. This finds bugs that need one thread to stall for a long stretch at one exact
//     point (a lost wake-up, an ABA) much more often than uniform picking does. A thread
//     that spins on a value cannot make progress alone, so now and then (1 step in 16) a
//     random thread runs instead.
//
// Parking (detail::park on a det::atomic) is modelled: a parked thread is not runnable until
// unpark_all() on its word. When every thread that has not finished is parked with no deadline,
// the run ends as a deadlock (a lost wake-up); when it takes more than max_steps, as a livelock.
// A timed park may time out when nothing else can run. CAS-weak fails spuriously now and then,
// and park returns spuriously now and then, as the real ones may.
//
// A run that fails leaves its threads blocked for good (nothing can unwind them safely): they
// are detached and the schedule is leaked, so the test can report the failure and go on.
#ifndef ASYNC_TESTS_SUPPORT_DET_SCHEDULE_H
#define ASYNC_TESTS_SUPPORT_DET_SCHEDULE_H

#include <async/detail/wait.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace async_test {
namespace det {

enum class outcome { finished, deadlock, livelock };

inline const char* name(outcome o) {
  switch (o) {
  case outcome::finished:
    return "finished";
  case outcome::deadlock:
    return "deadlock (every unfinished thread parked: a lost wake-up)";
  case outcome::livelock:
    return "livelock (no end within the step limit)";
  }
  return "?";
}

class schedule {
public:
  struct options {
    std::uint64_t max_steps = 200000;
    // Called by the running thread at every step, before it picks the next thread (under the
    // baton: no other scheduled thread runs meanwhile). For invariants that must hold between
    // any two atomic operations.
    std::function<void()> invariant;
  };

  schedule(std::uint64_t seed, options opts) : seed_(seed), rng_(seed), opts_(std::move(opts)) {
    pct_ = (next_random() & 1) != 0;
  }

  /// Runs the functions as scheduled threads until all return, or the run deadlocks or
  /// livelocks. After a failure the schedule must not be destroyed (its threads still wait on
  /// it): run_once() below takes care of that.
  outcome run(std::vector<std::function<void()>> bodies) {
    const std::size_t n = bodies.size();
    threads_.resize(n);
    for (std::size_t k = 0; k < n; ++k) {
      threads_[k].priority = static_cast<int>(next_random() % 1000) + 1000;
    }
    // A few steps at which the running thread drops to the lowest priority (PCT's change
    // points), spread over the first part of the run, where the interesting steps are.
    for (int k = 0; k < 3; ++k) {
      change_points_.push_back(next_random() % 400);
    }
    std::vector<std::thread> handles;
    for (std::size_t k = 0; k < n; ++k) {
      handles.emplace_back([this, k, &bodies] {
        current_schedule() = this;
        me() = static_cast<int>(k);
        {
          std::unique_lock<std::mutex> lock(mutex_);
          cv_.wait(lock, [&] { return running_ == static_cast<int>(k); });
        }
        bodies[k]();
        std::unique_lock<std::mutex> lock(mutex_);
        threads_[k].finished = true;
        pass_baton(lock, k);
      });
    }
    {
      std::unique_lock<std::mutex> lock(mutex_);
      running_ = pick(lock, -1);
      cv_.notify_all();
      done_cv_.wait(lock, [this] { return result_set_; });
    }
    if (result_ == outcome::finished) {
      for (auto& h : handles) {
        h.join();
      }
    } else {
      for (auto& h : handles) {
        h.detach();
      }
    }
    return result_;
  }

  std::uint64_t steps() const { return steps_; }
  bool prioritized() const { return pct_; }

  /// Where each thread stands (for a failure's report).
  std::string describe() {
    std::lock_guard<std::mutex> lock(mutex_);
    std::ostringstream s;
    s << (pct_ ? "priorities" : "uniform") << ", " << steps_ << " steps;";
    for (std::size_t k = 0; k < threads_.size(); ++k) {
      s << " thread " << k << ": "
        << (threads_[k].finished               ? "finished"
            : threads_[k].parked_on != nullptr ? "parked"
                                               : "runnable");
    }
    return s.str();
  }

  /// The schedule of the calling thread, or nullptr outside a run.
  static schedule*& current_schedule() {
    static thread_local schedule* s = nullptr;
    return s;
  }

  /// A step: the running thread may hand the baton to another one. Called before every
  /// operation of a det::atomic.
  void step() {
    std::unique_lock<std::mutex> lock(mutex_);
    if (opts_.invariant) {
      opts_.invariant();
    }
    if (++steps_ > opts_.max_steps) {
      fail(lock, outcome::livelock);
      wait_forever(lock);
    }
    const int k = me();
    for (std::uint64_t c : change_points_) {
      if (c == steps_) {
        threads_[static_cast<std::size_t>(k)].priority = lowest_priority_--;
      }
    }
    const int next = pick(lock, -1);
    switch_to(lock, next);
  }

  /// Parks the calling thread on `word` while still() holds (checked now, atomically with the
  /// decision). Returns false when a timed park timed out.
  bool park(const void* word, const std::function<bool()>& still, bool timed) {
    std::unique_lock<std::mutex> lock(mutex_);
    ++steps_;
    if (!still()) {
      return true; // changed already: like a futex's EAGAIN
    }
    if ((next_random() & 31) == 0) {
      return true; // a spurious return
    }
    auto& self = threads_[static_cast<std::size_t>(me())];
    self.parked_on = word;
    self.timed = timed;
    self.timed_out = false;
    const int next = pick(lock, me());
    if (next < 0) {
      // Nobody else can run. A timed park times out; otherwise a thread parked with a
      // deadline is made to time out; otherwise the run is deadlocked.
      if (timed) {
        self.parked_on = nullptr;
        return false;
      }
      const int sleeper = timed_sleeper();
      if (sleeper < 0) {
        fail(lock, outcome::deadlock);
        wait_forever(lock);
      }
      auto& t = threads_[static_cast<std::size_t>(sleeper)];
      t.parked_on = nullptr;
      t.timed_out = true;
      switch_to(lock, sleeper);
    } else {
      switch_to(lock, next);
    }
    return !self.timed_out;
  }

  /// Makes every thread parked on `word` runnable.
  void unpark_all(const void* word) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      for (auto& t : threads_) {
        if (t.parked_on == word) {
          t.parked_on = nullptr;
        }
      }
    }
    step();
  }

  /// A random number from the schedule's stream (for spurious failures).
  std::uint64_t next_random() {
    rng_ += 0x9e3779b97f4a7c15ull;
    std::uint64_t z = rng_;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }

private:
  struct thread_state {
    int priority = 0;
    bool finished = false;
    const void* parked_on = nullptr;
    bool timed = false;
    bool timed_out = false;
  };

  static int& me() {
    static thread_local int k = -1;
    return k;
  }

  bool runnable(std::size_t k) const {
    return !threads_[k].finished && threads_[k].parked_on == nullptr;
  }

  // The next thread to run (not `except`), or -1 when none is runnable.
  int pick(std::unique_lock<std::mutex>&, int except) {
    std::vector<int> candidates;
    for (std::size_t k = 0; k < threads_.size(); ++k) {
      if (static_cast<int>(k) != except && runnable(k)) {
        candidates.push_back(static_cast<int>(k));
      }
    }
    if (candidates.empty()) {
      return -1;
    }
    if (!pct_ || (next_random() & 15) == 0) {
      return candidates[next_random() % candidates.size()];
    }
    int best = candidates[0];
    for (int k : candidates) {
      if (threads_[static_cast<std::size_t>(k)].priority >
          threads_[static_cast<std::size_t>(best)].priority) {
        best = k;
      }
    }
    return best;
  }

  int timed_sleeper() const {
    for (std::size_t k = 0; k < threads_.size(); ++k) {
      if (!threads_[k].finished && threads_[k].parked_on != nullptr && threads_[k].timed) {
        return static_cast<int>(k);
      }
    }
    return -1;
  }

  // Hands the baton to `next` (which may be the caller) and waits until it comes back.
  void switch_to(std::unique_lock<std::mutex>& lock, int next) {
    const int k = me();
    if (next == k) {
      return;
    }
    running_ = next;
    cv_.notify_all();
    cv_.wait(lock, [&] { return running_ == k; });
  }

  // The caller has finished: run someone else, or end the run.
  void pass_baton(std::unique_lock<std::mutex>& lock, std::size_t) {
    int next = pick(lock, -1);
    if (next < 0) {
      bool all_finished = true;
      for (auto& t : threads_) {
        all_finished = all_finished && t.finished;
      }
      if (all_finished) {
        result_ = outcome::finished;
        result_set_ = true;
        done_cv_.notify_all();
        return;
      }
      next = timed_sleeper();
      if (next < 0) {
        fail(lock, outcome::deadlock);
        return;
      }
      threads_[static_cast<std::size_t>(next)].parked_on = nullptr;
      threads_[static_cast<std::size_t>(next)].timed_out = true;
    }
    running_ = next;
    cv_.notify_all();
  }

  void fail(std::unique_lock<std::mutex>&, outcome o) {
    if (!result_set_) {
      result_ = o;
      result_set_ = true;
      running_ = -2; // nobody runs any more
      done_cv_.notify_all();
    }
  }

  void wait_forever(std::unique_lock<std::mutex>& lock) {
    cv_.wait(lock, [] { return false; });
  }

  std::uint64_t seed_;
  std::uint64_t rng_;
  options opts_;
  bool pct_ = false;
  std::vector<thread_state> threads_;
  std::vector<std::uint64_t> change_points_;
  int lowest_priority_ = 999;
  std::uint64_t steps_ = 0;
  std::mutex mutex_;
  std::condition_variable cv_;
  int running_ = -1;
  std::condition_variable done_cv_;
  bool result_set_ = false;
  outcome result_ = outcome::finished;
};

/// One seed's run: the outcome and a description. A failed run's schedule is leaked on purpose
/// (its threads wait on it for good).
struct run_result {
  outcome result;
  std::string report;
};

inline run_result run_once(std::uint64_t seed, std::vector<std::function<void()>> bodies,
                           schedule::options opts = {}) {
  auto* s = new schedule(seed, std::move(opts));
  const outcome o = s->run(std::move(bodies));
  run_result r{o, s->describe()};
  if (o == outcome::finished) {
    delete s;
  }
  return r;
}

/// std::atomic's interface (what the library uses of it), every operation a scheduling step.
/// Outside a scheduled run (construction, checks from the test's main thread) it is a plain
/// atomic. Memory orders are accepted and ignored: the schedule runs one thread at a time.
template <typename V>
class atomic {
public:
  atomic() noexcept : v_() {}
  constexpr atomic(V v) noexcept : v_(v) {} // NOLINT: implicit, as std::atomic's
  atomic(const atomic&) = delete;
  atomic& operator=(const atomic&) = delete;

  V load(std::memory_order = std::memory_order_seq_cst) const {
    step();
    return v_.load();
  }
  void store(V v, std::memory_order = std::memory_order_seq_cst) {
    step();
    v_.store(v);
  }
  V exchange(V v, std::memory_order = std::memory_order_seq_cst) {
    step();
    return v_.exchange(v);
  }
  bool compare_exchange_strong(V& expected, V desired, std::memory_order, std::memory_order) {
    step();
    return v_.compare_exchange_strong(expected, desired);
  }
  bool compare_exchange_strong(V& expected, V desired,
                               std::memory_order = std::memory_order_seq_cst) {
    step();
    return v_.compare_exchange_strong(expected, desired);
  }
  bool compare_exchange_weak(V& expected, V desired, std::memory_order o1, std::memory_order) {
    return compare_exchange_weak(expected, desired, o1);
  }
  bool compare_exchange_weak(V& expected, V desired,
                             std::memory_order = std::memory_order_seq_cst) {
    step();
    schedule* s = schedule::current_schedule();
    if (s != nullptr && (s->next_random() & 15) == 0) {
      expected = v_.load(); // a spurious failure, as LL/SC machines have
      return false;
    }
    return v_.compare_exchange_strong(expected, desired);
  }
  V fetch_add(V d, std::memory_order = std::memory_order_seq_cst) {
    step();
    return v_.fetch_add(d);
  }
  V fetch_sub(V d, std::memory_order = std::memory_order_seq_cst) {
    step();
    return v_.fetch_sub(d);
  }

  /// detail::park on this word: sleeps while it holds `expected` (a futex compares the low
  /// half; the library changes that half with every change it waits for).
  bool park(std::uint64_t expected, const async::detail::wait_clock::time_point* deadline) {
    schedule* s = schedule::current_schedule();
    const bool timed = deadline != nullptr && *deadline != async::detail::no_deadline();
    if (s == nullptr) {
      std::this_thread::yield();
      return true;
    }
    return s->park(
        this,
        [this, expected] {
          return static_cast<std::uint32_t>(v_.load()) == static_cast<std::uint32_t>(expected);
        },
        timed);
  }

  void unpark_all() {
    schedule* s = schedule::current_schedule();
    if (s != nullptr) {
      s->unpark_all(this);
    }
  }

  /// The value without a step (invariant checks inside a step).
  V peek() const { return v_.load(); }

private:
  static void step() {
    schedule* s = schedule::current_schedule();
    if (s != nullptr) {
      s->step();
    }
  }

  std::atomic<V> v_;
};

} // namespace det
} // namespace async_test

#endif // ASYNC_TESTS_SUPPORT_DET_SCHEDULE_H
