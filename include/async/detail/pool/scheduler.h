// SPDX-License-Identifier: BSL-1.0
//
// scheduler: how tasks reach the pool's workers, and what a worker runs next. The public class
// (async::threadpool) keeps the API, the threads and their life cycle; this keeps the queues,
// the workers' loop, stealing, parking and the count of pending tasks. It is written on the
// atomic seam (Atom, with detail::word_lock and detail::parker on it), so that the tests'
// deterministic scheduler can run it with its own atomics.
//
// The doors a task comes in by:
//   - a post from outside the pool goes to a lane of the shared queue: one lane per posting
//     thread (up to pool_fairness::lanes_max lanes, by thread), each a locked ring, so that
//     posters on different threads do not queue on one lock and each thread's posts keep
//     their order;
//   - the first post of a running task goes to its worker's next slot (detail::next_slot): it
//     runs right after that task, on the same core, with no lock and no wake-up;
//   - the task's further posts go to its worker's own queue, which idle workers steal from.
//
// What a worker runs next (the fairness rules, pool_fairness):
//   1. the next slot's task, at most next_in_a_row times in a row; then that successor goes
//      to the back of the worker's own queue and the oldest task there runs instead;
//   2. every shared_every tasks, a fairness look elsewhere first, at three places, each look
//      beginning with the next of them in turn: a task that has waited in another worker's
//      next slot for stale_after(); the queue of a worker that has started no task for
//      stale_after() (a long task, or a thread the system does not run: up to batch_max of its
//      oldest tasks move to this worker's queue); the oldest task of the next lane in turn
//      that holds any (other looks at the lanes start from the worker's own lane), with a
//      share of that lane's tasks moved to its own queue (at most batch_max);
//   3. its own queue, oldest first;
//   4. else it searches (idle_workers): a task that has waited in another worker's next slot
//      for stale_after(), the lanes, the other workers' queues; spinning a little; then parks.
//
// Counting: pending_ counts the tasks posted and not yet finished (wait_idle, the destructor).
// A task in a next slot has no count of its own: it inherits its poster's when the owner takes
// it back after the poster returns; a worker that claims it from the slot counts it first.
// Workers subtract what they finished in batches (finished_max), and before they look beyond
// their own queue, so that an idle pool reaches 0.
#ifndef ASYNC_DETAIL_POOL_SCHEDULER_H
#define ASYNC_DETAIL_POOL_SCHEDULER_H

#include "../config.h"

#include "../backoff.h"
#include "../cache.h"
#include "../deadline.h"
#include "../park.h"
#include "../parker.h"
#include "../perturb.h"
#include "../word_lock.h"
#include "idle_workers.h"
#include "next_slot.h"
#include "ring_deque.h"
#include "task.h"
#include "task_queue.h"
#include "worker_registry.h"

#include <algorithm>
#include <atomic>
#include <cassert>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <new>
#include <thread>
#include <utility>
#include <vector>

namespace async {
namespace detail {

/// The pool's fairness bounds (threadpool's class comment, "Fairness", says what they give).
/// A template only so that C++14's out-of-line definitions below may sit in a header that
/// several units include (for a plain class they would be defined once per unit).
template <typename = void>
struct pool_fairness_bounds {
  /// A worker runs at most this many tasks in a row from its next slot.
  static constexpr unsigned next_in_a_row = 16;
  /// A worker looks at the outside posts before its own queue at least once in this many tasks.
  static constexpr unsigned shared_every = 61;
  /// At most this many outside posts move to a worker's own queue at a time.
  static constexpr std::size_t batch_max = 16;
  /// The most lanes the outside posts are spread over.
  static constexpr std::size_t lanes_max = 16;
};
using pool_fairness = pool_fairness_bounds<>;

#if ASYNC_CPLUSPLUS < 17
// The definitions that a use by reference (odr-use) needs before C++17's inline variables.
template <typename V>
constexpr unsigned pool_fairness_bounds<V>::next_in_a_row;
template <typename V>
constexpr unsigned pool_fairness_bounds<V>::shared_every;
template <typename V>
constexpr std::size_t pool_fairness_bounds<V>::batch_max;
template <typename V>
constexpr std::size_t pool_fairness_bounds<V>::lanes_max;
#endif

/// Host: what the scheduler tells its owner, called with none of the scheduler's locks held:
///   void idle();      no task is pending any more (wait_idle and the destructor wait for it);
///                     a signal only: what the tasks did is ordered before a pending() that
///                     reads 0, not before this call
///   void orphaned();  a task was queued while no worker is active (a paused pool's destructor
///                     runs the queued tasks itself)
/// Clock: wait_clock, or a clock whose now() gives wait_clock::time_point values (the tests'
/// deterministic scheduler makes time a count of calls, so that its runs replay).
/// SearchPauses: the pause rounds of a search before its yields and its park (wait_policy).
/// The weak-memory tests give 0, a search of one look, so that their few steps reach a parked
/// worker: with the default, a searcher outlasts the posts of a small program.
/// Thread-safe, except where a member says that it needs the host's lock (the one that guards
/// the host's list of workers: adding, retiring and releasing workers, and cancelling).
template <typename Host, template <typename> class Atom = std::atomic, typename Clock = wait_clock,
          unsigned SearchPauses = wait_policy::pauses>
class scheduler {
public:
  /// A worker's state. Entries live in a worker_registry and are reused.
  struct worker {
    next_slot<Atom> next;        // the first task that the running task posted
    task_queue<Atom> local;      // its further posts; others steal from here
    detail::parker<Atom> parker; // where it sleeps (idle_workers wakes it)
    Atom<bool> retire{false};    // set by retire(); read between tasks and after waking
    // Progress, for the others' fairness looks: `ticks` now and then (at least every
    // next_in_a_row tasks), written by the owner; what a look saw last, and since when
    // (wait_clock ticks), written by lookers (relaxed, a heuristic, as next_slot's).
    Atom<unsigned> progress{0};
    char apart[cache_line_size]; // lookers write what follows
    Atom<unsigned> progress_seen{0};
    Atom<std::int64_t> progress_seen_since{0};
    // Owner only.
    bool in_task = false;   // a task is running (the only time the next slot is filled)
    bool searching = false; // counted among the searchers (idle_workers)
    unsigned ticks = 0;     // tasks started (for the fairness bounds)
    unsigned fair_look = 0; // `ticks` at its last fairness look (rule 2)
    unsigned fair_turn = 0; // where rule 2's next look begins (0, 1, 2: see fair_look)
    unsigned looks = 0;     // searching looks, for the turns of steal_turn
    // Outside posts that a batch moved to `local` and the owner has not taken yet (an upper
    // bound: thieves may have taken some). While there are any, they are the oldest outside
    // posts this worker knows of: its looks at the lanes wait until it has taken them.
    std::size_t batched = 0;
    std::size_t finished_uncounted = 0; // finished, not yet subtracted from pending_
    std::size_t lane_turn = 0;          // the lane that rule 2's last look at the lanes served
    // The idle list (idle_workers' lock).
    worker* idle_next = nullptr;
    bool listed = false;
    // The registry (the host's lock).
    bool vacant = true;
    std::size_t index = 0;
  };

