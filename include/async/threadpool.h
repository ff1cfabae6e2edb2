// SPDX-License-Identifier: BSL-1.0
#ifndef ASYNC_THREADPOOL_H
#define ASYNC_THREADPOOL_H

#include "detail/config.h"

#include "detail/deadline.h"
#include "detail/perturb.h"
#include "detail/pool/scheduler.h"
#include "detail/pool/task.h"
#include "detail/pool/thread_identity.h"
#include "detail/scope_exit.h"
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
/// A pool of worker threads that runs any callable.
///
/// post(f, args...) behaves like std::async(std::launch::async, f, args...) without a thread per
/// call: the arguments are decay-copied (or moved) into the task, the call is INVOKE(f, args...)
/// on those copies, and the returned std::future<R> (R as std::async would give) delivers the
/// result or the exception. execute(f) is the cheap fire-and-forget path without a future.
///
/// Scheduling (detail::scheduler, docs/implementation.md): an outside post goes to a lane of
/// the shared queue (lanes by posting thread: each thread's posts keep their order; a post takes
/// its lane's lock, no pool-wide one). A task's first post runs right after it on the same
/// thread (its worker's "next" slot), unless it waits there 50 us (then another worker takes
/// it); its further posts go to its worker's own queue, which idle workers steal from. A worker
/// with nothing to do searches briefly, then parks: an idle pool uses no CPU.
///
/// Fairness: no task waits for ever behind others, whatever door it came in by, also while
/// tasks re-post themselves without end (the yield or polling pattern) and every worker is
/// busy. A worker runs at most 16 tasks in a row from its next slot (then the oldest task of
/// its own queue runs in the successor's place, if there is one); it takes the oldest task of
/// its own queue first; and at least once every 61 tasks it runs (77 within a chain), it looks
/// elsewhere before its own queue, at three places, each look beginning with the next of them
/// in turn: a task that has waited in another worker's next slot for 50 us; the queue of a
/// worker that has started no task for 50 us (a long task, or a thread the system does not
/// run; up to 16 of its oldest tasks move over); the next lane in turn. (A look waits while
/// outside posts that the worker took in a batch, older ones, at most 16, wait in its own
/// queue.) So with one lane (or one posting thread), an outside post at the front of the shared
/// queue starts before any running worker has run 231 more tasks (3 x 77; 503 while that worker
/// still runs such a batch); one behind k others, before (k + 1) x 503; with L lanes in use, L
/// times that. A task in a worker's own queue behind k others starts before that worker has run
/// (k + 1) x 17 more, plus 17 for each look that took a task from elsewhere meanwhile (one in
/// 61 tasks at most), or, if that worker stops starting tasks, at a look of any other running
/// worker after 50 us.
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
/// Destruction waits until no task is pending: it runs every task already posted and all that
/// they post, so no future sees broken_promise (tasks that re-post themselves for ever keep it
/// waiting for ever: end them with a flag they read). Then it joins every thread, runs what
/// their thread_local destructors posted, and goes on so until no task is pending and no thread
/// is left (a task may grow the pool meanwhile; those threads are joined too). With size 0 the
/// destructor runs the queued tasks itself, as tasks of the pool, one at a time (such a task
/// must not wait for another: the destructor's thread is the only one to run it), and what
/// retiring workers' running tasks post or wait for. The exception handler serves every task
/// run until then, those that thread_local destructors post included; then it is destroyed
/// while the pool can still run tasks (one worker is started for it): its captures' destructors
/// may post and wait for what they post, which runs with the default handler (only if no
/// thread can start does it run after they return). During destruction, tasks may post, resize
/// and cancel_pending(); other threads must not use the pool any more. Destroying the pool from
/// one of its own tasks (or threads) would wait for itself: it is detected and ends the program
/// (a message on stderr, then std::terminate).
///
/// Failures: when a thread cannot start, the constructor throws std::system_error having joined
/// the threads it started, and configurepool throws it with size() counting the workers that
/// did start. When memory runs out, post and execute throw std::bad_alloc with nothing queued
/// or counted, and cancel_pending throws it having cancelled nothing (if memory runs out
/// before it takes the tasks; see there).
///
/// Memory: two heap blocks per post for the future (with libstdc++: the shared state and the
/// result object it makes ready). The task lives in an inline buffer of detail::task::inline_size
/// bytes, unless the callable and its arguments are larger, or destroying a moved-from copy of
/// them could run user code (a lambda with any capture that has a destructor, a std::string or
/// std::shared_ptr included: nothing can look inside a closure): then one more allocation. post's
/// arguments of those standard types (strings, vectors, smart pointers, promises) stay inline.
/// Per worker: a thread, a ring of tasks, a next slot and a few cache lines; per lane, one ring
/// and two cache lines.
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
/// @code
///   async::threadpool pool(4);
///   auto f = pool.post([](int a, int b) { return a + b; }, 2, 3);
///   int five = f.get();
///   pool.configurepool(8);
/// @endcode
class threadpool {
public:
  /// What set_exception_handler takes: called with the exception that escaped a task given to
  /// execute(), on the thread that ran the task.
  using exception_handler = std::function<void(std::exception_ptr)>;

