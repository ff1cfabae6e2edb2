// SPDX-License-Identifier: BSL-1.0
// The thread pool's scheduler under the C++ memory model (Relacy; tests/support/
// relacy_model.h).
//
// detail::scheduler runs on the model's atomics (its atomic template parameter): the next
// slot that a task's first post goes to and a thief's claim of it, the local queues and the
// lanes with their word locks, the idle workers' list and searcher count, the parkers, the
// count of pending tasks, the count of active workers. Workers and posters are Relacy threads
// (as the deterministic scheduler's tests do, tests/det/det_test.cpp). A task carries a
// checked variable that the worker reads (rl_model::payload), so a task handed over without
// release/acquire is a data race, and a task counts its run in a checked variable that the
// poster reads once pending() is 0 (as threadpool::wait_idle's caller may); a worker that sleeps
// while a task waits shows as a deadlock, or as a poster that waits for ever (a livelock).
#include <async/detail/pool/scheduler.h>

#include "relacy_main.h"

namespace {

namespace rm = async_test::rl_model;
using async::detail::task;

// Time as a count of looks at the clock, a microsecond each (reset by each execution's suite),
// so that an execution's decisions that depend on time depend on the schedule alone.
// With far() set, the time is a century on: a watcher's deadline is then more than a minute
// off, and its timed park waits as an untimed one (relacy_model.h), so that the watcher does
// not rescue a wake-up lost elsewhere.
struct model_clock {
  using time_point = async::detail::wait_clock::time_point;
  static std::int64_t& calls() {
    static std::int64_t n = 0;
    return n;
  }
  static bool& far() {
    static bool f = false;
    return f;
  }
  static time_point now() {
    const std::chrono::hours epoch(far() ? 24 * 365 * 100 : 0);
    return time_point(epoch + std::chrono::microseconds(1 + calls()++));
  }
};

// What the scheduler tells its host: idle() counted in a model atomic, and, where a scenario
// has threads that sleep until no task is pending (as threadpool::wait_idle's callers do),
// told to them under the host's lock, as threadpool::wake_waiters does.
struct host {
  rm::atomic<int>* told;
  rl::mutex* lock;
  rl::condition_variable* idle_cv;
  const bool* sleepers;
  void idle() const {
    told->fetch_add(1, std::memory_order_relaxed);
    if (*sleepers) {
      lock->lock($);
      idle_cv->notify_all($);
      lock->unlock($);
    }
  }
  void orphaned() const {}
};

// No spinning: a worker that finds nothing parks after one look (with the default, its search
// would outlast every post of these programs, and no post would find it parked).
using sched = async::detail::scheduler<host, rm::atomic, model_clock, 0>;
using worker = sched::worker;

// The worker that each Relacy thread runs (tasks post through it); Relacy's threads are fibers
// of one system thread, so a thread_local would be one for all of them.
worker*& current(unsigned thread) {
  static worker* w[4] = {nullptr, nullptr, nullptr, nullptr};
  return w[thread];
}
worker* this_worker() { return current(rl::thread_index()); }

// Counts a run of task k in a checked variable: a poster that reads the counts after
// pending() reached 0 races with a task whose end does not happen before that.
void count_run(rl::var<int>* ran, int k) { ran[k]($) = ran[k]($) + 1; }

// A task that records its value: ran[v] counts its runs.
struct record {
  rm::payload v;
  rl::var<int>* ran;
  void operator()() const { count_run(ran, v.get()); }
};

// A delay of a random number of steps (0 to steps - 1), none of them a yield: a yield would
// make this thread's later loads return the latest stores, where the races below need older
// ones.
void delay(const rm::atomic<int>& any, unsigned steps = 24) {
  for (unsigned k = rl::rand(steps); k != 0; --k) {
    static_cast<void>(any.load(std::memory_order_relaxed));
  }
}

// The common parts: the scheduler, the host's count and lock, the worker loop.
struct pool_base {
  rm::parking_lot lot;
  rm::atomic<int> told{0};
  rl::mutex host_lock;
  rl::condition_variable idle_cv;
  bool sleepers = false; // set by a scenario with threads in sleep_until_idle()
  sched s{host{&told, &host_lock, &idle_cv, &sleepers}, 1};
  rl::var<int> ran[8];