  /// `lanes`: a power of two.
  explicit scheduler(Host host, std::size_t lanes = default_lanes())
      : host_(host), lane_mask_(lanes - 1), lanes_(new padded<task_queue<Atom>>[lanes]) {
    assert(lanes != 0 && (lanes & (lanes - 1)) == 0);
  }

  scheduler(const scheduler&) = delete;
  scheduler& operator=(const scheduler&) = delete;

  /// One lane per four hardware threads (a power of two, at least 1, at most
  /// pool_fairness::lanes_max). Lanes pay where posters and workers run at the same time on
  /// cores of their own; on a small machine, one lane keeps the outside posts in one order,
  /// which threads that wait for their posts' futures in that order finish soonest (2 cores,
  /// 4 such threads: two lanes ran them at 0.7x-0.9x of one).
  static std::size_t default_lanes() noexcept {
    if (ASYNC_TEST_POOL_LANES != 0) {
      return ASYNC_TEST_POOL_LANES;
    }
    return lanes_for(std::thread::hardware_concurrency());
  }

  /// default_lanes() on a machine of `hardware_threads` threads.
  static std::size_t lanes_for(unsigned hardware_threads) noexcept {
    const std::size_t quarter = hardware_threads / 4;
    std::size_t lanes = 1;
    while (lanes * 2 <= quarter && lanes < pool_fairness::lanes_max) {
      lanes *= 2;
    }
    return lanes;
  }

  // ---- the host's side: workers ----------------------------------------------------------------

  /// The host's lock held: a worker entry for a new thread (reused or new). Throws
  /// std::bad_alloc (nothing changed).
  worker& add_worker() {
    worker& w = workers_.acquire();
    w.retire.store(false, std::memory_order_relaxed);
    w.in_task = false;
    w.searching = false;
    w.ticks = w.fair_look = w.fair_turn = w.looks = 0;
    w.batched = 0;
    w.lane_turn = w.index;
    active_.fetch_add(1, std::memory_order_seq_cst);
    return w;
  }

  /// The host's lock held: `w` leaves after its current task (run() returns), and is woken if
  /// it sleeps.
  void retire(worker& w) {
    // relaxed: the worker reads it between tasks, and after its parker's token (PK1 / PK2).
    // Once only: the destructor's rounds may meet a retiree that a task's configurepool retired
    // meanwhile.
    if (w.retire.exchange(true, std::memory_order_relaxed)) {
      return;
    }
    // seq_cst: before a later post's look (submit, "orphaned").
    active_.fetch_sub(1, std::memory_order_seq_cst);
    w.parker.unpark();
  }

  /// The host's lock held: w's thread has been joined; the entry may be reused.
  void release(worker& w) noexcept { workers_.release(w); }

  /// The host's lock held: how many worker entries there are (retired and vacant included).
  std::size_t workers() const noexcept { return workers_.size(); }

  /// Workers not retired.
  std::size_t active() const noexcept { return active_.load(std::memory_order_relaxed); }

  /// Workers parked for lack of work right now (a racy count).
  std::size_t parked() const noexcept { return idle_.parked(); }

  // ---- a worker's thread ----------------------------------------------------------------------

  /// Runs tasks until the worker is retired.
  void run(worker& self) {
    task t;
    while (next_task(self, t)) {
      run_task(self, t);
    }
  }

