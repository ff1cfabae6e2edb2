// SPDX-License-Identifier: BSL-1.0
// A deterministic scheduler for the library's risky protocols (the idea of folly's
// DeterministicSchedule and of CHESS, written for this project).
//
// A test runs 2 to 4 small thread functions under a `plan`. They are real threads, but only one
// runs at a time: it holds the baton. Every operation on an async_test::det::atomic (the
// atomic type the queues take through their traits' `atomic` member) is a step: before it, the
// running thread lets the schedule pick who runs next. So a run is one interleaving of the
// threads' atomic operations, and the same plan replays it. (Only interleavings are explored:
// every operation is sequentially consistent here. Weak memory orders are ThreadSanitizer's
// and the ARM builds' business.)
//
// Two ways of exploring:
//   - random (plan::random(seed)): by seed, either uniform (any runnable thread at every step)
//     or priorities (PCT, Burckhardt et al. 2010: random thread priorities, the highest
//     runnable thread runs, and at a few random early steps the running thread drops to the
//     lowest priority), with a random thread now and then so that spinners cannot starve the
//     thread they wait for. CAS-weak fails spuriously now and then, and park returns
//     spuriously now and then, as the real ones may.
//   - systematic (explore()): every interleaving with at most `bound` preemptions (switching
//     away from a thread that could go on), depth first, as CHESS's iterative context
//     bounding does. Bugs that need a thread to stall at one exact point while others run
//     (lost wake-ups, ABA) need one or two preemptions; a bound of 2 finds them for certain in
//     a program of a few dozen steps. A thread that keeps reading without writing (a spin
//     loop) yields its turn, which costs no preemption.
//
// Parking (detail::park on a det::atomic) is modelled: a parked thread is not runnable until
// unpark_all() on its word. When every thread that has not finished is parked with no
// deadline, the run ends as a deadlock (a lost wake-up); when it takes more than max_steps, as
// a livelock. A timed park times out when nothing else can run.
//
// A run that fails leaves its threads blocked for good (nothing can unwind them safely): they
// are detached and the schedule is leaked, so the test can report the failure and go on.
#ifndef ASYNC_TESTS_SUPPORT_DET_SCHEDULE_H
#define ASYNC_TESTS_SUPPORT_DET_SCHEDULE_H

#include <async/detail/deadline.h>
#include <async/detail/park.h>

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#if defined(__linux__)
#include <sched.h>
#endif

namespace async_test {
namespace det {

enum class outcome { finished, deadlock, livelock, diverged };

inline const char* name(outcome o) {
  switch (o) {
  case outcome::finished:
    return "finished";
  case outcome::deadlock:
    return "deadlock (every unfinished thread parked: a lost wake-up)";
  case outcome::livelock:
    return "livelock (no end within the step limit)";
  case outcome::diverged:
    return "replay diverged (the program is not deterministic under the schedule)";
  }
  return "?";
}

/// One choice point of a systematic run: the threads that could run (the default first) and
/// which one did.
struct decision {
  std::vector<int> options;
  std::vector<bool> preemptive; // choosing options[k] switches away from a runnable thread
  std::size_t chosen = 0;
  int preemptions_before = 0;
};

/// What a run follows: a seed (random exploration) or a prefix of choices (systematic).
struct plan {
  std::uint64_t seed = 0;
  bool systematic = false;
  std::vector<std::size_t> prefix; // systematic: the option taken at each choice point
  std::vector<decision> trace;     // systematic: filled by the run
  std::uint64_t max_steps = 100000;
  // Called by the running thread at every step, before it picks the next thread (no other
  // scheduled thread runs meanwhile). For invariants that must hold between any two steps.
  std::function<void()> invariant;

  static plan random(std::uint64_t seed) {
    plan p;
    p.seed = seed;
    return p;
  }

  /// The prefix, for a failure's report ("0.0.2.1...").
  std::string path() const {
    std::ostringstream s;
    for (const auto& d : trace) {
      s << d.chosen << '.';
    }
    return s.str();
  }

  /// Runs the functions as scheduled threads; the outcome, and a report when it failed.
  struct result {
    outcome what;
    std::string report;
  };
  result run(std::vector<std::function<void()>> bodies);
};

/// A binary semaphore for one waiter: let_through() lets the next (or a waiting) pass() go on
/// once. What the opener wrote before is visible to the thread that passes (the mutex).
struct gate {
  std::mutex m;
  std::condition_variable cv;
  bool open = false;

