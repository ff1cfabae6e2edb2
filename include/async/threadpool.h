// SPDX-License-Identifier: BSL-1.0
#ifndef ASYNC_THREADPOOL_H
#define ASYNC_THREADPOOL_H

#include "detail/config.h"

#include "detail/cache.h"
#include "detail/idle_workers.h"
#include "detail/local_queue.h"
#include "detail/next_slot.h"
#include "detail/perturb.h"
#include "detail/ring_deque.h"
#include "detail/slot.h"
#include "detail/task.h"
#include "detail/wait.h"
// The pool does not use it; the original library's threadpool.h included it, and programs
// written for that one use async::queue with only this header included.
#include "queue.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <new>
#include <stdexcept>
#include <thread>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

namespace async {
namespace detail {

/// The pool's fairness bounds (see threadpool's class comment, "Fairness").
struct pool_fairness {
  /// A worker runs at most this many tasks in a row from its next slot.
  static constexpr unsigned next_in_a_row = 16;
  /// A worker looks at the outside posts before its own queue at least once in this many tasks.
  static constexpr unsigned shared_every = 61;
  /// At most this many outside posts move to a worker's own queue at a time.
  static constexpr std::size_t batch_max = 16;
  /// The most lanes the outside posts are spread over.
  static constexpr std::size_t lanes_max = 16;
};

} // namespace detail

/// A pool of worker threads that runs any callable.
///
/// post(f, args...) behaves like std::async(std::launch::async, f, args...) without a thread per
/// call: the arguments are decay-copied (or moved) into the task, the call is INVOKE(f, args...)
/// on those copies, and the returned std::future<R> (R as std::async would give) delivers the
/// result or the exception. execute(f) is the cheap fire-and-forget path without a future.
///
/// Scheduling: posts from outside the pool go to a shared injection queue. The first task a task
/// posts goes to its worker's "next" slot: it runs right after the current task on the same
/// thread, with no lock, no shared counter and no wake-up, so a chain of tasks stays on its
/// core. Further posts go to the worker's local queue (first in, first out, for its owner and
/// for idle workers, which steal from it), and wake a parked worker. The next slot is not private:
/// a task that has waited there for 50 us (its poster is still busy, or blocked on that task's
/// future) is taken by an idle worker. While tasks wait in next slots, one parked worker, the
/// watcher, looks at the slots every 50 us, less often (up to every 500 us) while chains keep
/// running; so when a worker is free, a waiting task starts a few tenths of a millisecond after it
/// was posted, about a millisecond after a long chain (two watch periods, plus the kernel's timer
/// slack). An idle worker takes such a task before any queued one, and every eighth time it steals
/// from the local queues before taking an outside post, so a stream of outside posts starves
/// neither. A worker with nothing to do spins and yields briefly (tens of microseconds), then parks
/// on a condition variable: an idle pool uses no CPU. A post wakes one parked worker, and only if
/// one is parked.
///
/// Fairness: no task waits for ever behind others, whatever door it came in by, also while
/// tasks re-post themselves without end (the yield or polling pattern). A worker runs at most
/// 16 tasks in a row from its next slot (the 17th goes to the back of its local queue); it takes
/// from its local queue the oldest task first; and at least once every 61 tasks it runs, it
/// takes the oldest outside post, if any, before its own queue (unless outside posts that it
/// took earlier, in a batch, still wait there: it takes those, which are older). So while every
/// worker keeps running chains, an outside post at the front of the shared queue starts before any
/// worker has run 77 more tasks (61 + 16); one behind k others, before (k + 1) x 77; a task in a
/// worker's local queue behind k others, before that worker has run (k + 1) x 17 more.
/// (detail::pool_fairness holds the numbers.)
///
/// Waiting inside a task: a task may wait for the future of a task it posted (post(f).get()):
/// the wait ends as soon as another worker is free to run the child. So W workers allow W - 1
/// tasks to wait like this at once (nested or side by side); with one worker (or W waiting
/// tasks) the wait never ends, as in any pool of fixed size.
///
/// Resizing: configurepool(n) at any time, from any thread (a task included). Growing starts
/// threads at once; shrinking retires workers after their current task; running tasks are never
/// interrupted; every thread is joined, never detached. Size 0 pauses the pool: posts queue up
/// and run once it grows.
///
/// Destruction waits until no task is pending: it runs every task already posted, and every
/// task those tasks post, so no future ever sees broken_promise (a chain whose tasks keep
/// posting successors for ever keeps the destructor waiting for ever: end it with a flag its
/// tasks read). Then it joins every thread, runs what their thread_local destructors posted,
/// and goes on so until no task is pending and no thread is left (a task may grow the pool
/// again meanwhile; those threads are joined too). With size 0 the destructor runs the queued
/// tasks itself, as tasks of the pool, one at a time (so such a task must not wait for another
/// one: the destructor's thread is the only one to run it), and the tasks that retiring
/// workers' tasks (still running) post or wait for. The exception handler serves every task
/// that runs until then, those that thread_local destructors post included; then it is
/// destroyed while the pool can still run tasks (one worker is started for it): its captures'
/// destructors may post and wait for what they post, which runs with the default handler
/// (only if no thread can start does it run after they return).
/// During destruction, tasks may post, resize and cancel_pending();
/// other threads must not use the pool any more. Destroying the pool from one of its own tasks
/// (or threads) would wait for itself: it is detected and ends the program (a message on
/// stderr, then std::terminate).
///
/// Failures: when a thread cannot start, the constructor throws std::system_error having joined
/// the threads it started, and configurepool throws it with size() counting the workers that
/// did start. When memory runs out, post and execute throw std::bad_alloc with nothing queued
/// or counted, and cancel_pending throws it having cancelled nothing (if memory runs out
/// before it takes the tasks; see there).
///
/// Memory: two heap blocks per post for the future (with libstdc++: the packaged task's shared
/// state, and the result object it makes ready); the task itself lives in an
/// inline buffer of detail::task::inline_size bytes, unless the callable and its arguments are
/// larger, or destroying a moved-from copy of them could run code of the user's: then one more
/// allocation. That is the case for a lambda with any capture that has a destructor of its own
/// (a std::string or a std::shared_ptr included: nothing can look inside a closure), while
/// post's arguments of those standard types (strings, vectors, smart pointers, promises) stay
/// inline. Per worker: a thread, a ring of tasks and a mutex.
///
/// Requirements on callables: move-constructible (they are moved into the pool, and between
/// its queues, sometimes under its locks: a move constructor must not use the pool). Their
/// destructors may use the pool, those of moved-from copies included: a callable whose
/// moved-from destructor could run user code is kept on the heap and never moved.
///
/// When not to use: for tasks that block for long periods (I/O), size the pool for the blocking,
/// or use threads of their own; the pool does not grow by itself.
///
/// Example:
///   async::threadpool pool(4);
///   auto f = pool.post([](int a, int b) { return a + b; }, 2, 3);
///   int five = f.get();
///   pool.configurepool(8);
class threadpool {
public:
  using exception_handler = std::function<void(std::exception_ptr)>;