  /// After run(): hands the worker's own queue over to the shared queue (its home lane), so
  /// that the others, or the host with no worker left, run those tasks. Waits for memory when
  /// there is none (the tasks stay in the worker's queue meanwhile, where cancelling and
  /// stealing still find them).
  void leave(worker& self) {
    const std::size_t home = self.index & lane_mask_;
    task_queue<Atom>& lane = lanes_[home].value;
    std::size_t handed = 0;
    for (;;) {
      auto lane_lock = lane.lock(); // lanes before workers' queues, as everywhere
      auto own_lock = self.local.lock();
      ring_deque<task>& mine = self.local.tasks(own_lock);
      ring_deque<task>& shared = lane.tasks(lane_lock);
      handed = mine.size();
      if (handed != 0) {
        if (shared.empty()) {
          shared.swap(mine); // no allocation
        } else {
          try {
            shared.reserve(shared.size() + mine.size()); // then the moves cannot throw
          } catch (const std::bad_alloc&) {
            own_lock.unlock();
            lane_lock.unlock();
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
            continue;
          }
          for (std::size_t i = 0; i < mine.size(); ++i) {
            shared.push_back(std::move(mine[i]));
          }
          mine.clear();
        }
        self.local.recount(own_lock);
        lane.recount(lane_lock);
      }
      break;
    }
    self.batched = 0;
    if (handed != 0) {
      idle_.notify();
      orphan_check();
    }
  }

  // ---- submitting -------------------------------------------------------------------------------

  /// Queues t. `self`: the caller's own worker when the caller is one of this scheduler's
  /// workers (else null). Throws std::bad_alloc (nothing queued or counted) when memory runs
  /// out.
  /// The next slot's path is forced inline (a chain's link: the task that posts inlines it),
  /// the queues' path is kept out of line.
  ASYNC_HOT_INLINE void submit(task&& t, worker* self) {
    if (self != nullptr && self->in_task && put_next(*self, t)) {
      return;
    }
    submit_queued(std::move(t), self);
  }

private:
  ASYNC_NOINLINE void submit_queued(task&& t, worker* self) {
    pending_.value.fetch_add(1, std::memory_order_relaxed);
    ASYNC_PERTURB(); // counted, not yet queued
    try {
      if (self != nullptr) {
        self->local.push(std::move(t));
      } else {
        push_shared(std::move(t));
      }
    } catch (...) {
      finish(1); // out of memory: not queued, so not pending either
      throw;
    }
    ASYNC_PERTURB(); // queued, nobody woken yet
    idle_.notify();
    if (self == nullptr) {
      orphan_check();
    }
  }

public:
  // ---- counting ---------------------------------------------------------------------------------

  /// Tasks posted and not yet finished. (SC1) acquire: pairs with finish()'s subtractions
  /// (SC2); what the finished tasks did happens before the caller's return from a wait on 0.
  std::size_t pending() const noexcept { return pending_.value.load(std::memory_order_acquire); }

  /// n tasks less pending (run by the host, or discarded); tells the host when none is left.
  /// (SC2) release: the tasks' ends before a pending() that reads the count or a later one
  /// (every subtraction continues the release sequences of those before it). Not acquire:
  /// idle() only wakes the waiters, which read pending() themselves.
  void finish(std::size_t n) {
    ASYNC_PERTURB(); // finished, not yet counted
    if (pending_.value.fetch_sub(n, std::memory_order_release) == n) {
      host_.idle();
    }
  }

  // ---- the host with no worker ------------------------------------------------------------------

  /// A task from anywhere (the lanes, the workers' queues, a next slot where a task has waited
  /// for stale_after()), for a host that runs tasks itself; it then calls finish(1). Calls
  /// nothing of the host's (the host may hold its lock): a host that waits for pending() to
  /// reach 0 looks at it again after a call that found nothing, before it waits.
  bool take_any(task& t) {
    slot_scan seen;
    return look(nullptr, t, seen, true);
  }

  /// The host's lock held: moves every queued task for which `drop(task)` holds into `dropped`
  /// (cancel_pending: task::cancellable; an asio_context: its own), and keeps the others where
  /// they are, in their order. Tasks in next slots are not queued and stay. Throws
  /// std::bad_alloc, having moved nothing, when memory runs out. The caller destroys what it
  /// got, then calls finish() with its number.
  template <typename Drop>
  void take_if(Drop drop, std::vector<task>& dropped) {
    const std::size_t lanes = lane_mask_ + 1;
    const std::size_t entries = workers_.size();
    std::vector<std::unique_lock<word_lock<Atom>>> locks;
    locks.reserve(lanes + entries);
    // Every queue locked, lanes first, then the workers' queues by registry index: the order
    // every path that holds two of these locks keeps.
    std::size_t total = 0;
    for (std::size_t j = 0; j < lanes; ++j) {
      locks.push_back(lanes_[j].value.lock());
      total += lanes_[j].value.tasks(locks.back()).size();
    }
    for (std::size_t i = 0; i < entries; ++i) {
      locks.push_back(workers_[i].local.lock());
      total += workers_[i].local.tasks(locks.back()).size();
    }
    dropped.reserve(dropped.size() + total); // room first: a bad_alloc leaves every task queued
    for (std::size_t q = 0; q < locks.size(); ++q) {
      task_queue<Atom>& queue = q < lanes ? lanes_[q].value : workers_[q - lanes].local;
      ring_deque<task>& ring = queue.tasks(locks[q]);
      std::size_t kept = 0; // the tasks to keep close up at the front, in their order
      for (std::size_t i = 0; i < ring.size(); ++i) {
        task& t = ring[i];
        if (drop(static_cast<const task&>(t))) {
          dropped.push_back(std::move(t)); // cannot throw: room was made
        } else {
          if (kept != i) {
            ring[kept] = std::move(t);
          }
          ++kept;
        }
      }
      while (ring.size() > kept) {
        ring.pop_back(); // moved from: nothing is left in it
      }
      queue.recount(locks[q]);
    }
  }