  explicit pool_base(bool far_clock = false) {
    model_clock::calls() = 0;
    model_clock::far() = far_clock;
    for (rl::var<int>& r : ran) {
      r($) = 0;
    }
  }

  void work(unsigned me, worker& w) {
    current(me) = &w;
    s.run(w);
    current(me) = nullptr;
    s.leave(w);
  }
  void retire(worker& w) {
    host_lock.lock($);
    s.retire(w);
    host_lock.unlock($);
  }
  // Waits (yielding) until every posted task has finished, as threadpool::wait_idle does;
  // then the first `tasks` tasks have run once, and their runs happen before this return.
  void wait_idle(int tasks) {
    while (s.pending() != 0) {
      rl::yield(1, $);
    }
    for (int k = 0; k < tasks; ++k) {
      RL_ASSERT(ran[k]($) == 1);
    }
  }
  // As wait_idle() with threads that sleep (`sleepers` set): under the host's lock, until
  // pending() is 0, woken by the host's idle(). Then as wait_idle(tasks).
  void sleep_until_idle(int tasks) {
    host_lock.lock($);
    while (s.pending() != 0) {
      idle_cv.wait(host_lock, $);
    }
    host_lock.unlock($);
    wait_idle(tasks);
  }
  // As threadpool::discard_if for the next slots (an asio_context that stops): claims what
  // waits there under the host's lock, queues it again, and tells the sleepers when a lost
  // claim gave back the last count.
  void claim_and_requeue() {
    std::vector<task> claimed;
    host_lock.lock($);
    const bool emptied = s.claim_next_slots(claimed);
    host_lock.unlock($);
    for (task& t : claimed) {
      s.resubmit(std::move(t));
    }
    if (emptied) {
      host{&told, &host_lock, &idle_cv, &sleepers}.idle();
    }
  }
  // After the threads: what retired workers handed over runs here, as the pool's destructor
  // runs it; then every task ran once.
  void drain_and_check(int tasks) {
    task t;
    while (s.take_any(t)) {
      t();
      t.reset();
      s.finish(1);
    }
    RL_ASSERT(s.pending() == 0);
    for (int k = 0; k < tasks; ++k) {
      RL_ASSERT(ran[k]($) == 1);
    }
  }
};

// Two workers, run by threads 0 and 1; the other threads post, and the last of them retires
// both.
struct two_workers : pool_base {
  worker* a = nullptr;
  worker* b = nullptr;
  explicit two_workers(bool far_clock = false) : pool_base(far_clock) {
    a = &s.add_worker();
    b = &s.add_worker();
  }
  // Runs worker a or b when `me` is thread 0 or 1 (true); false for the others.
  bool works(unsigned me) {
    if (me > 1) {
      return false;
    }
    work(me, me == 0 ? *a : *b);
    return true;
  }
  void retire_both() {
    retire(*a);
    retire(*b);
  }
};

// One parked worker, posts from outside: each wakes it (the idle list, the searcher count, the
// parker's token), and each task's contents reach it.
struct outside_posts : rl::test_suite<outside_posts, 2>, pool_base {
  worker* w = nullptr;
  outside_posts() { w = &s.add_worker(); }
  void thread(unsigned me) {
    if (me == 0) {
      work(me, *w);
    } else {
      for (int k = 0; k < 3; ++k) {
        s.submit(task(record{rm::payload(k), ran}), nullptr);
      }
      wait_idle(3);
      retire(*w);
    }
  }
  void after() {
    drain_and_check(3);
    RL_ASSERT(told.load(std::memory_order_relaxed) >= 1); // the host heard of the last finish
  }
};

// Two parked workers, two posters from outside: each post's look at the idle workers races a
// worker's registration to park, and the two posts race each other for the wake-ups (the
// searcher count, the idle list). A post left with every worker asleep is a poster that waits
// for ever.
struct two_posters : rl::test_suite<two_posters, 4>, two_workers {
  rm::atomic<int> posted{0};
  void thread(unsigned me) {
    if (works(me)) {
      return;
    }
    const int first = me == 2 ? 0 : 2;
    for (int k = first; k < first + 2; ++k) {
      s.submit(task(record{rm::payload(k), ran}), nullptr);
    }
    if (posted.fetch_add(1, std::memory_order_acq_rel) == 1) { // the last poster
      wait_idle(4);
      retire_both();
    }
  }
  void after() { drain_and_check(4); }
};

// One worker, and a post that comes while it goes to sleep: the first task tells the poster
// that it is ending, and the second post, after a random delay, races the worker's search, its
// registration as parked and its last look (the seq_cst pair of the post's look at the idle
// workers, IW1, and the registration, IW2). Without the delay the post nearly always came
// before the worker's last look, which then found it, and a post that woke nobody at all went
// unseen. A wake-up lost here leaves the worker asleep with a task queued: the poster waits
// for ever.
struct post_while_parking : rl::test_suite<post_while_parking, 2>, pool_base {
  worker* w = nullptr;
  rm::atomic<int> first_ending{0};
  post_while_parking() { w = &s.add_worker(); }
  struct first {
    rl::var<int>* ran;
    rm::atomic<int>* ending;
    void operator()() const {
      count_run(ran, 0);
      ending->store(1, std::memory_order_relaxed);
    }
  };
  void thread(unsigned me) {
    if (me == 0) {
      work(me, *w);
    } else {
      s.submit(task(first{ran, &first_ending}), nullptr);
      while (first_ending.load(std::memory_order_relaxed) == 0) {
        rl::yield(1, $);
      }
      delay(first_ending);
      s.submit(task(record{rm::payload(1), ran}), nullptr);
      wait_idle(2);
      retire(*w);
    }
  }
  void after() { drain_and_check(2); }
};

// Two workers; a task posts two children, the first to its next slot, the second, after a
// random delay, to its own queue, and waits for the second: the other worker must steal it,
// woken by the post or finding it in the last look before it sleeps (the count of the queue,
// stored by the post, against the look: a Dekker pair with the idle workers' IW1 / IW2). The
// watcher of the next slot waits without a deadline here (model_clock::far), so that its
// timed looks do not hide a lost wake-up.
struct local_post : rl::test_suite<local_post, 3>, two_workers {
  rm::atomic<int> second_ran{0};
  local_post() : two_workers(/*far_clock=*/true) {}
  struct second {
    rl::var<int>* ran;
    rm::atomic<int>* flag;
    void operator()() const {
      count_run(ran, 2);
      flag->store(1, std::memory_order_release);
    }
  };
  void thread(unsigned me) {
    if (works(me)) {
      return;
    }
    s.submit(task([this] {
               count_run(ran, 0);
               s.submit(task(record{rm::payload(1), ran}), this_worker());
               delay(second_ran);
               s.submit(task(second{ran, &second_ran}), this_worker());
               while (second_ran.load(std::memory_order_acquire) == 0) {
                 rl::yield(1, $);
               }
             }),
             nullptr);
    wait_idle(3);
    retire_both();
  }
  void after() { drain_and_check(3); }
};

// Two workers; a task posts two children (the first to its worker's next slot, the second to
// its local queue) and waits for both: the other worker must take them, by a claim of the next
// slot or a steal from the local queue, and be woken for them.
struct steal : rl::test_suite<steal, 3>, two_workers {
  rm::atomic<int> children{0};
  struct child {
    rm::payload v;
    rl::var<int>* ran;
    rm::atomic<int>* children;
    void operator()() const {
      count_run(ran, v.get());
      children->fetch_add(1, std::memory_order_release);
    }
  };
  void thread(unsigned me) {
    if (works(me)) {
      return;
    }
    s.submit(task([this] {
               count_run(ran, 0);
               s.submit(task(child{rm::payload(1), ran, &children}), this_worker());
               s.submit(task(child{rm::payload(2), ran, &children}), this_worker());
               // The parent waits for its children: another worker must run them.
               while (children.load(std::memory_order_acquire) < 2) {
                 rl::yield(1, $);
               }
             }),
             nullptr);
    wait_idle(3);
    retire_both();
  }
  void after() { drain_and_check(3); }
};

// Two workers; a task fills its next slot, waits until the other worker has claimed and run
// that child, then fills the slot again after a random delay and waits for the second child.
// The children live inside the slot (inline, with the address-checked rm::value), so the
// owner's second fill races the thief's move out of the first unless the thief's release of
// the slot (NS4) happens before the owner's look (NS1); the task's wait on the count is
// relaxed, so it orders nothing itself. The second fill's wake-up races the other worker's
// registration as parked and its last look (the fill's publication, NS2, and its look at the
// idle workers, IW3, against IW2 and the look at the slot): lost, the second child waits in
// the slot with the thief asleep for good, since a sleeper that does not watch parks without
// a deadline. (A watcher's timed looks are what let a claim come at all: a child must wait 50
// of the model's looks at the clock before it is taken.)
struct slot_refilled : rl::test_suite<slot_refilled, 3>, two_workers {
  rm::memory_cells cells;
  rm::atomic<int> done{0};
  struct child {
    using async_moved_from_is_quiet = std::true_type; // inline, in the slot itself
    rm::value v;
    rl::var<int>* ran;
    rm::atomic<int>* done;
    void operator()() const {
      count_run(ran, v.get());
      done->fetch_add(1, std::memory_order_relaxed);
    }
  };
  // relaxed: the task reads nothing that the children wrote, and a wait that acquired would
  // order the thief's move out of the slot before the second fill, which is the slot's job.
  void wait_for(int children) {
    while (done.load(std::memory_order_relaxed) < children) {
      rl::yield(1, $);
    }
  }
  void thread(unsigned me) {
    if (works(me)) {
      return;
    }
    s.submit(task([this] {
               count_run(ran, 0);
               s.submit(task(child{rm::value(1), ran, &done}), this_worker());
               wait_for(1);
               delay(done);
               s.submit(task(child{rm::value(2), ran, &done}), this_worker());
               wait_for(2);
             }),
             nullptr);
    wait_idle(3);
    retire_both();
  }
  void after() { drain_and_check(3); }
};

// Two workers and a chain: a task fills its next slot and returns, its worker takes the child
// back and runs it (or the other worker claims it), and that child fills the slot again after
// a random delay and waits for the grandchild, which the other worker must claim. That worker
// watches the slots once it has seen them change (the first fill, the take-back), and gives
// the watch up at the first look that sees no change: the second fill races that unwatch()
// and the look after it (a Dekker pair with the fill's look at the watch, notify_for_slot()).
// The delay is up to 64 steps, so that two of the watcher's timed looks (a change, then none)
// often fit in it. Lost, the grandchild waits in the slot with the other worker asleep without
// a deadline.
struct chain_watched : rl::test_suite<chain_watched, 3>, two_workers {
  rm::atomic<int> done{0};
  struct grandchild {
    rl::var<int>* ran;
    rm::atomic<int>* done;
    void operator()() const {
      count_run(ran, 2);
      done->store(1, std::memory_order_relaxed);
    }
  };
  void thread(unsigned me) {
    if (works(me)) {
      return;
    }
    s.submit(task([this] {
               count_run(ran, 0);
               s.submit(task([this] {
                          count_run(ran, 1);
                          delay(done, 64);
                          s.submit(task(grandchild{ran, &done}), this_worker());
                          // relaxed: nothing of the grandchild's is read here
                          while (done.load(std::memory_order_relaxed) == 0) {
                            rl::yield(1, $);
                          }
                        }),
                        this_worker());
             }),
             nullptr);
    wait_idle(3);
    retire_both();
  }
  void after() { drain_and_check(3); }
};

// The next slots' tasks claimed by the host (threadpool::discard_if, when an asio_context
// stops) while the slot's owner takes its task back: the host counts the task, the owner
// takes it back, runs it and counts it done, and the host's claim fails and gives its count
// back, the last one, with no finish() to tell the host. A thread that sleeps until no task is
// pending must be woken all the same (claim_next_slots says when): else it sleeps for ever.
struct discard_next_slots : rl::test_suite<discard_next_slots, 3>, pool_base {
  worker* w = nullptr;
  rm::atomic<int> child_posted{0};
  discard_next_slots() {
    w = &s.add_worker();
    sleepers = true;
  }
  void thread(unsigned me) {
    if (me == 0) {
      work(me, *w);
    } else if (me == 1) {
      s.submit(task([this] {
                 count_run(ran, 0);
                 s.submit(task(record{rm::payload(1), ran}), this_worker());
                 child_posted.store(1, std::memory_order_relaxed);
               }),
               nullptr);
      sleep_until_idle(2);
      retire(*w);
    } else {
      while (child_posted.load(std::memory_order_relaxed) == 0) {
        rl::yield(1, $);
      }
      claim_and_requeue();
    }
  }
  void after() { drain_and_check(2); }
};

// A resize while tasks are queued: worker a runs a task that posts three more to its own
// queue, and is retired meanwhile (it hands what is left of its queue to the lane when it
// leaves); a worker that a third thread adds takes over. Then the poster retires that one too.
struct resize : rl::test_suite<resize, 3>, pool_base {
  worker* a = nullptr;
  rm::atomic<worker*> added{nullptr};
  resize() { a = &s.add_worker(); }
  void thread(unsigned me) {
    if (me == 0) {
      work(me, *a);
    } else if (me == 1) {
      s.submit(task([this] {
                 count_run(ran, 0);
                 for (int k = 1; k <= 3; ++k) {
                   s.submit(task(record{rm::payload(k), ran}), this_worker());
                 }
               }),
               nullptr);
      retire(*a);
      wait_idle(4);
      worker* b = nullptr;
      while ((b = added.load(std::memory_order_acquire)) == nullptr) {
        rl::yield(1, $);
      }
      retire(*b);
    } else {
      host_lock.lock($);
      worker& b = s.add_worker();
      host_lock.unlock($);
      added.store(&b, std::memory_order_release);
      work(me, b);
    }
  }
  void after() { drain_and_check(4); }
};

// The parker with two wakers: one gives a token; the other sets a flag, then gives a second,
// which finds the first still there and wakes nobody. The owner parks until it sees the flag,
// so the second unpark() must happen before the owner's return from the park that took the
// tokens: else the owner sleeps on, with nobody left to wake it (a deadlock).
struct two_wakers : rl::test_suite<two_wakers, 3> {
  rm::parking_lot lot;
  async::detail::parker<rm::atomic> owner;
  rm::atomic<int> flag{0};
  void thread(unsigned me) {
    if (me == 0) {
      while (flag.load(std::memory_order_relaxed) == 0) {
        owner.park(async::detail::no_deadline());
      }
    } else if (me == 1) {
      owner.unpark();
    } else {
      flag.store(1, std::memory_order_relaxed);
      owner.unpark();
    }
  }
};

} // namespace

int main(int argc, char** argv) {
  return rm::run_scenarios(
      argc, argv,
      {
          rm::make_scenario<two_wakers>("parker: two wakers", 20000),
          rm::make_scenario<outside_posts>("pool: outside posts", 20000),
          rm::make_scenario<post_while_parking>("pool: a post while the worker parks", 20000),
          rm::make_scenario<two_posters>("pool: two posters, two parked workers", 20000),
          rm::make_scenario<local_post>("pool: a post to the own queue", 20000),
          rm::make_scenario<steal>("pool: children stolen", 20000),
          rm::make_scenario<slot_refilled>("pool: a next slot claimed and filled again", 20000),
          rm::make_scenario<chain_watched>("pool: a chain's slot, watched", 20000),
          rm::make_scenario<discard_next_slots>("pool: the next slots discarded", 20000),
          rm::make_scenario<resize>("pool: resize with tasks queued", 20000),
      });
}