  /// Starts `n` workers (default: the hardware thread count, at least 1). 0 makes a paused
  /// pool. Throws std::invalid_argument when n < 0. Not explicit, as in the original library
  /// (an aggregate holding a pool can be initialized with `{}`). Not thread-safe (construction).
  threadpool(int n = default_size()) {
    if (n < 0) {
      throw std::invalid_argument("async::threadpool: the number of threads must be >= 0");
    }
    try {
      configurepool(static_cast<std::size_t>(n));
    } catch (...) {
      shut_down(); // a thread could not start: the ones that did are joined
      throw;
    }
  }

  threadpool(const threadpool&) = delete;
  threadpool& operator=(const threadpool&) = delete;
  threadpool(threadpool&&) = delete;
  threadpool& operator=(threadpool&&) = delete;

  /// Runs every task already posted (and what they post) until none is pending, then joins every
  /// thread (see the class comment). From a task of this pool: a message, then std::terminate.
  /// Not thread-safe (destruction).
  ~threadpool() {
    if (runs_a_task_of_this() || worker_of() == this) {
      // It would wait for the very task (or thread) that runs it, for ever.
      std::fputs("async::threadpool: destroyed from one of its own tasks or threads; a pool "
                 "cannot wait for the task that destroys it (std::terminate)\n",
                 stderr);
      std::terminate();
    }
    shut_down(); // what workers' thread_local destructors post runs with the handler too
    // Then the handler goes, while the pool can still run tasks: its captures' destructors may
    // post, wait for what they post (one worker is started for them) and resize; what they
    // post runs with the default handler. Then the pool runs what is left and joins.
    std::shared_ptr<exception_handler> handler;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      handler.swap(handler_);
    }
    if (handler) {
      try {
        configurepool(1);
      } catch (...) {
        // No thread: what the captures post runs after they are gone (see the class comment).
      }
      handler.reset();
    }
    shut_down();
  }

  // ---- submitting ---------------------------------------------------------------------------

  /// Runs f(args...) on a worker and returns a future for its result, exactly like
  /// std::async(std::launch::async, f, args...): f and args are decay-copied or moved into the
  /// task (std::ref passes a reference), member pointers take the object as first argument
  /// (object, pointer, reference_wrapper or smart pointer), an exception reaches future::get(),
  /// and the task's copies of f and args, and every temporary of the call, are destroyed before
  /// the future becomes ready. One difference remains: the shared state, which holds the
  /// result (or the exception), is released by the last of the future and the worker, as with
  /// std::promise, where std::async's future always releases it itself; so a result whose
  /// destructor uses memory that the caller frees right after dropping the future should be
  /// moved out and destroyed first. Throws std::bad_alloc (nothing posted) when memory runs
  /// out. Thread-safe.
  template <typename F, typename... Args,
            typename R = detail::invoke_result_t<typename std::decay<F>::type,
                                                 typename std::decay<Args>::type...>>
  std::future<R> post(F&& f, Args&&... args) {
    using call =
        detail::promised_call<R, typename std::decay<F>::type, typename std::decay<Args>::type...>;
    call c(std::forward<F>(f), std::forward<Args>(args)...);
    std::future<R> future = c.get_future();
    detail::task t(std::move(c));
    try {
      submit(std::move(t));
    } catch (...) {
      // Out of memory: the future goes first, so that the promise dies with the only reference
      // to its state. Breaking a promise whose future is alive allocates (the future_error), in
      // a destructor, where a failed allocation ends the program.
      future = std::future<R>();
      throw;
    }
    return future;
  }

  /// What a post() resolves to when f can be called with the arguments as they are passed but
  /// not with decay-copies of them, as the original library allowed (it bound arguments with
  /// std::bind, so a parameter `int&` took an lvalue argument by reference): a compile error
  /// that says why (see MIGRATION.md). Any other call that f cannot take finds no post().
  template <
      typename F, typename... Args,
      typename std::enable_if<!detail::is_invocable<typename std::decay<F>::type,
                                                    typename std::decay<Args>::type...>::value &&
                                  detail::is_invocable<F&&, Args&&...>::value,
                              int>::type = 0>
  auto post(F&&, Args&&...) {
    static_assert(detail::dependent_false<F, Args...>::value,
                  "async::threadpool::post: f cannot be called with decay-copies of these "
                  "arguments. post() takes arguments like std::async: pass std::ref(x) or "
                  "std::cref(x) for a reference parameter (see MIGRATION.md).");
  }

  /// Runs f() on a worker, without a future. An exception escaping f goes to the handler set
  /// with set_exception_handler (default: std::terminate). Throws std::bad_alloc (nothing
  /// queued) when memory runs out. Thread-safe.
  template <typename F>
  void execute(F&& f) {
    submit(detail::task(guarded_call<typename std::decay<F>::type>{std::forward<F>(f), this}));
  }

  /// Sets what receives an exception escaping a task given to execute(). The handler runs on the
  /// worker thread. An empty handler restores the default, std::terminate. A handler that
  /// throws ends the program through std::terminate (its exception has nowhere left to go).
  /// Thread-safe.
  void set_exception_handler(exception_handler handler) {
    auto other = std::make_shared<exception_handler>(std::move(handler));
    {
      std::lock_guard<std::mutex> lock(mutex_);
      handler_.swap(other);
    }
    // `other` holds the old handler: it is destroyed here, outside the lock (the destructors of
    // its captures may use the pool).
  }

  // ---- resizing -----------------------------------------------------------------------------