  /// The host's lock held: claims the task waiting in every worker's next slot, as an idle
  /// worker claims a stale one, into `claimed` (each counted as pending: the caller finishes
  /// those it destroys, and gives the others back with resubmit()). For a discard that must
  /// find every queued task of one owner, also one that waits behind a busy worker's running
  /// task. Throws std::bad_alloc, having claimed nothing, when memory runs out.
  /// True when a claim lost to the slot's owner gave back the last count (the owner ran and
  /// counted the task meanwhile): pending() reached 0 with nobody told, so the caller tells
  /// its host (idle()) once its lock is released, as finish() would have.
  ASYNC_NODISCARD bool claim_next_slots(std::vector<task>& claimed) {
    const std::size_t entries = workers_.size();
    claimed.reserve(claimed.size() + entries); // then the claims below cannot throw
    bool emptied = false;
    for (std::size_t i = 0; i < entries; ++i) {
      worker& w = workers_[i];
      const std::uint64_t word = w.next.word();
      task t;
      if (next_slot<Atom>::holds_task(word) && claim_next(nullptr, w, word, t, emptied)) {
        claimed.push_back(std::move(t));
      }
    }
    return emptied;
  }

  /// Queues again, as an outside post, a task that claim_next_slots() took and that is not to
  /// be discarded (already counted). Waits for memory when there is none. Call it without the
  /// host's lock (it may tell the host that the task is orphaned).
  void resubmit(task&& t) {
    for (;;) {
      try {
        push_shared(std::move(t)); // throws std::bad_alloc: t untouched
        break;
      } catch (const std::bad_alloc&) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
    }
    idle_.notify();
    orphan_check();
  }

private:
  // What a search saw in the other workers' next slots.
  struct slot_scan {
    bool waiting = false; // a task waits in some slot (not yet long enough to be taken)
    bool changed = false; // some slot changed since the previous look (a chain is running)
  };

  enum class woken { with_task, to_retire, to_search };

  // Every steal_turn-th searching look steals from the workers' queues before it looks at the
  // lanes, so that a steady stream of outside posts starves neither.
  static constexpr unsigned steal_turn = 8;
  // A searcher looks at the next slots on every slot_turn-th round of its spin (and before it
  // parks): a task must wait there stale_after() anyway, and the words it reads are written by
  // running chains all the time.
  static constexpr unsigned slot_turn = 16;
  // A worker subtracts the tasks it finished from pending_ this many at a time (pending_'s
  // line is every poster's).
  static constexpr std::size_t finished_max = 32;
  // How long a task must wait in a next slot before an idle worker takes it, and how often a
  // parked watcher looks at the slots at most (its period doubles from stale_after() while
  // chains keep running, up to this).
  static constexpr std::chrono::microseconds stale_after() { return std::chrono::microseconds(50); }
  static constexpr std::chrono::microseconds watch_period_max() {
    return std::chrono::microseconds(500);
  }

  // The lane of the calling thread: threads take lanes in turn, once, in the order they first
  // post (to any pool).
  std::size_t this_thread_lane() const noexcept {
    static std::atomic<std::size_t> next{0};
    static thread_local const std::size_t lane = next.fetch_add(1, std::memory_order_relaxed);
    return lane & lane_mask_;
  }

  void push_shared(task&& t) {
    const std::size_t j = this_thread_lane();
    task_queue<Atom>& lane = lanes_[j].value;
    auto lock = lane.lock();
    lane.tasks(lock).push_back(std::move(t)); // throws std::bad_alloc: nothing appended
    // seq_cst: the task is visible before the poster's look at the idle workers (IW1).
    lane.recount(lock);
  }

  // After a post that could be the only work: a host with no active worker runs it itself.
  void orphan_check() {
    // seq_cst: after the task's store; pairs with retire() (a host that saw no worker left
    // looks at the queues after that).
    if (active_.load(std::memory_order_seq_cst) == 0) {
      host_.orphaned();
    }
  }

  // ---- the worker's own doors -------------------------------------------------------------------