  void let_through() {
    {
      std::lock_guard<std::mutex> g(m);
      open = true;
    }
    cv.notify_one();
  }
  void pass() {
    std::unique_lock<std::mutex> g(m);
    cv.wait(g, [this] { return open; });
    open = false;
  }
};

/// The threads that runs are played on, kept from one run to the next: a test makes thousands
/// of runs, and starting 2 to 4 threads for each was most of its time under AddressSanitizer
/// (every new thread maps a stack and its shadow and refills the allocator's caches).
class crew {
public:
  /// The crew of the calling thread (the one that starts runs). Never destroyed: threads left
  /// in a failed run are blocked for good.
  static crew& of_this_thread() {
    static thread_local crew* c = new crew;
    return *c;
  }

  /// Runs `job` on thread k of the crew (started if it is not there yet).
  void start(std::size_t k, std::function<void()> job) {
    while (members_.size() <= k) {
      members_.emplace_back(new member);
    }
    member& m = *members_[k];
    m.job = std::move(job); // the member waits at `go`: the gate orders this write before it
    m.go.let_through();
  }

  /// Waits until threads 0..n-1 have returned from their jobs.
  void wait_until_idle(std::size_t n) {
    for (std::size_t k = 0; k < n; ++k) {
      members_[k]->done.pass();
    }
  }

  /// Threads 0..n-1 are blocked in a failed run for good: they are left there (detached,
  /// their state leaked) and the next run gets new ones.
  void abandon(std::size_t n) {
    for (std::size_t k = 0; k < n; ++k) {
      members_[k].release()->thread.detach();
    }
    members_.erase(members_.begin(), members_.begin() + static_cast<std::ptrdiff_t>(n));
  }

private:
  struct member {
    gate go;   // a job is there
    gate done; // the job has returned
    std::function<void()> job;
    std::thread thread; // last: it starts once the rest is there

    member() : thread([this] { serve(); }) {}

    void serve() {
      for (;;) {
        go.pass();
        job();
        job = nullptr;
        done.let_through();
      }
    }
  };

  std::vector<std::unique_ptr<member>> members_;
};

class schedule {
public:
  explicit schedule(plan& p) : plan_(p), rng_(p.seed) {
    if (!p.systematic) {
      pct_ = (next_random() & 1) != 0;
      // Change points early in the run, over a window of random length: the steps that
      // matter in these small programs come within the first few dozen.
      const std::uint64_t window = std::uint64_t(16) << (next_random() % 6);
      const int points = 1 + static_cast<int>(next_random() % 4);
      for (int k = 0; k < points; ++k) {
        change_points_.push_back(next_random() % window);
      }
    }
  }

  outcome run(std::vector<std::function<void()>>& bodies) {
    const std::size_t n = bodies.size();
    threads_.resize(n);
    gates_.clear();
    for (std::size_t k = 0; k < n; ++k) {
      gates_.emplace_back(new gate);
    }
    for (std::size_t k = 0; k < n; ++k) {
      threads_[k].priority = static_cast<int>(next_random() % 1000) + 1000;
    }
    crew& threads = crew::of_this_thread();
    for (std::size_t k = 0; k < n; ++k) {
      threads.start(k, [this, k, &bodies] {
        current_schedule() = this;
        me() = static_cast<int>(k);
        gates_[k]->pass();
        bodies[k]();
        std::unique_lock<std::mutex> lock(mutex_);
        threads_[k].finished = true;
        const int next = pick(lock, false);
        if (next >= 0) {
          hand_to(lock, next);
        } else {
          end_or_timeout(lock);
        }
      });
    }
    {
      std::unique_lock<std::mutex> lock(mutex_);
      hand_to(lock, pick(lock, false));
      lock.lock();
      done_cv_.wait(lock, [this] { return result_set_; });
    }
    if (result_ == outcome::finished) {
      threads.wait_until_idle(n);
    } else {
      threads.abandon(n);
    }
    return result_;
  }