  /// Sets the number of workers to n. Growing starts threads before returning; shrinking marks
  /// workers to retire after their current task and never waits for a running task: it joins
  /// only retirees whose threads have finished (thread_local destructors included); the others
  /// are joined by a later configurepool or by the destructor. (So no thread ever joins a
  /// thread that could be joining it, and a worker never joins itself; every thread is joined,
  /// none detached.) May be called from any thread, tasks of this pool and workers' thread_local
  /// destructors included, and concurrently. Throws std::system_error when a thread cannot
  /// start; size() then counts the workers that did. Thread-safe (takes the pool's lock
  /// briefly).
  void configurepool(std::size_t n) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      // Also when a thread cannot start (the exception propagates): size() counts the workers
      // there are, and a waiting destructor learns that there is none.
      const auto counted = detail::at_scope_exit([this] {
        size_.store(active_.size(), std::memory_order_relaxed);
        idle_.notify_all(); // parked retirees wake up and leave
        if (active_.empty()) {
          idle_cv_.notify_all(); // a waiting destructor now runs what is queued itself
        }
      });
      while (active_.size() < n) {
        std::unique_ptr<worker> w(new worker);
        worker* raw = w.get();
        active_.reserve(active_.size() + 1); // so that push_back cannot throw after the start
        // Started before it joins the active set: if std::thread throws, nothing is left behind.
        // (The new thread waits for mutex_, held here, before it looks at the pool.)
        ASYNC_FAULT_THREAD_START();
        raw->thread = std::thread([this, raw] { work(*raw); });
        active_.push_back(std::move(w));
      }
      if (active_.size() > n) {
        // Room first: a retiree that could not be listed would leave without being counted.
        retiring_.reserve(retiring_.size() + (active_.size() - n));
      }
      while (active_.size() > n) {
        active_.back()->retire.store(true, std::memory_order_relaxed);
        retiring_.push_back(std::move(active_.back()));
        active_.pop_back();
      }
    }
    ASYNC_PERTURB(); // resized, retirees not yet joined
    join_retired();
  }

  /// Whether the calling thread runs a task of this pool right now (a worker inside one of the
  /// pool's tasks, or a thread running the pool's tasks in its destructor). Asio's dispatch()
  /// runs a function at once exactly then (see async/asio.h). Thread-safe.
  bool running_in_this_thread() const noexcept { return runs_a_task_of_this(); }

  /// The number of workers (after the last configurepool). Thread-safe.
  std::size_t size() const noexcept { return size_.load(std::memory_order_relaxed); }

  /// The number of workers parked for lack of work right now (an int, as in the original
  /// library). Thread-safe.
  int idlesize() const noexcept { return static_cast<int>(idle_.parked()); }

  /// Blocks until every task posted so far (and every task they post) has finished. Calling it
  /// from a task of this pool would wait for itself: it throws std::logic_error instead.
  /// Thread-safe (blocks).
  void wait_idle() { wait_idle_until_deadline(detail::no_deadline()); }

  /// Like wait_idle(), for at most `timeout`: true when the pool became idle in time, false on
  /// timeout. Any duration works: duration::max() (of any unit) waits for as long as it takes,
  /// without overflowing; zero or negative only looks. Throws std::logic_error from a task of
  /// this pool. Thread-safe (blocks).
  template <typename Rep, typename Period>
  bool wait_idle_for(const std::chrono::duration<Rep, Period>& timeout) {
    return wait_idle_until_deadline(detail::deadline_after(timeout));
  }

  /// Like wait_idle_for, until the time point `until` of any clock.
  template <typename Clock, typename Duration>
  bool wait_idle_until(const std::chrono::time_point<Clock, Duration>& until) {
    return wait_idle_until_deadline(detail::deadline_at(until));
  }

  /// Discards the tasks queued at this moment, without running them, and returns how many:
  /// the future of each discarded post() reports std::future_error (broken_promise), each
  /// discarded execute() task is destroyed. Running tasks are never touched, and neither is the
  /// one task that each running task may have waiting in its worker's "next" slot (its first
  /// post, which runs right after it on the same thread), nor the functions that an
  /// asio_context (async/asio.h) queued: Asio expects each of them to run (a strand would stay
  /// locked for good). Throws std::bad_alloc, having cancelled nothing, when memory runs out
  /// before the tasks are taken. After that, each discarded post() breaks its promise, and
  /// the standard library allocates that future_error (its message) inside the promise's
  /// destructor, where a failed allocation ends the program (std::terminate), as it does for
  /// any std::packaged_task destroyed unrun. Thread-safe.
  std::size_t cancel_pending() {
    std::vector<detail::task> dropped;
    {
      // All queues at once, room first: if memory runs out (std::bad_alloc propagates), every
      // task is still where it was. (Nobody else holds two worker locks, so taking them all in
      // one order cannot deadlock.)
      std::lock_guard<std::mutex> lock(mutex_);
      std::vector<detail::local_queue*> locals;
      std::vector<std::unique_lock<std::mutex>> locks;
      std::vector<detail::ring_deque<detail::task>*> queues{&injection_};
      locals.reserve(active_.size() + retiring_.size());
      locks.reserve(active_.size() + retiring_.size());
      queues.reserve(1 + active_.size() + retiring_.size());
      for (auto* workers : {&active_, &retiring_}) {
        for (auto& w : *workers) {
          locals.push_back(&w->local);
        }
      }
      // In address order: one order for every caller, whatever the resizes did to the lists
      // (ThreadSanitizer checks the order; under mutex_ it could not deadlock anyway).
      std::sort(locals.begin(), locals.end(), std::less<detail::local_queue*>());
      std::size_t total = injection_.size();
      for (detail::local_queue* local : locals) {
        locks.push_back(local->lock());
        queues.push_back(&local->tasks(locks.back()));
        total += queues.back()->size();
      }
      dropped.reserve(total);
      const std::size_t injected = injection_.size();
      for (auto* queue : queues) {
        // The tasks to keep (keep_on_cancel) close up at the front, in their order.
        std::size_t kept = 0;
        for (std::size_t i = 0; i < queue->size(); ++i) {
          detail::task& t = (*queue)[i];
          if (ASYNC_LIKELY(t.cancellable())) {
            dropped.push_back(std::move(t)); // cannot throw: room was made
          } else {
            if (kept != i) {
              (*queue)[kept] = std::move(t);
            }
            ++kept;
          }
        }
        while (queue->size() > kept) {
          queue->pop_back(); // moved from: nothing is left in it
        }
      }
      queued_.fetch_sub(injected - injection_.size(), std::memory_order_relaxed);
      for (std::size_t i = 0; i < locals.size(); ++i) {
        locals[i]->recount(locks[i]);
      }
    }
    // Destroyed outside the locks (their captures' destructors may use the pool), and counted
    // as finished only then, as run() does.
    const std::size_t n = dropped.size();
    dropped.clear();
    if (n != 0 && pending_.fetch_sub(n, std::memory_order_acq_rel) == n) {
      std::lock_guard<std::mutex> lock(mutex_);
      idle_cv_.notify_all();
    }
    return n;
  }

  /// The default size: the hardware thread count, at least 1.
  static int default_size() noexcept {
    const unsigned n = std::thread::hardware_concurrency();
    return n == 0 ? 1 : static_cast<int>(n);
  }

  /// default_size() under the original library's name.
  static int defaultpoolsize() noexcept { return default_size(); }