  // Owner: puts t in the next slot if it is empty (false: a second post, or a thief still
  // moving the previous task out).
  ASYNC_HOT_INLINE bool put_next(worker& self, task& t) {
    std::uint64_t word = 0;
    if (!self.next.vacant(word)) {
      return false;
    }
    // The move runs the callable's move constructor: a post from there must not use the slot
    // that is being filled (it goes to the worker's own queue).
    self.in_task = false;
    self.next.store(std::move(t));
    self.in_task = true;
    // The publication (NS2) comes before our look at the idle workers in the single total
    // order (pairs with (IW2) and unwatch()): either a worker about to park, or to stop
    // watching, sees the task, or we see that nobody searches or watches and wake a sleeper,
    // which then watches.
    self.next.publish(word);
    ASYNC_PERTURB(); // published, nobody woken yet
    idle_.notify_for_slot();
    return true;
  }

  // Owner, after the running task returned: takes the next slot's task back (it inherits the
  // finished task's count). False when the slot is empty or a thief claimed it; then the
  // thief's count of it happens before our count of the poster (NS3 -> NS3o).
  bool take_next(worker& self, task& out) {
    if (!self.next.reclaim()) {
      return false;
    }
    self.in_task = false; // as in put_next: the slot is not ours to fill during the move
    self.next.move_out(out);
    self.in_task = true;
    return true;
  }

  // Rule 2 is due: every shared_every tasks, unless outside posts that a batch moved to our
  // queue wait there (they are older than what the lanes hold). The count is an upper bound:
  // thieves and cancel_pending take tasks from our queue without telling us, so with the queue
  // empty it is stale, and forgotten (a chain never passes through next_task, which forgets it
  // too: while it ran, a stale count kept every look away, for good).
  bool fair_look_due(worker& self) const noexcept {
    if (self.ticks - self.fair_look < pool_fairness::shared_every) {
      return false;
    }
    if (self.batched != 0 && !self.local.maybe_holds_tasks()) {
      self.batched = 0;
    }
    return self.batched == 0;
  }

  // Rule 2: a task from elsewhere, wherever one has waited (see the file comment). Each look
  // begins with the next of its three places in turn, so that none of them can use up every
  // look (a stream of stuck workers' tasks, say, while an outside post waits in a lane).
  bool fair_look(worker& self, task& t) {
    self.fair_look = self.ticks;
    const unsigned first = self.fair_turn;
    self.fair_turn = (first + 1) % 3;
    for (unsigned k = 0; k < 3; ++k) {
      bool found = false;
      switch ((first + k) % 3) {
      case 0: {
        slot_scan seen;
        found = scan_next_slots(&self, t, seen);
        break;
      }
      case 1:
        found = take_from_stuck(self, t);
        break;
      default:
        found = take_shared(&self, t, true);
        break;
      }
      if (found) {
        return true;
      }
    }
    return false;
  }

  // The next task for `self`, by the rules of the file comment; false when it is to retire.
  bool next_task(worker& self, task& t) {
    // relaxed: a retiree that runs one more task is harmless; search() checks again.
    if (!self.retire.load(std::memory_order_relaxed)) {
      // relaxed: a hint for the others' fairness looks (a stale value delays a steal).
      self.progress.store(self.ticks, std::memory_order_relaxed);
      if (fair_look_due(self) && fair_look(self, t)) {
        return true;
      }
      if (self.local.maybe_holds_tasks() && self.local.pop(t)) {
        self.batched -= self.batched != 0 ? 1 : 0;
        return true;
      }
      self.batched = 0;
      // The lanes once before searching (as Go's scheduler looks at its global queue): a
      // worker that keeps finding outside posts there does not count itself in and out of
      // the searchers (two writes to a line every poster reads) for each of them.
      if (take_shared(&self, t)) {
        return true;
      }
    }
    count_finished(self); // before looking elsewhere or retiring
    return search(self, t);
  }

  // Runs t, then each task that it (and each successor) put in the next slot, by rule 1.
  void run_task(worker& self, task& t) {
    ASYNC_PERTURB(); // taken, not yet run
    self.in_task = true;
    unsigned in_a_row = 0; // successors run from the next slot
    for (;;) {
      ++self.ticks;
      t();
      t.reset();       // destroy captures before the task counts as finished
      ASYNC_PERTURB(); // finished, its successor not yet taken back
      if (!take_next(self, t)) {
        break;
      }
      if (self.retire.load(std::memory_order_relaxed)) {
        // Counted (inherited); the retiring hand-off gives it to the others. Without memory
        // to queue it (push_front left it untouched), this thread runs it before leaving.
        self.in_task = false;
        try {
          self.local.push_front(std::move(t));
          return;
        } catch (const std::bad_alloc&) {
          self.in_task = true;
          ASYNC_PERTURB(); // no room for the hand-off: run it here
          continue;
        }
      }
      if (++in_a_row == pool_fairness::next_in_a_row) {
        // Rule 1's budget is spent. When rule 2 is due and its look finds a task elsewhere,
        // that task runs in the successor's place and the successor (with the count it
        // inherited) goes to the back of our own queue; else the oldest task of our queue
        // runs in its place (one hold of the lock). Either way the count that this loop
        // finishes at its end is then the new task's. With nobody waiting, the chain keeps its
        // core (and stays out of reach of thieves).
        in_a_row = 0;
        self.progress.store(self.ticks, std::memory_order_relaxed); // see next_task
        self.in_task = false;
        bool replaced = false;
        task found;
        if (fair_look_due(self) && fair_look(self, found)) {
          try {
            self.local.push(std::move(t)); // throws std::bad_alloc: t untouched
            t = std::move(found);
            replaced = true;
          } catch (const std::bad_alloc&) {
            run_aside(self, found); // without memory for the successor's place
          }
        }
        if (!replaced && self.local.maybe_holds_tasks() && self.local.exchange_oldest(t)) {
          self.batched -= self.batched != 0 ? 1 : 0;
        }
        self.in_task = true;
      }
    }
    self.in_task = false;
    // Counted later, in one subtraction (count_finished): while this worker runs tasks,
    // pending_ cannot reach 0 through them anyway.
    if (++self.finished_uncounted == finished_max) {
      count_finished(self);
    }
  }