  /// Where each thread stands (for a failure's report).
  std::string describe() {
    std::lock_guard<std::mutex> lock(mutex_);
    std::ostringstream s;
    s << (plan_.systematic ? "systematic"
          : pct_           ? "priorities"
                           : "uniform")
      << ", " << steps_ << " steps;";
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
  /// operation of a det::atomic; `writes` says whether the operation may change the word.
  void step(bool writes) {
    std::unique_lock<std::mutex> lock(mutex_);
    if (plan_.invariant) {
      plan_.invariant();
    }
    if (++steps_ > plan_.max_steps) {
      fail(lock, outcome::livelock);
    }
    auto& self = threads_[static_cast<std::size_t>(me())];
    self.reads_in_a_row = writes ? 0 : self.reads_in_a_row + 1;
    for (std::uint64_t c : change_points_) {
      if (c == steps_) {
        self.priority = lowest_priority_--;
      }
    }
    switch_to(lock, pick(lock, true));
  }

  /// Parks the calling thread on `word` while still() holds (checked now, atomically with the
  /// decision). Returns false when a timed park timed out.
  bool park(const void* word, const std::function<bool()>& still, bool timed) {
    std::unique_lock<std::mutex> lock(mutex_);
    ++steps_;
    if (!still()) {
      return true; // changed already: like a futex's EAGAIN
    }
    if (!plan_.systematic && (next_random() & 31) == 0) {
      return true; // a spurious return
    }
    auto& self = threads_[static_cast<std::size_t>(me())];
    self.parked_on = word;
    self.timed = timed;
    self.timed_out = false;
    const int next = pick(lock, false);
    if (next >= 0) {
      switch_to(lock, next);
    } else if (timed) {
      self.parked_on = nullptr; // nothing else can run: the deadline passes
      return false;
    } else {
      end_or_timeout(lock);
      await_baton(lock);
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
    step(true);
  }

  /// Whether a CAS-weak should fail spuriously now (random exploration only).
  bool spurious_failure() { return !plan_.systematic && (next_random() & 15) == 0; }

private:
  struct thread_state {
    int priority = 0;
    bool finished = false;
    const void* parked_on = nullptr;
    bool timed = false;
    bool timed_out = false;
    unsigned reads_in_a_row = 0;
  };

  static int& me() {
    static thread_local int k = -1;
    return k;
  }

  std::uint64_t next_random() {
    rng_ += 0x9e3779b97f4a7c15ull;
    std::uint64_t z = rng_;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }

  bool runnable(std::size_t k) const {
    return !threads_[k].finished && threads_[k].parked_on == nullptr;
  }

  // The next thread to run, or -1 when none is runnable. `caller_runnable`: the calling
  // thread could go on (a step), so switching away from it is a preemption.
  int pick(std::unique_lock<std::mutex>&, bool caller_runnable) {
    const int self = caller_runnable ? me() : -1;
    std::vector<int> options;
    // A thread that has read without writing for a while is spinning on another thread: it
    // yields to the others, as a fair scheduler would make it (no preemption is counted, and
    // it is not offered the choice to go on: its reads change nothing, so going on could only
    // repeat the same states).
    const bool spinning = self >= 0 && threads_[static_cast<std::size_t>(self)].reads_in_a_row > 32;
    if (self >= 0 && !spinning) {
      options.push_back(self);
    }
    // The others in turn, from the caller's successor on (see the spinner below).
    const std::size_t n = threads_.size();
    const std::size_t from = self >= 0 ? static_cast<std::size_t>(self) + 1 : 0;
    for (std::size_t j = 0; j < n; ++j) {
      const std::size_t k = (from + j) % n;
      if (static_cast<int>(k) != self && runnable(k)) {
        options.push_back(static_cast<int>(k));
      }
    }
    if (spinning) {
      threads_[static_cast<std::size_t>(self)].reads_in_a_row = 0;
      if (options.empty()) {
        options.push_back(self); // nobody else can run: spin on
      }
    }
    if (options.empty()) {
      return -1;
    }
    if (plan_.systematic) {
      if (spinning) {
        // A spinner yields to the next thread in turn, not to one the exploration picks:
        // choosing there would let it pass over one thread at every yield for ever (two
        // spinners and a closer between its two stores, say), a schedule no fair scheduler
        // makes. The thread that gets the turn can still be preempted at its next step.
        return options[0];
      }
      return choose_systematic(options, self >= 0);
    }
    if (!pct_ || (next_random() & 15) == 0) {
      return options[next_random() % options.size()];
    }
    int best = options[0];
    for (int k : options) {
      if (threads_[static_cast<std::size_t>(k)].priority >
          threads_[static_cast<std::size_t>(best)].priority) {
        best = k;
      }
    }
    return best;
  }

  int choose_systematic(const std::vector<int>& options, bool first_is_caller) {
    if (options.size() == 1) {
      return options[0];
    }
    decision d;
    d.options = options;
    for (std::size_t k = 0; k < options.size(); ++k) {
      d.preemptive.push_back(first_is_caller && k > 0);
    }
    d.preemptions_before = preemptions_;
    const std::size_t at = plan_.trace.size();
    if (at < plan_.prefix.size()) {
      d.chosen = plan_.prefix[at];
      if (d.chosen >= options.size()) {
        diverged_ = true;
        d.chosen = 0;
      }
    }
    preemptions_ += d.preemptive[d.chosen] ? 1 : 0;
    plan_.trace.push_back(d);
    return options[d.chosen];
  }

  // The baton passes through one gate per thread: opening a gate wakes the one thread that
  // takes the baton, and the schedule's lock is released before, so that the thread woken
  // does not wake only to block on it. (One condition variable on the schedule's lock, shared
  // by all, woke every thread at every step and then made the woken one wait for the lock;
  // the det tests spent most of their time in the kernel on it.)
  // Gives the baton to `next` (>= 0); returns with the lock released.
  void hand_to(std::unique_lock<std::mutex>& lock, int next) {
    lock.unlock();
    gates_[static_cast<std::size_t>(next)]->let_through();
  }

  // Blocks until the baton comes back to the caller; returns with the lock held.
  void await_baton(std::unique_lock<std::mutex>& lock) {
    if (lock.owns_lock()) {
      lock.unlock();
    }
    gates_[static_cast<std::size_t>(me())]->pass();
    lock.lock();
  }

  // Hands the baton to `next` (which may be the caller) and waits until it comes back.
  void switch_to(std::unique_lock<std::mutex>& lock, int next) {
    const int k = me();
    if (next == k) {
      return;
    }
    hand_to(lock, next);
    await_baton(lock);
  }

  // Nobody can run: the run has ended, or a timed sleeper times out, or it is a deadlock.
  void end_or_timeout(std::unique_lock<std::mutex>& lock) {
    bool all_finished = true;
    for (auto& t : threads_) {
      all_finished = all_finished && t.finished;
    }
    if (all_finished) {
      result_ = diverged_ ? outcome::diverged : outcome::finished;
      result_set_ = true;
      done_cv_.notify_all();
      return;
    }
    for (std::size_t k = 0; k < threads_.size(); ++k) {
      auto& t = threads_[k];
      if (!t.finished && t.parked_on != nullptr && t.timed) {
        t.parked_on = nullptr;
        t.timed_out = true;
        hand_to(lock, static_cast<int>(k));
        return;
      }
    }
    fail(lock, outcome::deadlock);
  }

  void fail(std::unique_lock<std::mutex>& lock, outcome o) {
    if (!result_set_) {
      result_ = o;
      result_set_ = true;
      done_cv_.notify_all();
    }
    if (me() >= 0) {
      done_cv_.wait(lock, [] { return false; }); // a scheduled thread stays here for good
    }
  }

  plan& plan_;
  std::uint64_t rng_;
  bool pct_ = false;
  bool diverged_ = false;
  int preemptions_ = 0;
  std::vector<thread_state> threads_;
  std::vector<std::uint64_t> change_points_;
  int lowest_priority_ = 999;
  std::uint64_t steps_ = 0;
  std::mutex mutex_;
  std::vector<std::unique_ptr<gate>> gates_;
  std::condition_variable done_cv_;
  bool result_set_ = false;
  outcome result_ = outcome::finished;
};

/// Keeps the calling thread, and so the crew threads it starts for its runs (they inherit it),
/// on the CPU it is on now. Only one thread of a run goes at a time, so nothing is lost, and a
/// hand-over of the baton becomes a switch on one core instead of a wake-up sent to another (on the
/// 2-vCPU VM the det tests took half the time, and left the other core to the tests beside them).
inline void stay_on_this_cpu() {
#if defined(__linux__)
  static thread_local bool done = false;
  if (done) {
    return;
  }
  done = true;
  const int cpu = sched_getcpu();
  if (cpu >= 0) {
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    (void)sched_setaffinity(0, sizeof one, &one); // an error leaves it as it was: still correct
  }
#endif
}

inline plan::result plan::run(std::vector<std::function<void()>> bodies) {
  stay_on_this_cpu();
  trace.clear();
  auto* s = new schedule(*this);
  const outcome o = s->run(bodies);
  result r{o, o == outcome::finished ? std::string() : s->describe()};
  if (o == outcome::finished) {
    delete s; // a failed run's threads still wait on it: it is leaked on purpose
  }
  return r;
}

/// Runs f alone under a schedule: its steps are counted, so that a loop without end in a
/// structure that a failed protocol left broken ends as a livelock instead of hanging the test.
/// An empty string when it finished.
inline std::string run_alone(std::function<void()> f) {
  plan p = plan::random(0);
  const plan::result r = p.run({std::move(f)});
  return r.what == outcome::finished ? std::string()
                                     : std::string("afterwards: ") + name(r.what) + "; " + r.report;
}

/// Runs `scenario(plan&)` (which builds its program, calls plan.run and checks; it returns an
/// empty string or what went wrong) for every interleaving with at most `bound` preemptions,
/// depth first, until one fails or `max_runs` have run. Returns the first failure (with its
/// choices) or an empty string; `runs` counts the interleavings, `complete` says whether
/// they were all explored.
template <typename Scenario>
std::string explore(int bound, std::size_t max_runs, Scenario scenario, std::size_t& runs,
                    bool& complete) {
  std::vector<std::size_t> prefix;
  runs = 0;
  complete = false;
  for (;;) {
    plan p;
    p.systematic = true;
    p.max_steps = 20000;
    p.prefix = prefix;
    const std::string failure = scenario(p);
    ++runs;
    if (!failure.empty()) {
      return failure + " (choices " + p.path() + ")";
    }
    // The deepest choice point with an option not yet taken that stays within the bound.
    std::size_t j = p.trace.size();
    bool found = false;
    while (j > 0 && !found) {
      --j;
      const decision& d = p.trace[j];
      for (std::size_t k = d.chosen + 1; k < d.options.size(); ++k) {
        if (d.preemptions_before + (d.preemptive[k] ? 1 : 0) <= bound) {
          prefix.clear();
          for (std::size_t i = 0; i < j; ++i) {
            prefix.push_back(p.trace[i].chosen);
          }
          prefix.push_back(k);
          found = true;
          break;
        }
      }
    }
    if (!found) {
      complete = true;
      return "";
    }
    if (runs >= max_runs) {
      return "";
    }
  }
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
    step(false);
    return v_.load();
  }
  void store(V v, std::memory_order = std::memory_order_seq_cst) {
    step(true);
    v_.store(v);
  }
  V exchange(V v, std::memory_order = std::memory_order_seq_cst) {
    step(true);
    return v_.exchange(v);
  }
  bool compare_exchange_strong(V& expected, V desired, std::memory_order, std::memory_order) {
    return compare_exchange_strong(expected, desired);
  }
  bool compare_exchange_strong(V& expected, V desired,
                               std::memory_order = std::memory_order_seq_cst) {
    step(true);
    return v_.compare_exchange_strong(expected, desired);
  }
  bool compare_exchange_weak(V& expected, V desired, std::memory_order o1, std::memory_order) {
    return compare_exchange_weak(expected, desired, o1);
  }
  bool compare_exchange_weak(V& expected, V desired,
                             std::memory_order = std::memory_order_seq_cst) {
    step(true);
    schedule* s = schedule::current_schedule();
    if (s != nullptr && s->spurious_failure()) {
      expected = v_.load(); // a spurious failure, as LL/SC machines have
      return false;
    }
    return v_.compare_exchange_strong(expected, desired);
  }
  V fetch_add(V d, std::memory_order = std::memory_order_seq_cst) {
    step(true);
    return v_.fetch_add(d);
  }
  V fetch_sub(V d, std::memory_order = std::memory_order_seq_cst) {
    step(true);
    return v_.fetch_sub(d);
  }
  V fetch_or(V d, std::memory_order = std::memory_order_seq_cst) {
    step(true);
    return v_.fetch_or(d);
  }
  V fetch_and(V d, std::memory_order = std::memory_order_seq_cst) {
    step(true);
    return v_.fetch_and(d);
  }

  /// detail::park on this word: sleeps while its low half holds that of `expected` (as a futex
  /// does; the library changes that half with every change it waits for).
  bool park(std::uint64_t expected, const async::detail::wait_clock::time_point* deadline) {
    schedule* s = schedule::current_schedule();
    if (s == nullptr) {
      std::this_thread::yield();
      return true;
    }
    // The syscall is an event of its own: other threads may run between the caller's last
    // look at the world and the kernel's comparison of the word.
    step(false);
    const bool timed = deadline != nullptr && *deadline != async::detail::no_deadline();
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

  /// The value without a step (for invariant checks, which run inside a step).
  V peek() const { return v_.load(); }

private:
  static void step(bool writes) {
    schedule* s = schedule::current_schedule();
    if (s != nullptr) {
      s->step(writes);
    }
  }

  std::atomic<V> v_;
};

} // namespace det
} // namespace async_test

#endif // ASYNC_TESTS_SUPPORT_DET_SCHEDULE_H