private:
  template <typename F>
  struct guarded_call {
    using async_keep_on_cancel = detail::keep_on_cancel<F>; // as f says (asio.h's functions)
    F f;
    threadpool* pool;
    void operator()() {
      try {
        f();
      } catch (...) {
        pool->handle(std::current_exception());
      }
    }
  };

  // The next slot of a worker (detail::next_slot) holds the first task that its running task
  // posts. Counting: a task in a next slot has no place of its own in pending_; it inherits its
  // poster's when the owner takes it back after the poster returns. A worker that claims it
  // earlier counts it first (the poster may be about to finish and stop counting for it).
  struct worker {
    detail::next_slot next;   // the first task that the running task posted
    bool in_task = false;     // owner only: a task is running (the only time the slot is filled)
    unsigned looks = 0;       // owner only: find_work calls, for the turns of steal_turn
    unsigned ticks = 0;       // owner only: tasks run (their starts), for the fairness bounds
    unsigned shared_look = 0; // owner only: `ticks` when it last looked at the outside posts
    // Owner only: outside posts that take_batch moved to `local` and the owner has not taken
    // yet (an upper bound: idle workers may have stolen some). While there are any, they are
    // the oldest outside posts this worker knows of, and its looks take them first.
    std::size_t batched = 0;
    // Owner only: tasks this worker finished and has not yet subtracted from pending_ (it
    // does so before it looks beyond its own queue, and every finished_max tasks).
    std::size_t finished_uncounted = 0;
    std::thread thread;
    detail::local_queue local;       // further tasks posted by this worker's tasks
    std::atomic<bool> retire{false}; // set under the pool's mutex_, polled between tasks
    // Set by the thread's exit_marker, under the pool's mutex_, after its thread_local
    // destructors: from then on joining it waits for nothing but the thread's exit.
    bool finished = false;
  };

  // What an idle worker saw in the other workers' next slots.
  struct slot_scan {
    bool waiting = false; // a task waits in some slot (not yet long enough to be taken)
    bool changed = false; // some slot changed since the previous look (a chain is running)
    bool claimed = false; // the task found came from a slot: the look stopped there
  };

  // How long a task must wait in a next slot before an idle worker takes it, and how often a
  // parked watcher looks at the slots at most (its period doubles from stale_after() while
  // chains keep running, up to this).
  static constexpr unsigned steal_turn = 8;
  // At most this many outside posts move to a worker's local queue at a time (take_batch).
  static constexpr std::size_t batch_max = 16;
  // A worker running tasks from its own queue subtracts them from pending_ this many at a time.
  static constexpr std::size_t finished_max = 32;
  static constexpr std::chrono::microseconds stale_after() { return std::chrono::microseconds(50); }
  static constexpr std::chrono::microseconds watch_period_max() {
    return std::chrono::microseconds(500);
  }

  ASYNC_PROCESS_WIDE static threadpool*& current_pool() noexcept {
    static thread_local threadpool* pool = nullptr;
    return pool;
  }
  // The pool whose worker the calling thread is, from its start to its very end (also while its
  // thread_local destructors run, after current_pool() is cleared); nullptr elsewhere.
  ASYNC_PROCESS_WIDE static threadpool*& worker_of() noexcept {
    static thread_local threadpool* pool = nullptr;
    return pool;
  }

  // The first thread_local object of a worker's thread to be constructed, so the last to be
  // destroyed: once it goes, the thread's other thread_local destructors (user code, which may
  // post, resize, or block) have run, and joining the thread waits for its exit only. That is
  // when the worker counts as finished, and configurepool may join it: a thread that joins
  // only finished threads can never be joined while it joins (two exiting retirees calling
  // configurepool from their thread_local destructors used to join each other for good).
  struct exit_marker {
    threadpool* pool = nullptr;
    worker* self = nullptr;
    exit_marker() = default;
    exit_marker(const exit_marker&) = delete;
    exit_marker& operator=(const exit_marker&) = delete;
    ~exit_marker() {
      if (pool != nullptr) {
        std::lock_guard<std::mutex> lock(pool->mutex_);
        self->finished = true;
        pool->idle_cv_.notify_all(); // a destructor may be waiting for the last retiree
      }
    }
  };
  // The tasks that this thread's current task interrupted: a pool's destructor that runs its own
  // tasks on a worker of another pool (or of itself) pushes one.
  struct task_frame {
    threadpool* pool;
    const task_frame* outer;
  };
  ASYNC_PROCESS_WIDE static const task_frame*& outer_frames() noexcept {
    static thread_local const task_frame* frames = nullptr;
    return frames;
  }
  // Whether the calling thread runs a task of this pool, now or underneath the task it runs.
  bool runs_a_task_of_this() const noexcept {
    if (current_pool() == this) {
      return true;
    }
    for (const task_frame* f = outer_frames(); f != nullptr; f = f->outer) {
      if (f->pool == this) {
        return true;
      }
    }
    return false;
  }

  ASYNC_PROCESS_WIDE static worker*& current_worker() noexcept {
    static thread_local worker* w = nullptr;
    return w;
  }

  void handle(std::exception_ptr e) {
    std::shared_ptr<exception_handler> h;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      h = handler_;
    }
    if (h && *h) {
      (*h)(e);
    } else {
      std::terminate();
    }
  }

  void submit(detail::task&& t) {
    worker* self = current_pool() == this ? current_worker() : nullptr;
    if (self != nullptr && self->in_task && put_next(*self, t)) {
      return;
    }
    pending_.fetch_add(1, std::memory_order_relaxed);
    ASYNC_PERTURB(); // counted, not yet queued
    if (self != nullptr) {
      try {
        self->local.push(std::move(t));
      } catch (...) {
        finish(); // out of memory: not queued, so not pending either
        throw;
      }
      // Either a worker about to park sees this task in its last look, or we see it counted
      // as a sleeper and wake it (detail::idle_workers, (IW1)).
      if (idle_.anyone_asleep()) {
        std::lock_guard<std::mutex> lock(mutex_);
        idle_.notify_one();
      }
      return;
    }
    detail::lock_spinning_briefly(mutex_);
    std::lock_guard<std::mutex> lock(mutex_, std::adopt_lock);
    try {
      injection_.push_back(std::move(t));
    } catch (...) {
      finish_locked(); // out of memory: not queued, so not pending either
      throw;
    }
    // relaxed: a hint for spinning workers; the decisive check is under mutex_.
    queued_.fetch_add(1, std::memory_order_relaxed);
    idle_.notify_one_if_parked(); // under the lock: the parked worker cannot miss it
    if (active_.empty()) {
      idle_cv_.notify_all(); // a destructor waiting on a pool with no worker runs it
    }
  }

  // Owner: puts t in the next slot if the slot is empty (false: a second post, or another
  // worker still moving the previous task out).
  bool put_next(worker& self, detail::task& t) {
    std::uint64_t word = 0;
    if (!self.next.vacant(word)) {
      return false;
    }
    // The move runs the callable's move constructor: a post from there must not use the slot
    // that is being filled (it goes to the local queue).
    self.in_task = false;
    self.next.store(std::move(t));
    self.in_task = true;
    // The publication (NS2) comes before our look at the sleepers and the watcher in the
    // single total order (pairs with (IW2) and (IW3)): either an idle worker about to park or
    // to stop watching sees the task, or we see that nobody watches and wake a sleeper, which
    // then watches.
    self.next.publish(word);
    ASYNC_PERTURB(); // published, nobody woken yet
    if (idle_.asleep_unwatched()) {
      std::lock_guard<std::mutex> lock(mutex_);
      idle_.notify_one();
    }
    return true;
  }

  // Owner, after the running task returned: takes the next slot's task back (it inherits the
  // finished task's count). False when the slot is empty or another worker claimed it; then
  // that worker's count of it happens before our finish() of the poster (NS3 -> NS3o).
  bool take_next(worker& self, detail::task& out) {
    if (!self.next.reclaim()) {
      return false;
    }
    self.in_task = false; // as in put_next: the slot is not ours to fill during the move
    self.next.move_out(out);
    self.in_task = true;
    return true;
  }

  // An idle worker (mutex_ held): takes the task that `word` says is in victim's slot.
  bool claim_next(worker& victim, std::uint64_t word, detail::task& out) {
    // relaxed: ordered before the owner's finish() of the poster by (NS3) -> (NS3o).
    pending_.fetch_add(1, std::memory_order_relaxed);
    ASYNC_PERTURB(); // counted, not yet claimed
    if (!victim.next.claim(word, out)) {
      finish_locked(); // the owner took it back first
      return false;
    }
    return true;
  }

  // An idle worker (mutex_ held): looks at every other worker's next slot, takes a task that
  // has waited there for stale_after(), and reports what it saw.
  bool scan_next_slots(const worker* self, detail::task& out, slot_scan& seen) {
    // Read once, and only when a slot is in use (the clock costs more than the whole look).
    detail::wait_clock::time_point now{};
    auto clock = [&now] {
      if (now == detail::wait_clock::time_point{}) {
        now = detail::wait_clock::now();
      }
      return now;
    };
    for (auto* workers : {&active_, &retiring_}) {
      for (auto& w : *workers) {
        if (w.get() == self) {
          continue;
        }
        detail::next_slot& slot = w->next;
        const std::uint64_t word = slot.word();
        if (word != slot.seen) {
          slot.seen = word;
          slot.seen_since = clock();
          seen.changed = true;
        }
        if (!detail::next_slot::holds_task(word)) {
          continue;
        }
        if (clock() - slot.seen_since >= stale_after() && claim_next(*w, word, out)) {
          seen.claimed = true;
          return true;
        }
        seen.waiting = true;
      }
    }
    return false;
  }

  // Runs t, then each task that it (and each successor) put in our next slot, until none is
  // left or the worker is to retire.
  void run_task(worker& self, detail::task& t) {
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
      if (++in_a_row == detail::pool_fairness::next_in_a_row) {
        // The budget of the next slot is spent. The successor (with the count it inherited)
        // goes to the back of our own queue, behind what waits there, and the oldest task
        // there runs in its place (one hold of the queue's lock); or, when the outside posts
        // are due a look, the successor is queued and next_task looks. Nobody waiting: the
        // chain keeps its core.
        in_a_row = 0;
        self.in_task = false;
        if (shared_look_due(self)) {
          try {
            self.local.push(std::move(t));
            return;
          } catch (const std::bad_alloc&) {
            ASYNC_PERTURB(); // no room: the successor runs here
          }
        } else if (self.local.maybe_holds_tasks() && self.local.exchange_oldest(t)) {
          self.batched -= self.batched != 0 ? 1 : 0;
        }
        self.in_task = true;
      }
      if (self.retire.load(std::memory_order_relaxed)) {
        // Counted (inherited); the retiring hand-off gives it to the others. Without memory
        // to queue it (push_oldest left it untouched), this thread runs it before leaving.
        try {
          self.local.push_oldest(std::move(t));
          self.in_task = false;
          return;
        } catch (const std::bad_alloc&) {
          ASYNC_PERTURB(); // no room for the hand-off: run it here
        }
      }
    }
    self.in_task = false;
    // Counted later, in one subtraction (count_finished): pending_ shares its line with every
    // poster, and while this worker runs tasks pending_ cannot reach 0 through them anyway.
    if (++self.finished_uncounted == finished_max) {
      count_finished(self);
    }
  }

  // Whether `self` is due to look at the outside posts before its own queue (fairness) and
  // some are queued (a hint: relaxed; one posted just after waits for the next look).
  bool shared_look_due(const worker& self) const noexcept {
    return self.ticks - self.shared_look >= detail::pool_fairness::shared_every &&
           self.batched == 0 && queued_.load(std::memory_order_relaxed) != 0;
  }

  // Subtracts the tasks `self` finished from pending_ (before the worker looks beyond its own
  // queue, so that an idle pool reaches 0); wakes the idle waiters when they were the last.
  void count_finished(worker& self) {
    const std::size_t n = self.finished_uncounted;
    if (n == 0) {
      return;
    }
    self.finished_uncounted = 0;
    ASYNC_PERTURB(); // finished, not yet counted
    if (pending_.fetch_sub(n, std::memory_order_acq_rel) == n) {
      std::lock_guard<std::mutex> lock(mutex_);
      idle_cv_.notify_all();
    }
  }

  // One task (or task count) less pending; wakes the idle waiters when it was the last.
  void finish() {
    ASYNC_PERTURB(); // finished, not yet counted
    if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      std::lock_guard<std::mutex> lock(mutex_);
      idle_cv_.notify_all();
    }
  }
  void finish_locked() {
    if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      idle_cv_.notify_all();
    }
  }

  bool wait_idle_until_deadline(detail::wait_clock::time_point deadline) {
    if (runs_a_task_of_this()) {
      throw std::logic_error("async::threadpool: waiting for idleness from one of its own tasks");
    }
    std::unique_lock<std::mutex> lock(mutex_);
    while (pending_.load(std::memory_order_acquire) != 0) {
      if (!detail::cv_wait_until(idle_cv_, lock, deadline)) {
        return pending_.load(std::memory_order_acquire) == 0;
      }
    }
    return true;
  }

  // mutex_ held: the oldest task of another worker's local queue (retiring workers' included:
  // one may be busy with a long task).
  bool steal(const worker* self, detail::task& out) {
    for (auto* workers : {&active_, &retiring_}) {
      for (auto& w : *workers) {
        if (w.get() == self) {
          continue;
        }
        // The count first: a look over idle workers' queues writes none of their lines
        // (it runs under mutex_, which the posters wait for).
        if (w->local.maybe_holds_tasks() && w->local.pop_oldest(out)) {
          return true;
        }
      }
    }
    return false;
  }

  // mutex_ held: a task for `self` (nullptr: the destructor of a paused pool). A task that has
  // waited in a next slot goes first: its poster may be blocked on it. Then the oldest outside
  // post, except that every steal_turn-th look steals from the local queues first, so that a
  // steady stream of outside posts starves neither.
  bool find_work(worker* self, detail::task& out, slot_scan& seen) {
    if (scan_next_slots(self, out, seen)) {
      return true;
    }
    const bool steal_first = self != nullptr && ++self->looks % steal_turn == 0;
    if (steal_first && steal(self, out)) {
      return true;
    }
    if (!injection_.empty()) {
      out = std::move(injection_.front());
      injection_.pop_front();
      const std::size_t batch = self != nullptr ? take_batch(*self) : 0;
      queued_.fetch_sub(1 + batch, std::memory_order_relaxed);
      return true;
    }
    return !steal_first && steal(self, out);
  }

  // mutex_ held, a task just taken from injection_: when the outside posts queue up deeper than
  // 2 x batch_max, moves this worker's share of them (at most batch_max) into its local queue,
  // so that it takes them without the pool's lock, which the posters need. They keep their
  // order there (the owner takes the oldest first); idle workers steal from there as
  // from any local queue (each of these tasks woke a parked worker when it was posted, and a
  // worker parks only after finding every local queue empty). Returns how many moved. If
  // memory runs out, what was not moved stays queued here.
  std::size_t take_batch(worker& self) {
    // Only with a deep queue and every other worker busy: a spinning worker watches injection_
    // alone (queued_), and idles while the batch's owner runs it one task after the other. (No
    // retiree gets here: its callers check `retire` under the same hold of mutex_.)
    if (injection_.size() < 2 * batch_max || spinning_.load(std::memory_order_relaxed) != 0 ||
        idle_.sleepers() != 0) {
      return 0;
    }
    const std::size_t share = injection_.size() / std::max<std::size_t>(1, active_.size());
    const std::size_t n = share < batch_max ? share : batch_max;
    auto lock = self.local.lock();
    detail::ring_deque<detail::task>& local = self.local.tasks(lock);
    try {
      local.reserve(local.size() + n); // then the moves below cannot throw
    } catch (...) {
      return 0; // out of memory: the tasks stay queued here
    }
    for (std::size_t k = 0; k < n; ++k) {
      local.push_back(std::move(injection_[k]));
    }
    self.local.recount(lock);
    self.batched += n;
    injection_.drop_front(n);
    ASYNC_PERTURB(); // moved to the local queue, the pool's lock held
    return n;
  }

  // mutex_ held, a task just taken by a worker that is not the watcher (`self_asleep`: 1 if it
  // counts among the sleepers, else 0). A task may still wait in some next slot: one that our
  // look saw, or one past the slot that we took ours from (the look stopped there). If no
  // parked worker watches the slots, a sleeper is woken to look (and to watch if need be).
  // Without this the watch got lost: a watcher woken for nothing (a late notification) leaves
  // park() and comes back for the lock, takes a task from a slot on its way, and the workers
  // that parked without a deadline while it watched sleep on, while the other slots wait.
  void pass_watch_on(const slot_scan& seen, std::size_t self_asleep) {
    if ((seen.waiting || seen.claimed) && !idle_.watched() && idle_.sleepers() > self_asleep) {
      idle_.notify_one();
    }
  }

  // mutex_ held, nothing found, spinning done: sleeps until a post wakes us. While a task waits
  // in some next slot, one parked worker, the watcher, also wakes up now and then to look at
  // the slots (the others sleep until a post wakes them). Returns true with a task in t; false
  // when the worker is to retire, or was woken but another worker took the task (it then waits
  // actively for a while: more posts tend to follow). mutex_ is held on return.
  bool park(worker& self, std::unique_lock<std::mutex>& lock, detail::task& t) {
    idle_.fall_asleep(); // counted before the last look below (IW2)
    bool watcher = false;
    std::chrono::microseconds period = stale_after();
    bool found = false;
    bool woken = false;
    slot_scan last; // what the latest look saw
    for (;;) {
      if (self.retire.load(std::memory_order_relaxed)) {
        break;
      }
      last = slot_scan{};
      if (find_work(&self, t, last)) {
        found = true;
        break;
      }
      if (woken) {
        break;
      }
      if (!watcher && last.waiting && !idle_.watched()) {
        idle_.watch(true); // under mutex_: one watcher at most
        watcher = true;
      } else if (watcher && !last.waiting && !last.changed) {
        idle_.watch(false); // (IW3), then look once more
        watcher = false;
        period = stale_after();
        continue;
      }
      const auto deadline = watcher ? detail::wait_clock::now() + period : detail::no_deadline();
      ASYNC_PERTURB(); // about to park, the pool's lock held
      woken = idle_.park(lock, deadline);
      if (!woken) {
        period = (std::min)(period * 2, watch_period_max()); // a timed look found nothing new
      }
    }
    if (watcher) {
      idle_.watch(false);
      // Leaving with work, or retiring: hand the watch to another sleeper, or a task waiting
      // in some slot could wait for as long as our task runs, or for good. (Whatever our last
      // look saw: a task put in a slot after it found us still watching, so nobody was woken
      // for it. Retiring: configurepool woke every sleeper, but those that got the lock before
      // us saw us still watching and parked again without a deadline. Woken for nothing, we
      // look again under mutex_ before we take or park, and pass_watch_on() from there. The
      // sleepers change only under mutex_: the count is exact.)
      if ((found || self.retire.load(std::memory_order_relaxed)) && idle_.sleepers() > 1) {
        idle_.notify_one();
      }
    } else if (found) {
      pass_watch_on(last, 1);
    }
    idle_.wake_up();
    return found;
  }

  // A worker's thread: runs tasks until it is to retire, then hands its queue over.
  void work(worker& self) {
    enter_thread(self);
    detail::task t;
    std::unique_lock<std::mutex> lock(mutex_, std::defer_lock);
    while (next_task(self, t, lock)) {
      run_task(self, t);
    }
    leave(self, lock);
  }

  // The worker's thread-locals: which pool and worker it is, and its exit_marker (the first
  // thread_local of the thread, so the last destroyed).
  void enter_thread(worker& self) {
    exit_marker& marker = thread_exit_marker();
    marker.pool = this;
    marker.self = &self;
    worker_of() = this;
    current_pool() = this;
    current_worker() = &self;
  }

  // Fairness: every so many tasks a worker takes the oldest outside post, if there is one,
  // before it takes from its own queue (where chains could keep it busy for ever).
  bool take_shared(worker& self, detail::task& t, std::unique_lock<std::mutex>& lock) {
    detail::lock_spinning_briefly(lock);
    const bool found = !self.retire.load(std::memory_order_relaxed) && !injection_.empty();
    if (found) {
      t = std::move(injection_.front());
      injection_.pop_front();
      queued_.fetch_sub(1, std::memory_order_relaxed);
    }
    lock.unlock();
    return found;
  }

  // The next task for `self`: from its own queue; else, after watching the pool's queue a
  // little (detail::backoff, the library's waiting policy), from the pool (find_work); else
  // parked until a post wakes it. False when the worker is to retire: `lock` then holds mutex_.
  bool next_task(worker& self, detail::task& t, std::unique_lock<std::mutex>& lock) {
    detail::backoff spin;
    // Counted in spinning_ while it watches for outside posts (take_batch's hint).
    struct spin_count {
      std::atomic<std::size_t>& count;
      bool on;
      void start() {
        if (!on) {
          count.fetch_add(1, std::memory_order_relaxed);
          on = true;
        }
      }
      void stop() {
        if (on) {
          count.fetch_sub(1, std::memory_order_relaxed);
          on = false;
        }
      }
      ~spin_count() { stop(); }
    } spinning{spinning_, false};
    // Held from the moment a spinning worker sees outside posts (queued_) until its look under
    // mutex_ is over: no more workers come for the lock on the strength of queued_ than it
    // counts tasks, the rest spin on. Without this, every spinner took the lock for each post
    // and, all but one finding nothing, kept it from the posters: with one poster and tiny
    // tasks the pool ran slower with each worker added (16 workers: 0.12 M tasks/s, one: 3.4;
    // bench/results/16core-xeon-2026-11-26). relaxed: a hint; what is taken is decided under
    // mutex_.
    struct taker_token {
      std::atomic<std::size_t>& takers;
      bool held;
      bool claim(std::size_t queued) {
        std::size_t n = takers.load(std::memory_order_relaxed);
        while (n < queued) {
          if (takers.compare_exchange_weak(n, n + 1, std::memory_order_relaxed)) {
            held = true;
            return true;
          }
        }
        return false;
      }
      void release() {
        if (held) {
          takers.fetch_sub(1, std::memory_order_relaxed);
          held = false;
        }
      }
      ~taker_token() { release(); }
    };
    for (;;) {
      // relaxed: a retiree that runs one more task is harmless; the decisive check is below,
      // under mutex_.
      if (!self.retire.load(std::memory_order_relaxed)) {
        if (shared_look_due(self)) {
          self.shared_look = self.ticks;
          if (take_shared(self, t, lock)) {
            return true;
          }
        }
        if (self.local.pop_oldest(t)) {
          self.batched -= self.batched != 0 ? 1 : 0;
          return true;
        }
        self.batched = 0;
      }
      count_finished(self); // before waiting, looking elsewhere or retiring
      // Nothing of our own: watch for outside posts a little before taking the pool's lock (a
      // retiree goes straight to its hand-off).
      // (A worker whose spinning ran out comes for the lock without the token, to park.)
      bool spun = false;
      taker_token token{takers_.value, false};
      if (!self.retire.load(std::memory_order_relaxed) &&
          !token.claim(queued_.load(std::memory_order_relaxed))) {
        spinning.start();
        if (spin.wait()) {
          continue;
        }
        spun = true;
        spinning.stop(); // parked next if nothing turns up, and then counted as a sleeper
      }
      if (token.held) {
        ASYNC_PERTURB(); // the token taken, the pool's lock not yet
      }
      detail::lock_spinning_briefly(lock);
      if (self.retire.load(std::memory_order_relaxed)) {
        ASYNC_PERTURB(); // retiring, the pool's lock held
        return false;
      }
      slot_scan seen;
      const bool found = find_work(&self, t, seen);
      token.release(); // mutex_ still held: the next taker may spin for it already
      if (found) {
        pass_watch_on(seen, 0);
      }
      if (found || (spun && park(self, lock, t))) {
        lock.unlock();
        return true;
      }
      if (self.retire.load(std::memory_order_relaxed)) {
        return false;
      }
      lock.unlock();
      if (spun) {
        spin.reset(); // woken, but the task went to another worker: wait actively again
      }               // else queued_ was stale: spin on
    }
  }

  // Retiring (mutex_ held): from here on this thread is no worker of the pool (what its
  // thread_local destructors post goes to the injection queue, as from any thread); its local
  // tasks go to the others, or to the destructor of a pool shrunk to 0. (Its next slot is
  // empty: run_task took back what it put there.)
  void leave(worker& self, std::unique_lock<std::mutex>& lock) {
    current_pool() = nullptr;
    current_worker() = nullptr;
    std::unique_lock<std::mutex> local_lock = self.local.lock();
    detail::ring_deque<detail::task>& mine = self.local.tasks(local_lock);
    std::size_t handed = 0;
    while (!mine.empty()) {
      handed = mine.size();
      if (injection_.empty()) {
        injection_.swap(mine); // no allocation
        break;
      }
      try {
        injection_.reserve(injection_.size() + mine.size()); // then the moves cannot throw
      } catch (const std::bad_alloc&) {
        // A retiree has nobody to report to: it waits for memory, then tries again (its
        // tasks stay in its queue meanwhile, where cancel_pending still finds them).
        local_lock.unlock();
        lock.unlock();
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
        lock.lock();
        local_lock.lock();
        continue;
      }
      for (std::size_t i = 0; i < mine.size(); ++i) {
        injection_.push_back(std::move(mine[i]));
      }
      mine.clear();
    }
    self.local.recount(local_lock);
    if (handed != 0) {
      queued_.fetch_add(handed, std::memory_order_relaxed);
      idle_.notify_all();
      idle_cv_.notify_all();
    }
    local_lock.unlock();
    lock.unlock();
    // `finished` is set by the thread's exit_marker, after its thread_local destructors.
  }

  ASYNC_PROCESS_WIDE static exit_marker& thread_exit_marker() noexcept {
    static thread_local exit_marker marker;
    return marker;
  }

  // The destructor (mutex_ held): waits until done() holds (it is checked under mutex_). While
  // the pool has no worker (paused, or at its end), this thread runs what is queued, what
  // retiring workers' tasks queued and what waits in their next slots, one task at a time, as
  // tasks of the pool (so such a task must not wait for another task: this thread is the only
  // one to run it); tasks still running on retirees, and retirees' thread_local destructors,
  // may post more, so it looks again every watch period (and when a retiree finishes). With
  // workers, they run everything: it waits for the last finish().
  template <typename Done>
  void drain(std::unique_lock<std::mutex>& lock, Done done) {
    std::chrono::microseconds period = stale_after();
    while (!done()) {
      if (!active_.empty()) {
        idle_cv_.wait(lock);
        period = stale_after();
        continue;
      }
      detail::task t;
      slot_scan seen;
      if (find_work(nullptr, t, seen)) {
        lock.unlock();
        run_as_pool_task(t);
        finish();
        lock.lock();
        period = stale_after();
        continue;
      }
      detail::cv_wait_until(idle_cv_, lock, detail::wait_clock::now() + period);
      period = (std::min)(period * 2, watch_period_max());
    }
  }

  // The destructor runs t as a task of this pool (with no worker): from it, wait_idle() throws
  // and destroying the pool is detected; what it posts goes to the injection queue.
  void run_as_pool_task(detail::task& t) {
    threadpool* const pool = current_pool();
    worker* const w = current_worker();
    // The task this thread was running (of the pool it was running for) is interrupted, not
    // over: a wait_idle() on that pool from here must still be refused.
    const task_frame interrupted{pool, outer_frames()};
    outer_frames() = &interrupted;
    current_pool() = this;
    current_worker() = nullptr;
    const auto restore = detail::at_scope_exit([pool, w, &interrupted] {
      current_pool() = pool;
      current_worker() = w;
      outer_frames() = interrupted.outer;
    });
    t();
    t.reset(); // destroy captures before the task counts as finished
  }

  // Runs everything to the end, then joins every thread. A round: wait until no task is
  // pending and every retiree has been through its thread_local destructors (the workers run
  // the tasks; with none active this thread runs them itself, as tasks of the pool), join the
  // retirees, then retire the workers. Their thread_local destructors may post, wait, and grow
  // the pool again: the next round runs and joins that too. Done when a round finds no task,
  // no worker and no retiree. (The destructor; the constructor when a thread cannot start.)
  void shut_down() {
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
      drain(lock, [this] {
        return pending_.load(std::memory_order_acquire) == 0 &&
               std::all_of(retiring_.begin(), retiring_.end(),
                           [](const std::unique_ptr<worker>& w) { return w->finished; });
      });
      std::vector<std::unique_ptr<worker>> finished = std::move(retiring_);
      retiring_.clear();
      lock.unlock();
      for (auto& w : finished) {
        w->thread.join(); // finished: the join waits for the thread's exit alone
      }
      lock.lock();
      if (active_.empty()) {
        if (retiring_.empty() && pending_.load(std::memory_order_acquire) == 0) {
          return;
        }
        continue;
      }
      if (retiring_.empty()) {
        retiring_.swap(active_); // no allocation
      } else {
        try {
          retiring_.reserve(retiring_.size() + active_.size());
        } catch (const std::bad_alloc&) {
          // The destructor cannot report it: wait for memory, then go round again.
          lock.unlock();
          std::this_thread::sleep_for(std::chrono::milliseconds(1));
          lock.lock();
          continue;
        }
        for (auto& w : active_) {
          retiring_.push_back(std::move(w));
        }
        active_.clear();
      }
      for (auto& w : retiring_) {
        w->retire.store(true, std::memory_order_relaxed);
      }
      size_.store(0, std::memory_order_relaxed);
      idle_.notify_all(); // parked retirees wake up and leave
    }
  }

  // Joins the retirees whose threads have finished (thread_local destructors included).
  void join_retired() {
    std::vector<std::unique_ptr<worker>> to_join;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      try {
        to_join.reserve(retiring_.size()); // then the moves below cannot throw
      } catch (const std::bad_alloc&) {
        return; // they stay listed: a later configurepool or the destructor joins them
      }
      for (auto it = retiring_.begin(); it != retiring_.end();) {
        if ((*it)->finished) {
          to_join.push_back(std::move(*it));
          it = retiring_.erase(it);
        } else {
          ++it;
        }
      }
    }
    for (auto& w : to_join) {
      w->thread.join();
    }
  }

  // ---- data -----------------------------------------------------------------------------------
  mutable std::mutex mutex_;                      // guards everything below that is not atomic
  std::condition_variable idle_cv_;               // wait_idle and the destructor wait here
  detail::ring_deque<detail::task> injection_;    // tasks posted from outside the pool
  std::vector<std::unique_ptr<worker>> active_;   // the current workers
  std::vector<std::unique_ptr<worker>> retiring_; // retired, not yet joined
  std::shared_ptr<exception_handler> handler_;    // for execute(); null: std::terminate
  // Written under mutex_ or by workers; read without it by observers and submit().
  std::atomic<std::size_t> size_{0};
  detail::idle_workers idle_;            // workers with nothing to do (parked on mutex_)
  std::atomic<std::size_t> pending_{0};  // tasks posted and not yet finished
  std::atomic<std::size_t> queued_{0};   // tasks in injection_ (a hint for spinning workers)
  std::atomic<std::size_t> spinning_{0}; // workers watching queued_ (a hint for take_batch)
  detail::padded<std::atomic<std::size_t>> takers_; // workers on their way to injection_
};

} // namespace async

#endif // ASYNC_THREADPOOL_H