  // Runs t, a task of its own count, between two links of a chain: its posts go to the
  // worker's queue (the next slot is the chain's), and it counts as finished.
  void run_aside(worker& self, task& t) {
    ++self.ticks;
    t();
    t.reset();
    ++self.finished_uncounted;
  }

  void count_finished(worker& self) {
    const std::size_t n = self.finished_uncounted;
    if (n != 0) {
      self.finished_uncounted = 0;
      finish(n);
    }
  }

  // ---- searching --------------------------------------------------------------------------------

  // Rule 4: looks everywhere, spinning a little, then parks. True with a task in t; false
  // when the worker is to retire.
  bool search(worker& self, task& t) {
    self.searching = idle_.start_searching(active_.load(std::memory_order_relaxed));
    basic_backoff<Clock> spin(SearchPauses);
    for (unsigned round = 0;; ++round) {
      if (self.retire.load(std::memory_order_relaxed)) {
        stop_searching(self);
        return false;
      }
      slot_scan seen;
      if (look(&self, t, seen, round % slot_turn == 0)) {
        stop_searching(self);
        return true;
      }
      if (self.searching && spin.wait()) {
        continue;
      }
      switch (park(self, t)) {
      case woken::with_task:
        return true;
      case woken::to_retire:
        return false;
      case woken::to_search:
        spin.reset(); // woken for a post: search actively again (more posts tend to follow)
        round = static_cast<unsigned>(-1);
        break;
      }
    }
  }

  void stop_searching(worker& self) {
    if (self.searching) {
      self.searching = false;
      idle_.stop_searching();
    }
  }

  // One look for a task for `self` (nullptr: the host), everywhere but its own queue: the
  // other workers' next slots (with `with_slots`: a task that has waited there goes first, its
  // poster may be blocked on it), the lanes, the other workers' queues.
  bool look(worker* self, task& t, slot_scan& seen, bool with_slots) {
    if (with_slots && scan_next_slots(self, t, seen)) {
      return true;
    }
    const bool steal_first = self != nullptr && ++self->looks % steal_turn == 0;
    if (steal_first && steal(self, t)) {
      return true;
    }
    if (take_shared(self, t)) {
      return true;
    }
    return !steal_first && steal(self, t);
  }

  // The oldest task of the first lane that holds any, from the worker's own lane on (its
  // index: with as many workers as lanes, each lane has a worker of its own, and a lane's
  // posts, which their thread may wait for together, are served together instead of in turns
  // with the others'); rule 2 (`in_turn`) starts after the lane it served last, so that the
  // lanes in use take turns, however many lanes stand empty between them (helper-2: a turn
  // per lane, empty or not, gave a flooded lane after 14 empty ones 15 turns in 16). A worker
  // also moves a share of the lane's tasks to its own queue (take_batch).
  bool take_shared(worker* self, task& t, bool in_turn = false) {
    std::size_t start = 0;
    if (self != nullptr) {
      start = in_turn ? self->lane_turn + 1 : self->index;
    }
    for (std::size_t k = 0; k <= lane_mask_; ++k) {
      const std::size_t j = (start + k) & lane_mask_;
      task_queue<Atom>& lane = lanes_[j].value;
      if (!lane.maybe_holds_tasks()) {
        continue;
      }
      auto lock = lane.lock();
      if (!lane.pop(lock, t)) {
        continue;
      }
      if (self != nullptr) {
        if (in_turn) {
          self->lane_turn = j; // the next look in turn begins after it: lanes in use take turns
        }
        take_batch(*self, lane, lock);
      }
      return true;
    }
    return false;
  }

  // The lane's lock held, a task just taken: moves this worker's share of the lane's tasks
  // (what is left divided by the active workers, at most batch_max) to its own queue, where
  // it takes them without the lane's lock. Only from a lane deeper than two batches, and only
  // while every other worker is busy (none searches or sleeps): an idle worker takes from the
  // lane itself, and a batch would only keep the oldest tasks from it (and from the posters
  // waiting for them) while this worker runs them one by one. They keep their order. If
  // memory runs out, they stay in the lane.
  void take_batch(worker& self, task_queue<Atom>& lane,
                  const std::unique_lock<word_lock<Atom>>& lane_lock) {
    ring_deque<task>& shared = lane.tasks(lane_lock);
    if (shared.size() < 2 * pool_fairness::batch_max || !idle_.all_busy(self.searching)) {
      return;
    }
    const std::size_t active = (std::max)(std::size_t(1), active_.load(std::memory_order_relaxed));
    const std::size_t n = (std::min)(shared.size() / active, pool_fairness::batch_max);
    if (n == 0) {
      return;
    }
    auto own_lock = self.local.lock();
    ring_deque<task>& mine = self.local.tasks(own_lock);
    try {
      mine.reserve(mine.size() + n); // then the moves below cannot throw
    } catch (...) {
      return; // out of memory: the tasks stay in the lane
    }
    for (std::size_t k = 0; k < n; ++k) {
      mine.push_back(std::move(shared[k]));
    }
    shared.drop_front(n);
    self.local.recount(own_lock);
    lane.recount(lane_lock);
    self.batched += n;
    ASYNC_PERTURB(); // moved to the worker's queue, the lane's lock held
  }