  /// Starts `n` workers (default: the hardware thread count, at least 1). 0 makes a paused
  /// pool. Not explicit, as in the original library (an aggregate holding a pool can be
  /// initialized with `{}`). O(n) thread starts. Not thread-safe (construction).
  /// @throws std::invalid_argument when n < 0.
  /// @throws std::system_error when a thread cannot start, std::bad_alloc when memory runs out;
  ///         either way the threads that did start are joined first.
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
    if (runs_a_task_of_this() || identity::worker_of() == this) {
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
  /// moved out and destroyed first. O(1). Thread-safe (may block: an outside post takes its
  /// lane's lock for a moment).
  /// @param f     the callable, decay-copied (or moved) into the task.
  /// @param args  its arguments, decay-copied (or moved) into the task.
  /// @return the future of f's result, or of its exception. Dropping it is fine: unlike
  ///         std::async's, it does not wait when destroyed.
  /// @throws std::bad_alloc when memory runs out, and anything that copying or moving f or
  ///         args throws: nothing is posted then.
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

  /// Runs f() on a worker, without a future: the cheap fire-and-forget path. An exception
  /// escaping f goes to the handler set with set_exception_handler (default: std::terminate).
  /// O(1). Thread-safe (may block: an outside call takes its lane's lock for a moment).
  /// @throws std::bad_alloc when memory runs out, and anything that copying or moving f
  ///         throws: nothing is queued then.
  template <typename F>
  void execute(F&& f) {
    submit(detail::task(guarded_call<typename std::decay<F>::type>{std::forward<F>(f), this}));
  }

  /// Sets what receives an exception escaping a task given to execute(). The handler runs on the
  /// worker thread. An empty handler restores the default, std::terminate. A handler that
  /// throws ends the program through std::terminate (its exception has nowhere left to go).
  /// The old handler is released outside the pool's lock (a worker that is calling it keeps it
  /// until that call returns). Thread-safe (may block: takes the pool's lock briefly).
  /// @throws std::bad_alloc when memory runs out (the old handler stays).
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
  /// destructors included, and concurrently. O(n) thread starts when growing. Thread-safe (may
  /// block: takes the pool's lock while it starts threads, and joins retirees that have
  /// finished).
  /// @throws std::system_error when a thread cannot start, std::bad_alloc when memory runs out;
  ///         size() then counts the workers there are.
  void configurepool(std::size_t n) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      // Also when a thread cannot start (the exception propagates): size() counts the workers
      // there are, and a waiting destructor learns that there is none.
      const auto counted = detail::at_scope_exit([this] {
        size_.store(active_.size(), std::memory_order_relaxed);
        if (active_.empty()) {
          idle_cv_.notify_all(); // a waiting destructor now runs what is queued itself
        }
      });
      while (active_.size() < n) {
        std::unique_ptr<thread_entry> entry(new thread_entry);
        active_.reserve(active_.size() + 1); // so that push_back cannot throw after the start
        entry->w = &scheduler_.add_worker();
        try {
          // Started before it joins the active set: if std::thread throws, nothing is left
          // behind but the worker's entry, which goes back.
          ASYNC_FAULT_THREAD_START();
          thread_entry* raw = entry.get();
          entry->thread = std::thread([this, raw] { work(*raw); });
        } catch (...) {
          scheduler_.retire(*entry->w);
          scheduler_.release(*entry->w);
          throw;
        }
        active_.push_back(std::move(entry));
      }
      if (active_.size() > n) {
        // Room first: a retiree that could not be listed would leave without being counted.
        retiring_.reserve(retiring_.size() + (active_.size() - n));
      }
      while (active_.size() > n) {
        scheduler_.retire(*active_.back()->w); // wakes it if it sleeps
        retiring_.push_back(std::move(active_.back()));
        active_.pop_back();
      }
    }
    ASYNC_PERTURB(); // resized, retirees not yet joined
    join_retired();
  }

  /// Whether the calling thread runs a task of this pool right now (a worker inside one of the
  /// pool's tasks, or a thread running the pool's tasks in its destructor). Asio's dispatch()
  /// runs a function at once exactly then (see async/asio.h). Thread-safe (lock-free).
  bool running_in_this_thread() const noexcept { return runs_a_task_of_this(); }

  /// The number of workers (after the last configurepool). Thread-safe (lock-free).
  std::size_t size() const noexcept { return size_.load(std::memory_order_relaxed); }

  /// The number of workers parked for lack of work right now (an int, as in the original
  /// library; stale as soon as it is read). Thread-safe (lock-free).
  int idlesize() const noexcept { return static_cast<int>(scheduler_.parked()); }

  /// Blocks until every task posted so far (and every task they post) has finished. With the
  /// pool paused at size 0, until it grows and runs them. Thread-safe (may block).
  /// @throws std::logic_error when called from a task of this pool (it would wait for itself).
  void wait_idle() { wait_idle_until_deadline(detail::no_deadline()); }

  /// Like wait_idle(), for at most `timeout`. Any duration works: duration::max() (of any unit)
  /// waits for as long as it takes, without overflowing; zero or negative only looks.
  /// Thread-safe (may block).
  /// @return true when the pool became idle in time; false on timeout (tasks are still pending).
  /// @throws std::logic_error when called from a task of this pool.
  template <typename Rep, typename Period>
  ASYNC_NODISCARD bool wait_idle_for(const std::chrono::duration<Rep, Period>& timeout) {
    return wait_idle_until_deadline(detail::deadline_after(timeout));
  }

  /// Like wait_idle_for, until the time point `until` of any clock (max() waits for as long as
  /// it takes; a time point in the past only looks). Thread-safe (may block).
  /// @return true when the pool became idle in time; false on timeout (tasks are still pending).
  /// @throws std::logic_error when called from a task of this pool.
  template <typename Clock, typename Duration>
  ASYNC_NODISCARD bool wait_idle_until(const std::chrono::time_point<Clock, Duration>& until) {
    return wait_idle_until_deadline(detail::deadline_at(until));
  }

  /// Discards the tasks queued at this moment, without running them, and returns how many:
  /// each discarded post()'s future reports std::future_error (broken_promise), each discarded
  /// execute() task is destroyed. Never touched: running tasks, the task that each running task
  /// may have in its worker's next slot (its first post), and what an asio_context
  /// (async/asio.h) queued (Asio expects each to run: a strand would stay locked for good; a
  /// stopped context discards its own).
  /// Throws std::bad_alloc, having cancelled nothing, when memory runs out before the tasks are
  /// taken; after that, a broken promise allocates its future_error in the promise's destructor,
  /// where a failed allocation ends the program, as for any std::packaged_task destroyed unrun.
  /// O(queued tasks). Thread-safe (may block: takes the pool's and the queues' locks).
  std::size_t cancel_pending() {
    return discard_if([](const detail::task& t) { return t.cancellable(); }, false);
  }

  /// The default size: the hardware thread count, at least 1. Thread-safe (lock-free).
  static int default_size() noexcept {
    const unsigned n = std::thread::hardware_concurrency();
    return n == 0 ? 1 : static_cast<int>(n);
  }

  /// default_size() under the original library's name (MIGRATION.md M6). Thread-safe
  /// (lock-free).
  static int defaultpoolsize() noexcept { return default_size(); }