  // The oldest task of another worker's queue (retiring workers' included: one may be busy
  // with a long task).
  bool steal(const worker* self, task& t) {
    const std::size_t n = workers_.size();
    // Start after ourselves, so that thieves spread over their victims.
    const std::size_t start = self != nullptr ? self->index + 1 : 0;
    for (std::size_t k = 0; k < n; ++k) {
      worker& w = workers_[(start + k) % n];
      // The count first: a look over idle workers' queues writes none of their lines.
      if (&w != self && w.local.maybe_holds_tasks() && w.local.pop(t)) {
        return true;
      }
    }
    return false;
  }

  // Rule 2: the oldest tasks of another worker's queue, if that worker has started no task for
  // stale_after() (it runs a long task, waits, or its thread is not scheduled): its queue
  // would wait for it, while we keep taking newer tasks. Up to batch_max of them move to our
  // queue (its oldest first), and t is the first.
  bool take_from_stuck(worker& self, task& t) {
    wait_clock::time_point now{}; // read only when some queue holds tasks
    const std::size_t n = workers_.size();
    for (std::size_t k = 1; k < n; ++k) {
      worker& w = workers_[(self.index + k) % n];
      if (!w.local.maybe_holds_tasks()) {
        continue;
      }
      if (now == wait_clock::time_point{}) {
        now = Clock::now();
      }
      // relaxed: hints (see worker).
      const unsigned p = w.progress.load(std::memory_order_relaxed);
      if (p != w.progress_seen.load(std::memory_order_relaxed)) {
        w.progress_seen.store(p, std::memory_order_relaxed);
        w.progress_seen_since.store(now.time_since_epoch().count(), std::memory_order_relaxed);
        continue;
      }
      const wait_clock::time_point since(
          wait_clock::duration(w.progress_seen_since.load(std::memory_order_relaxed)));
      if (now - since >= stale_after() && steal_many(self, w, t)) {
        return true;
      }
    }
    return false;
  }

  // Takes up to batch_max of victim's oldest tasks: the first in t, the rest to the back of
  // our own queue, in their order. Both queues are locked at once (in registry order, as
  // take_if locks them), so that the tasks are never out of every queue: a
  // cancel_pending() meanwhile finds them (helper-2: with a hand-over through an array, queued
  // tasks escaped it). If our queue cannot grow, one task only.
  bool steal_many(worker& self, worker& victim, task& t) {
    worker& first = self.index < victim.index ? self : victim;
    worker& second = self.index < victim.index ? victim : self;
    auto first_lock = first.local.lock();
    auto second_lock = second.local.lock();
    const auto& own_lock = &first == &self ? first_lock : second_lock;
    const auto& victim_lock = &first == &self ? second_lock : first_lock;
    ring_deque<task>& theirs = victim.local.tasks(victim_lock);
    ring_deque<task>& mine = self.local.tasks(own_lock);
    if (theirs.empty()) {
      return false;
    }
    std::size_t n = (std::min)(theirs.size(), pool_fairness::batch_max);
    try {
      mine.reserve(mine.size() + n - 1); // then the moves below cannot throw
    } catch (const std::bad_alloc&) {
      n = 1;
    }
    t = std::move(theirs.front());
    for (std::size_t k = 1; k < n; ++k) {
      mine.push_back(std::move(theirs[k]));
    }
    theirs.drop_front(n);
    victim.local.recount(victim_lock);
    self.local.recount(own_lock);
    ASYNC_PERTURB(); // moved, both queues locked
    return true;
  }

  // Looks at every other worker's next slot, takes a task that has waited there for
  // stale_after(), and reports what it saw.
  bool scan_next_slots(const worker* self, task& out, slot_scan& seen) {
    // Read once, and only when a slot is in use (the clock costs more than the whole look).
    wait_clock::time_point now{};
    const std::size_t n = workers_.size();
    for (std::size_t i = 0; i < n; ++i) {
      worker& w = workers_[i];
      if (&w == self) {
        continue;
      }
      const std::uint64_t word = w.next.word();
      if (word == w.next.last_seen() && !next_slot<Atom>::holds_task(word)) {
        continue; // empty, as at the last look
      }
      if (now == wait_clock::time_point{}) {
        now = Clock::now();
      }
      if (word != w.next.last_seen()) {
        w.next.note(word, now);
        seen.changed = true;
      }
      if (!next_slot<Atom>::holds_task(word)) {
        continue;
      }
      bool emptied = false; // take_any's caller looks at the count again (see claim_next)
      if (now - w.next.seen_since() >= stale_after() && claim_next(self, w, word, out, emptied)) {
        return true;
      }
      seen.waiting = true;
    }
    return false;
  }

  // Takes the task that `word` says is in victim's next slot, for `self` (nullptr: the host;
  // then `emptied` is set when a lost claim gave back the last count).
  bool claim_next(const worker* self, worker& victim, std::uint64_t word, task& out,
                  bool& emptied) {
    // relaxed: ordered before the owner's count of the poster by (NS3) -> (NS3o).
    pending_.value.fetch_add(1, std::memory_order_relaxed);
    ASYNC_PERTURB(); // counted, not yet claimed
    if (victim.next.claim(word, out)) {
      return true;
    }
    // The owner took it back first, and may have run and counted it meanwhile: this may be
    // the last count (helper-2). A worker tells the host; the host itself (its lock held) is
    // told nothing: take_any's caller looks at the count again before it waits, and
    // claim_next_slots' caller tells its waiters once its lock is released (`emptied`).
    if (self != nullptr) {
      finish(1);
    } else {
      // relaxed: the host takes back a count of its own, for a task it did not run; a
      // read-modify-write, so the finishes before it still release to a pending() after it.
      emptied |= pending_.value.fetch_sub(1, std::memory_order_relaxed) == 1;
    }
    return false;
  }

  // ---- parking ----------------------------------------------------------------------------------

  // Nothing found: sleeps until a post wakes us (idle_workers). While a task waits in some next
  // slot, one parked worker, the watcher, also wakes up now and then to look at the slots.
  woken park(worker& self, task& t) {
    const std::uint32_t searchers_left = idle_.register_parked(self, self.searching);
    self.searching = false;
    ASYNC_PERTURB();                       // registered, not yet looked again
    bool look_again = searchers_left == 0; // else a searcher left will look after us
    bool watcher = false;
    std::chrono::microseconds period = stale_after();
    for (;;) {
      if (look_again) {
        // relaxed: a retiree that missed it here reads it again after its token (below).
        if (self.retire.load(std::memory_order_relaxed)) {
          // Retired between its search and this look, which it does not make: a worker that
          // parked meanwhile counted on it (the last searcher) to look, so a sleeper is woken
          // to look in its place (without: a child left in a next slot with every worker asleep
          // and none watching, in 1 run in 20 of the torture test of a pool that resizes).
          stop_parking(self, watcher, true);
          return woken::to_retire;
        }
        slot_scan seen;
        if (look(&self, t, seen, true)) {
          stop_parking(self, watcher, true);
          return woken::with_task;
        }
        // A slot that holds a task, or that changed since the last look (a chain runs there,
        // and will fill it again), is watched: a worker that fills a slot nobody watches
        // wakes a sleeper, which a chain would do link after link.
        if (!watcher && (seen.waiting || seen.changed) && idle_.try_watch()) {
          watcher = true;
        } else if (watcher && !seen.waiting && !seen.changed) {
          idle_.unwatch(); // then look once more (pairs with notify_for_slot)
          watcher = false;
          period = stale_after();
          continue;
        }
      }
      const wait_clock::time_point deadline = watcher ? Clock::now() + period : no_deadline();
      ASYNC_PERTURB(); // about to sleep
      const bool token = self.parker.park(deadline);
      if (self.retire.load(std::memory_order_relaxed)) {
        stop_parking(self, watcher, false);
        return woken::to_retire;
      }
      if (!idle_.listed(self)) {
        // A notify() took us off the list for a post: we count as a searcher. A watch we held
        // needs no hand-over: whoever parks last looks at the slots again.
        self.searching = true;
        if (watcher) {
          idle_.unwatch();
        }
        return woken::to_search;
      }
      if (!token) {
        period = (std::min)(period * 2, watch_period_max()); // a timed look found nothing new
      }
      look_again = true; // a timed look, or a token left from an earlier wake-up
    }
  }

  // Leaving park() with a task or to retire: off the list, or, if a notify() took us off
  // first, out of the searchers it counted us in. With `hand_over` (a task found by the look
  // that the last searcher makes before it sleeps, or that look skipped by a retiree) somebody
  // else must take over the search, as from a searcher that found a task: a poster may have
  // counted on us for another task, and a task may wait in a next slot that nobody watches.
  // A watch we held is given up, and a sleeper is woken to take it up if nobody searches.
  void stop_parking(worker& self, bool watcher, bool hand_over) {
    if (!idle_.unregister(self)) {
      self.searching = true;
      stop_searching(self);
    } else if (hand_over) {
      idle_.notify();
    }
    if (watcher) {
      idle_.unwatch();
      idle_.notify();
    }
  }

  // ---- data -------------------------------------------------------------------------------------
  Host host_;
  const std::size_t lane_mask_; // lanes - 1 (a power of two minus one)
  // The shared queue's lanes, each on lines of its own: written by their posters and takers.
  std::unique_ptr<padded<task_queue<Atom>>[]> lanes_;
  worker_registry<worker, Atom> workers_;
  idle_workers<worker, Atom> idle_;
  Atom<std::size_t> active_{0}; // written under the host's lock, read by posters and searchers
  padded<Atom<std::size_t>> pending_; // posted, not finished: every poster's line
};

} // namespace detail
} // namespace async

#endif // ASYNC_DETAIL_POOL_SCHEDULER_H