private:
  friend class asio_context; // discards its own queued functions when it stops (discard_owned)

  // Discards the queued tasks for which drop(task) holds; with `next_slots`, also those that
  // wait in the workers' next slots (the others found there are queued again, on the lanes).
  // Returns how many.
  template <typename Drop>
  std::size_t discard_if(Drop drop, bool next_slots) {
    std::vector<detail::task> dropped;
    std::vector<detail::task> claimed;
    bool emptied = false;
    {
      std::lock_guard<std::mutex> lock(mutex_); // the workers' list stays as it is
      scheduler_.take_if(drop, dropped);
      if (next_slots) {
        dropped.reserve(dropped.size() + scheduler_.workers()); // room before the claims
        emptied = scheduler_.claim_next_slots(claimed);
      }
    }
    if (emptied) {
      wake_waiters(); // a lost claim gave back the last count (see claim_next_slots)
    }
    for (detail::task& t : claimed) {
      if (drop(static_cast<const detail::task&>(t))) {
        dropped.push_back(std::move(t)); // cannot throw: room was made
      } else {
        scheduler_.resubmit(std::move(t));
      }
    }
    // Destroyed outside the locks (their captures' destructors may use the pool), and counted
    // as finished only then, as the workers count what they ran.
    const std::size_t n = dropped.size();
    dropped.clear();
    if (n != 0) {
      scheduler_.finish(n);
    }
    return n;
  }

  // The queued tasks whose callable names `owner` (detail::task::owner), those waiting in next
  // slots included (asio_context: functions that will not run).
  std::size_t discard_owned(const void* owner) {
    return discard_if([owner](const detail::task& t) { return t.owner() == owner; }, true);
  }

  template <typename F>
  struct guarded_call {
    using async_keep_on_cancel = detail::keep_on_cancel<F>; // as f says (asio.h's functions)
    const void* async_owner() const noexcept { return detail::owner_of(f); }
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

  // What the scheduler tells the pool (detail::scheduler's Host).
  struct scheduler_host {
    threadpool* pool;
    // No task is pending any more (wait_idle and the destructor wait for that); or a task was
    // queued while no worker is active (a destructor waiting on a pool with none runs it).
    void idle() const { pool->wake_waiters(); }
    void orphaned() const { pool->wake_waiters(); }
  };
  using scheduler_type = detail::scheduler<scheduler_host>;
  using worker = scheduler_type::worker;

  // One thread of the pool, and the scheduler's worker it runs.
  struct thread_entry {
    worker* w = nullptr;
    std::thread thread;
    // Set by the thread's exit_marker, under mutex_, after its thread_local destructors: from
    // then on joining it waits for nothing but the thread's exit.
    bool finished = false;
  };

  // Which pool's task the calling thread runs, as which worker (detail::thread_identity).
  using identity = detail::thread_identity;

  // The first thread_local object of a worker's thread to be constructed, so the last to be
  // destroyed: once it goes, the thread's other thread_local destructors (user code, which may
  // post, resize, or block) have run, and joining the thread waits for its exit only. That is
  // when the worker counts as finished, and configurepool may join it: a thread that joins
  // only finished threads can never be joined while it joins (two exiting retirees calling
  // configurepool from their thread_local destructors used to join each other for good).
  struct exit_marker {
    threadpool* pool = nullptr;
    thread_entry* entry = nullptr;
    exit_marker() = default;
    exit_marker(const exit_marker&) = delete;
    exit_marker& operator=(const exit_marker&) = delete;
    ~exit_marker() {
      if (pool != nullptr) {
        std::lock_guard<std::mutex> lock(pool->mutex_);
        entry->finished = true;
        pool->idle_cv_.notify_all(); // a destructor may be waiting for the last retiree
      }
    }
  };
  ASYNC_PROCESS_WIDE static exit_marker& thread_exit_marker() noexcept {
    static thread_local exit_marker marker;
    return marker;
  }

  bool runs_a_task_of_this() const noexcept { return identity::runs_a_task_of(this); }

  void wake_waiters() {
    std::lock_guard<std::mutex> lock(mutex_);
    idle_cv_.notify_all();
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

  // A worker of this pool posting from one of its tasks goes to its own next slot or queue;
  // anything else is an outside post.
  void submit(detail::task&& t) {
    scheduler_.submit(std::move(t), identity::current_pool() == this
                                        ? static_cast<worker*>(identity::current_worker())
                                        : nullptr);
  }

  bool wait_idle_until_deadline(detail::wait_clock::time_point deadline) {
    if (runs_a_task_of_this()) {
      throw std::logic_error("async::threadpool: waiting for idleness from one of its own tasks");
    }
    std::unique_lock<std::mutex> lock(mutex_);
    while (scheduler_.pending() != 0) {
      if (!detail::cv_wait_until(idle_cv_, lock, deadline)) {
        return scheduler_.pending() == 0;
      }
    }
    return true;
  }

  // A worker's thread: its thread-locals, the scheduler's loop until it is retired, then the
  // hand-over of its queue (from then on it is no worker of the pool: what its thread_local
  // destructors post goes to the shared queue, as from any thread).
  void work(thread_entry& entry) {
    exit_marker& marker = thread_exit_marker(); // the first thread_local: the last to go
    marker.pool = this;
    marker.entry = &entry;
    identity::worker_of() = this;
    identity::current_pool() = this;
    identity::current_worker() = entry.w;
    scheduler_.run(*entry.w);
    identity::current_pool() = nullptr;
    identity::current_worker() = nullptr;
    scheduler_.leave(*entry.w);
  }

  // The destructor (mutex_ held): waits until done() holds (it is checked under mutex_). While
  // the pool has no worker (paused, or at its end), this thread runs what is queued, what
  // retiring workers' tasks queued and what waits in their next slots, one task at a time, as
  // tasks of the pool (so such a task must not wait for another task: this thread is the only
  // one to run it); tasks still running on retirees, and retirees' thread_local destructors,
  // may post more: such a post wakes it (scheduler_host::orphaned), and it looks again every watch
  // period anyway (a task in a next slot is taken once it has waited there). With workers, they run
  // everything: it waits for the last finish().
  template <typename Done>
  void drain(std::unique_lock<std::mutex>& lock, Done done) {
    // Its look at a paused pool's next slots: every 50 us, backing off to every 500 us.
    const std::chrono::microseconds period_min(50), period_max(500);
    std::chrono::microseconds period = period_min;
    while (!done()) {
      if (!active_.empty()) {
        idle_cv_.wait(lock);
        period = period_min;
        continue;
      }
      // Taken under mutex_: no worker can start between the look at active_ and the take (a
      // task taken here while a worker ran would be this thread's to run, and a task that
      // waits for another task would then wait for good). take_any calls nothing of ours.
      detail::task t;
      if (scheduler_.take_any(t)) {
        lock.unlock();
        run_as_pool_task(t);
        scheduler_.finish(1);
        lock.lock();
        period = period_min;
        continue;
      }
      detail::cv_wait_until(idle_cv_, lock, detail::wait_clock::now() + period);
      period = (std::min)(period * 2, period_max);
    }
  }
  // The destructor runs t as a task of this pool (with no worker): from it, wait_idle() throws
  // and destroying the pool is detected; what it posts goes to the shared queue.
  void run_as_pool_task(detail::task& t) {
    identity::run_as_task_of(this, [&t] {
      t();
      t.reset(); // destroy captures before the task counts as finished
    });
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
        return scheduler_.pending() == 0 &&
               std::all_of(retiring_.begin(), retiring_.end(),
                           [](const std::unique_ptr<thread_entry>& e) { return e->finished; });
      });
      std::vector<std::unique_ptr<thread_entry>> finished = std::move(retiring_);
      retiring_.clear();
      lock.unlock();
      for (auto& e : finished) {
        e->thread.join(); // finished: the join waits for the thread's exit alone
      }
      lock.lock();
      for (auto& e : finished) {
        scheduler_.release(*e->w);
      }
      if (active_.empty()) {
        if (retiring_.empty() && scheduler_.pending() == 0) {
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
        for (auto& e : active_) {
          retiring_.push_back(std::move(e));
        }
        active_.clear();
      }
      for (auto& e : retiring_) {
        if (!e->finished) {
          scheduler_.retire(*e->w); // wakes it if it sleeps
        }
      }
      size_.store(0, std::memory_order_relaxed);
    }
  }

  // Joins the retirees whose threads have finished (thread_local destructors included).
  void join_retired() {
    std::vector<std::unique_ptr<thread_entry>> to_join;
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
    for (auto& e : to_join) {
      e->thread.join();
    }
    if (!to_join.empty()) {
      std::lock_guard<std::mutex> lock(mutex_);
      for (auto& e : to_join) {
        scheduler_.release(*e->w); // its entry may serve a new worker now
      }
    }
  }

  // ---- data -----------------------------------------------------------------------------------
  mutable std::mutex mutex_;                          // guards everything below that is not atomic
  std::condition_variable idle_cv_;                   // wait_idle and the destructor wait here
  std::vector<std::unique_ptr<thread_entry>> active_; // the current workers
  std::vector<std::unique_ptr<thread_entry>> retiring_; // retired, not yet joined
  std::shared_ptr<exception_handler> handler_;          // for execute(); null: std::terminate
  std::atomic<std::size_t> size_{0}; // active_.size(), read without mutex_ by size()
  // The queues, the workers' loop and the count of pending tasks (last: destroyed first, once
  // every thread is joined).
  scheduler_type scheduler_{scheduler_host{this}};
};

} // namespace async

#endif // ASYNC_THREADPOOL_H
