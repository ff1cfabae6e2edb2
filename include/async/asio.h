// SPDX-License-Identifier: BSL-1.0
//
// async/asio.h: async::threadpool as an Asio execution context. Optional: only a program that
// includes this header needs Asio; the rest of the library needs the standard library alone.
//
// Boost.Asio is used by default (Boost 1.74 or later: the standard executors of Asio 1.18).
// Define ASYNC_ASIO_STANDALONE before the include to use standalone Asio instead (<asio.hpp>,
// namespace ::asio, version 1.18 or later).
//
// Asio hands its work to an executor, and an Asio executor belongs to an execution context
// (where services such as the strands' live). asio_context is that context for a pool:
//
//   async::threadpool pool(4);
//   async::asio_context context(pool);
//   auto ex = context.get_executor();
//   net::post(ex, f);                         // queued on the pool, never run inside post
//   net::dispatch(ex, f);                     // run at once when called on one of the pool's
//                                             // tasks, queued otherwise
//   net::defer(ex, f);                        // as post
//   auto strand = net::make_strand(ex);       // strand handlers: one at a time, in post order
//   std::future<int> r = net::post(ex, net::use_future([] { return 42; }));
//   net::co_spawn(ex, coroutine(), net::detached);   // C++20
//   net::execution::execute(net::require(ex, net::execution::blocking.always), f);  // waits
//   context.join();                           // until the work is done (or stop())
//   context.stop();                           // nothing more starts; the destructor then
//                                             // destroys what is queued and pending
//
// (net = boost::asio or asio.) The life cycle is Asio's thread_pool's: see asio_context.
// Handlers run as the pool's execute() tasks: an exception that escapes one goes to the pool's
// exception handler (threadpool::set_exception_handler; std::terminate by default) and the
// pool goes on. Resizing the pool, pausing it at size 0 included, is fine while handlers run
// or wait. threadpool::cancel_pending() leaves a running context's functions queued (Asio
// expects each to run: a strand would stay locked for good).
#ifndef ASYNC_ASIO_H
#define ASYNC_ASIO_H

#include "threadpool.h"

#if defined(ASYNC_ASIO_STANDALONE)
#include <asio/detail/scheduler.hpp>
#include <asio/execution.hpp>
#include <asio/execution_context.hpp>
#else
#include <boost/asio/detail/scheduler.hpp>
#include <boost/asio/execution.hpp>
#include <boost/asio/execution_context.hpp>
#endif

#include "detail/perturb.h"
#include "detail/pool/task.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdio>
#include <exception>
#include <future>
#include <mutex>
#include <stdexcept>
#include <type_traits>
#include <utility>
#include <vector>

namespace async {
namespace detail {
#if defined(ASYNC_ASIO_STANDALONE)
namespace net = ::asio;
#else
namespace net = ::boost::asio;
#endif
} // namespace detail

/// An Asio execution context whose executor runs functions on an async::threadpool, with the
/// life cycle of Asio's thread_pool: join() waits until the work is done, stop() ends it early,
/// and the destructor stops, waits only for the functions that are running, then shuts the
/// services down (destroying their pending operations: a self-owning session or timer ends
/// there). The pool must outlive the context. Thread-safe, except for construction and
/// destruction.
///
/// What becomes of the work:
///   - queued functions (submitted through the context's executors, not started): run, unless
///     the context is stopped first; then they are destroyed without being run, by the pool's
///     worker that reaches them, by join(), or by the destructor;
///   - functions submitted after stop() are never run: they are kept until the destructor,
///     which destroys them after the services' shutdown (as Asio's contexts destroy the
///     handlers left in their queues); those submitted after the destruction, through an
///     executor that tracks work (the one an I/O object on another context keeps for a handler
///     bound to ours), are dropped at once;
///   - running functions finish; stop() neither waits for them nor interrupts them;
///   - pending operations (a timer, a socket's read, a co_spawn'ed coroutine's await) are held
///     by the services and destroyed by the destructor's shutdown; their handlers never run.
class asio_context : public detail::net::execution_context {
public:
  class executor_type;

  /// A context over `pool`, which must outlive it. Not thread-safe (construction).
  /// @throws std::bad_alloc when memory runs out.
  explicit asio_context(threadpool& pool) : state_(new state(this, pool)) {}

  asio_context(const asio_context&) = delete;
  asio_context& operator=(const asio_context&) = delete;

  /// Stops the context, waits until no function of it is running (functions that will not run
  /// are destroyed meanwhile), shuts the services down (the pending operations, and the
  /// functions submitted after stop(), are destroyed), and destroys them. Work that executors
  /// track is not waited for: call join() first to let the work end by itself. Executors that
  /// track work may outlive the context (a handler bound to ours, pending on another context):
  /// what they submit later is dropped unrun. From one of the pool's tasks, the destructor
  /// waits as from outside; from a function of this context (which would wait for itself) it
  /// ends the program (a message on stderr, then std::terminate). Not thread-safe
  /// (destruction).
  ~asio_context() {
    stop();
    if (running_frame::runs(state_)) {
      std::fputs("async::asio_context: destroyed from one of its own functions, which it "
                 "would wait for (std::terminate)\n",
                 stderr);
      std::terminate();
    }
    settle();
    stop_reactor_thread();
    shutdown();
    drain_parked(false);
    destroy();
    if (drain_parked(true)) {
      delete state_;
    }
  }

  /// An executor of this context (blocking.possibly, outstanding_work.untracked,
  /// relationship.fork). Thread-safe (lock-free).
  executor_type get_executor() noexcept;

  /// get_executor() under the name that Asio's thread_pool also gives it. Thread-safe
  /// (lock-free).
  executor_type executor() noexcept;

  /// The pool that runs the context's functions. Thread-safe (lock-free).
  threadpool& pool() const noexcept { return state_->pool; }

  /// Stops the context: no function submitted through it starts any more (see the class
  /// comment for what becomes of them), and join() returns once those running have returned.
  /// Returns at once; may be called from anywhere, a function of the context included, any
  /// number of times. There is no restart. Thread-safe (may block: takes the context's lock
  /// briefly to wake join()).
  void stop() noexcept {
    // (AC3) seq_cst: with (AC1), (AC2) and (AC4): a submitter either sees the flag, or the
    // waiter sees its count.
    state_->stopped.store(true, std::memory_order_seq_cst);
    std::lock_guard<std::mutex> lock(state_->mutex);
    state_->done.notify_all();
  }

  /// Whether stop() has been called. Thread-safe (lock-free).
  bool stopped() const noexcept { return state_->stopped.load(std::memory_order_acquire); }

  /// Blocks until no function submitted through this context's executors is queued or running
  /// (those they submit included) and no executor of it tracks outstanding work
  /// (outstanding_work.tracked, such as an executor_work_guard's), as Asio's thread_pool::join
  /// does; or, once the context is stopped, until no function of it is running. It does not
  /// stop the context: work submitted afterwards still runs. Thread-safe (may block).
  /// @throws std::logic_error when called from one of the pool's tasks (it could wait for
  ///         itself).
  void join() {
    if (state_->pool.running_in_this_thread()) {
      throw std::logic_error("async::asio_context: join() from one of the pool's tasks");
    }
    settle();
  }

  /// join() under the name of Asio's thread_pool::wait(). Thread-safe (may block).
  /// @throws std::logic_error when called from one of the pool's tasks, as join().
  void wait() { join(); }

  /// How many executors of this context track outstanding work right now (plus the
  /// on_work_started() calls not yet matched by on_work_finished()). Thread-safe (lock-free).
  std::size_t outstanding_work() const noexcept {
    return state_->work.load(std::memory_order_acquire);
  }

private:
  // What the context's executors and functions share. It outlives the context while an
  // executor that tracks work exists: such an executor may be destroyed, or used, after the
  // context (a handler bound to ours, pending on an io_context that outlives it).
  struct state {
    state(asio_context* c, threadpool& p) noexcept : context(c), pool(p) {}
    asio_context* context; // null once the context is destroyed (under mutex)
    threadpool& pool;
    std::atomic<std::size_t> inflight{0}; // functions counted in (enter), not yet destroyed
    std::atomic<std::size_t> work{0};     // executors tracking outstanding work
    std::atomic<bool> stopped{false};
    std::mutex mutex;
    std::condition_variable done;     // a count reached zero, or stop()
    std::vector<detail::task> parked; // submitted after stop(), not run (under mutex)
  };

  // A count that join() waits on. It reaches zero only under the mutex, where join() looks: so
  // a join() that sees zero has nobody left inside count_down (the context may die at once).
  //
  // The work count's count_up may be relaxed: it is sequenced before the executor that tracks
  // it is handed on, and join() owes a wait only to what was tracked before it was called. A
  // function that submits more counts up before its own count_down (acq_rel) releases it, and
  // the counter's modification order then puts the count up first, so the count cannot touch
  // zero between the two.
  static void count_up(std::atomic<std::size_t>& count) noexcept {
    count.fetch_add(1, std::memory_order_relaxed);
  }
  static void count_down(state& s, std::atomic<std::size_t>& count) noexcept {
    std::size_t c = count.load(std::memory_order_relaxed);
    for (;;) {
      if (c == 1) {
        bool orphaned = false;
        {
          std::lock_guard<std::mutex> lock(s.mutex);
          // acq_rel: what the function did happens before join() returns (its acquire loads).
          if (count.fetch_sub(1, std::memory_order_acq_rel) == 1) {
            s.done.notify_all();
            // The last executor tracking work of a destroyed context: the state goes with it.
            orphaned = s.context == nullptr && s.work.load(std::memory_order_relaxed) == 0 &&
                       s.inflight.load(std::memory_order_relaxed) == 0;
          }
        }
        if (orphaned) {
          delete &s;
        }
        return;
      }
      // acq_rel, as above; from c >= 2 the count stays above zero.
      if (count.compare_exchange_weak(c, c - 1, std::memory_order_acq_rel,
                                      std::memory_order_relaxed)) {
        return;
      }
    }
  }

  // Counts a function in before it is run or queued; false when the context is stopped (the
  // count is taken all the same: the caller hands it to a finisher). (AC1) and (AC2) seq_cst:
  // see stop().
  static bool enter(state& s) noexcept {
    s.inflight.fetch_add(1, std::memory_order_seq_cst); // (AC1)
    ASYNC_PERTURB();                                    // counted, the flag not yet read
    return !s.stopped.load(std::memory_order_seq_cst);  // (AC2)
  }

  // Drops one function's count, however its run ends, after the last of its state is gone
  // (which may use the context's services: a strand's).
  class finisher {
  public:
    explicit finisher(state& s) noexcept : state_(&s) {} // adopts the count that enter() took
    finisher(finisher&& other) noexcept : state_(other.state_) { other.state_ = nullptr; }
    finisher(const finisher&) = delete;
    finisher& operator=(const finisher&) = delete;
    finisher& operator=(finisher&&) = delete;
    ~finisher() {
      if (state_ != nullptr) {
        count_down(*state_, state_->inflight);
      }
    }
    state* owner() const noexcept { return state_; }

  private:
    state* state_;
  };

  // The functions of which contexts the calling thread is running, innermost first (a
  // function may dispatch one of another context inline). The destructor looks for its own.
  struct running_frame {
    explicit running_frame(const state* s) noexcept : owner(s), below(top()) { top() = this; }
    running_frame(const running_frame&) = delete;
    running_frame& operator=(const running_frame&) = delete;
    ~running_frame() { top() = below; }
    static running_frame*& top() noexcept {
      static thread_local running_frame* innermost = nullptr;
      return innermost;
    }
    static bool runs(const state* s) noexcept {
      for (const running_frame* f = top(); f != nullptr; f = f->below) {
        if (f->owner == s) {
          return true;
        }
      }
      return false;
    }
    const state* owner;
    running_frame* below;
  };

  // A queued function with its count. The finisher is declared first, so destroyed last: the
  // function's state is gone before the count drops. threadpool::cancel_pending() leaves it
  // queued: Asio expects every function it submits to a running context to run (a strand marks
  // itself busy when it submits its invoker, and only the invoker's run clears the mark). Its
  // owner is the context's state: a stopped context discards its own (discard_owned).
  template <typename F>
  struct counted_function {
    using async_keep_on_cancel = std::true_type;
    finisher count;
    F f;
    void operator()() {
      // relaxed: a function that misses a stop() made meanwhile was running when it came.
      if (count.owner()->stopped.load(std::memory_order_relaxed)) {
        return; // not run: destroyed with the task
      }
      const running_frame frame(count.owner());
      f();
    }
    const void* async_owner() const noexcept { return count.owner(); }
  };

  // Queues f on the pool; after stop(), sets it aside instead.
  template <typename F>
  static void submit(state& s, F&& f) {
    using function = typename std::decay<F>::type;
    if (!enter(s)) {
      set_aside(s, std::forward<F>(f));
      return;
    }
    s.pool.execute(counted_function<function>{finisher(s), function(std::forward<F>(f))});
  }

  // A function submitted after stop() (its count taken by enter): kept, unrun, for the
  // destructor, which destroys it after the services' shutdown; dropped at once when the
  // context is gone.
  template <typename F>
  static void set_aside(state& s, F&& f) {
    const finisher count(s); // declared first: drops the count after the lock is released
    std::lock_guard<std::mutex> lock(s.mutex);
    if (s.context != nullptr) {
      s.parked.emplace_back(std::forward<F>(f)); // throws std::bad_alloc: f dropped
    }
  }

  // Waits: with the context running, until no function is in flight and no work is tracked
  // (or until stop()); once stopped, until no function is in flight. Then the functions still
  // queued, or waiting in a worker's next slot (behind a running task, perhaps the caller's),
  // are discarded here, and those that the pool's workers reach are destroyed unrun; what is
  // left runs (it was running when stop() came), or is in a worker's hands, and counts down
  // when done. A worker that retires meanwhile hands its queue back to the lanes, and a
  // running task may fill its next slot again, so the pool is looked at again now and then.
  void settle() {
    state& s = *state_;
    std::chrono::milliseconds pause(1);
    std::unique_lock<std::mutex> lock(s.mutex);
    for (;;) {
      if (!s.stopped.load(std::memory_order_seq_cst)) {
        if (s.inflight.load(std::memory_order_acquire) == 0 &&
            s.work.load(std::memory_order_acquire) == 0) {
          return;
        }
        s.done.wait(lock);
        continue;
      }
      if (s.inflight.load(std::memory_order_seq_cst) == 0) { // (AC4)
        return;
      }
      lock.unlock();
      try {
        s.pool.discard_owned(&s); // their destructors count down (the mutex is free)
      } catch (const std::bad_alloc&) {
        // nothing discarded: looked at again after the pause
      }
      lock.lock();
      if (s.inflight.load(std::memory_order_seq_cst) == 0) {
        return;
      }
      s.done.wait_for(lock, pause);
      if (pause < std::chrono::milliseconds(64)) {
        pause *= 2;
      }
    }
  }

  // On a context that is not an io_context, Asio's reactor (sockets, timers) gets a scheduler
  // of its own, registered before the reactor, with a thread of its own that waits for events
  // and completes operations. The services shut down in the reverse order of registration: the
  // reactor first, destroying its pending operations while that thread still ran some (a use
  // after free). Shutting that scheduler down first joins its thread and destroys what it had
  // queued while the reactor is still whole; its own turn later finds nothing to do.
  void stop_reactor_thread() {
    if (detail::net::has_service<detail::net::detail::scheduler>(*this)) {
      detail::net::use_service<detail::net::detail::scheduler>(*this).shutdown();
    }
  }

  // Destroys the functions set aside after stop() (their destructors may set more aside);
  // `last`: then marks the context gone, and says whether nothing refers to the state any
  // more (otherwise the last executor tracking work deletes it).
  bool drain_parked(bool last) {
    state& s = *state_;
    for (;;) {
      std::vector<detail::task> doomed;
      {
        std::lock_guard<std::mutex> lock(s.mutex);
        if (s.parked.empty()) {
          if (!last) {
            return false;
          }
          s.context = nullptr;
          return s.work.load(std::memory_order_relaxed) == 0 &&
                 s.inflight.load(std::memory_order_relaxed) == 0;
        }
        doomed.swap(s.parked);
      }
      doomed.clear(); // outside the lock
    }
  }

  state* state_;
};

/// The executor of an asio_context: a pointer to the context's shared state and its properties
/// (blocking, outstanding_work, relationship), which require() changes. Executors compare
/// equal when they have the same context and the same properties. A tracked executor
/// (outstanding_work.tracked) counts in asio_context::outstanding_work() for as long as it
/// exists, and may outlive the context (what it submits then is dropped unrun); an untracked
/// one must not be used after the context is destroyed. Thread-safe as a value (copies may be
/// used from any thread).
///
/// Properties (query and require): blocking (possibly, the default: dispatch runs at once on
/// the pool's threads; never: post and defer; always: runs at once on the pool's threads, else
/// waits for the function to finish), outstanding_work (untracked, the default; tracked),
/// relationship (fork, the default; continuation: accepted, no effect). Queries only: context
/// (the asio_context), mapping (thread), occupancy (the pool's size). Not offered: allocator
/// (prefer() passes over it: tasks are allocated as threadpool::execute allocates them) and
/// bulk execution.
class asio_context::executor_type {
  using blocking_t = detail::net::execution::blocking_t;
  using outstanding_work_t = detail::net::execution::outstanding_work_t;
  using relationship_t = detail::net::execution::relationship_t;
  using mapping_t = detail::net::execution::mapping_t;
  using occupancy_t = detail::net::execution::occupancy_t;

  static constexpr unsigned never_bit = 1;        // blocking.never
  static constexpr unsigned tracked_bit = 2;      // outstanding_work.tracked (else untracked)
  static constexpr unsigned continuation_bit = 4; // relationship.continuation (else fork)
  static constexpr unsigned always_bit = 8;       // blocking.always (neither: possibly)

public:
  /// The same context and properties; a copy of a tracked executor counts as outstanding work
  /// of its own. Thread-safe (lock-free).
  executor_type(const executor_type& other) noexcept : state_(other.state_), bits_(other.bits_) {
    track();
  }
  /// The same context and properties; a tracked executor's count moves over (`other` is left
  /// untracked). Thread-safe (lock-free).
  executor_type(executor_type&& other) noexcept : state_(other.state_), bits_(other.bits_) {
    other.bits_ &= ~tracked_bit; // the count moves with it
  }
  /// Copy assignment: this executor's own count, if tracked, is dropped; `other`'s is copied as
  /// by the copy constructor. Not thread-safe (for this executor; `other` may be used
  /// meanwhile).
  executor_type& operator=(const executor_type& other) noexcept {
    if (this != &other) {
      executor_type copy(other);
      swap(copy);
    }
    return *this;
  }
  /// Move assignment: this executor's own count, if tracked, is dropped; `other`'s moves over.
  /// Not thread-safe (for this executor and `other`).
  executor_type& operator=(executor_type&& other) noexcept {
    if (this != &other) {
      executor_type moved(std::move(other));
      swap(moved);
    }
    return *this;
  }
  /// A tracked executor's count of outstanding work ends here (join() may then return).
  /// Not thread-safe (for this executor).
  ~executor_type() { untrack(); }

  // ---- Asio's queries ---------------------------------------------------------------------

  /// execution::context: the asio_context (not to be used once it is destroyed). Thread-safe
  /// (lock-free).
  detail::net::execution_context& query(detail::net::execution::context_t) const noexcept {
    return *state_->context;
  }
  /// execution::blocking: possibly (the default), never or always. Thread-safe (lock-free).
  blocking_t query(blocking_t) const noexcept {
    return (bits_ & never_bit) != 0    ? blocking_t(blocking_t::never)
           : (bits_ & always_bit) != 0 ? blocking_t(blocking_t::always)
                                       : blocking_t(blocking_t::possibly);
  }
  /// execution::outstanding_work: untracked (the default) or tracked. Thread-safe (lock-free).
  outstanding_work_t query(outstanding_work_t) const noexcept {
    return (bits_ & tracked_bit) != 0 ? outstanding_work_t(outstanding_work_t::tracked)
                                      : outstanding_work_t(outstanding_work_t::untracked);
  }
  /// execution::relationship: fork (the default) or continuation. Thread-safe (lock-free).
  relationship_t query(relationship_t) const noexcept {
    return (bits_ & continuation_bit) != 0 ? relationship_t(relationship_t::continuation)
                                           : relationship_t(relationship_t::fork);
  }
  /// execution::mapping: thread (functions run on the pool's threads). A constant; thread-safe.
  static constexpr mapping_t query(mapping_t) noexcept { return mapping_t::thread; }
  /// execution::occupancy: the pool's size now (a paused pool: 0). Thread-safe (lock-free).
  std::size_t query(occupancy_t) const noexcept { return state_->pool.size(); }

  // ---- Asio's requirements ----------------------------------------------------------------
  // Each returns a new executor of the same context with one property changed; this one is
  // left as it is.

  /// An executor whose execute() runs f at once when called on one of the pool's tasks (the
  /// default; dispatch()). Thread-safe (lock-free).
  executor_type require(blocking_t::possibly_t) const noexcept {
    return with(bits_ & ~(never_bit | always_bit));
  }
  /// An executor whose execute() always queues f (post(), defer()). Thread-safe (lock-free).
  executor_type require(blocking_t::never_t) const noexcept {
    return with((bits_ & ~always_bit) | never_bit);
  }
  /// An executor whose execute() returns only once f has run (or been dropped by stop()).
  /// Thread-safe (lock-free).
  executor_type require(blocking_t::always_t) const noexcept {
    return with((bits_ & ~never_bit) | always_bit);
  }
  /// An executor that does not count as outstanding work (the default). Thread-safe
  /// (lock-free).
  executor_type require(outstanding_work_t::untracked_t) const noexcept {
    return with(bits_ & ~tracked_bit);
  }
  /// An executor that counts as outstanding work for as long as it exists: join() waits for
  /// it (what an executor_work_guard holds). Thread-safe (lock-free).
  executor_type require(outstanding_work_t::tracked_t) const noexcept {
    return with(bits_ | tracked_bit);
  }
  /// relationship.fork (the default). Thread-safe (lock-free).
  executor_type require(relationship_t::fork_t) const noexcept {
    return with(bits_ & ~continuation_bit);
  }
  /// relationship.continuation: accepted and reported by query(), with no other effect.
  /// Thread-safe (lock-free).
  executor_type require(relationship_t::continuation_t) const noexcept {
    return with(bits_ | continuation_bit);
  }

  // ---- running functions ------------------------------------------------------------------

  /// Runs f() on the pool. With blocking.possibly (dispatch), when the calling thread runs one
  /// of the pool's tasks, f runs at once, before execute returns (an exception from f then
  /// reaches the caller); otherwise, and always with blocking.never (post, defer), it is
  /// queued as the pool's execute() does. With blocking.always, f runs at once on the pool's
  /// threads, and from any other thread execute queues it and waits until it has run (or been
  /// dropped by stop()), then throws what f threw; with the pool paused at size 0, until the
  /// pool is resized. After stop(), f is not run (see asio_context). O(1) besides the call or
  /// the wait. Thread-safe (may block: blocking.always waits for f).
  /// @throws std::bad_alloc when memory runs out (nothing queued), and what f throws when it
  ///         runs at once or with blocking.always.
  template <typename F>
  void execute(F&& f) const {
    if ((bits_ & always_bit) != 0) {
      run_and_wait(std::forward<F>(f));
    } else if ((bits_ & never_bit) == 0) {
      run_here_or_submit(std::forward<F>(f));
    } else {
      submit(*state_, std::forward<F>(f));
    }
  }

  // ---- the Networking TS's executor model ---------------------------------------------------
  // What Asio's older executors require (the polymorphic net::executor, strands and work
  // guards of that model, and every default of a program built with
  // BOOST_ASIO_USE_TS_EXECUTOR_AS_DEFAULT or ASIO_USE_TS_EXECUTOR_AS_DEFAULT). The allocator
  // is not used: the pool allocates a task as execute() does.

  /// Counts outstanding work, as a tracked executor does while it exists (join() waits until
  /// every on_work_started() has had its on_work_finished()). Thread-safe (lock-free).
  void on_work_started() const noexcept { count_up(state_->work); }
  /// Ends one on_work_started(): join() may then return. Thread-safe (may block: the last
  /// one takes the context's lock briefly to wake join()).
  void on_work_finished() const noexcept { count_down(*state_, state_->work); }

  /// Runs f() at once when the calling thread runs one of the pool's tasks, else queues it.
  /// Thread-safe (may block: f may run inside the call).
  /// @throws std::bad_alloc when memory runs out (nothing queued), and what f throws when it
  ///         runs at once.
  template <typename F, typename Allocator>
  void dispatch(F&& f, const Allocator&) const {
    run_here_or_submit(std::forward<F>(f));
  }
  /// Queues f() on the pool. Thread-safe (may block: takes a lane's lock for a moment).
  /// @throws std::bad_alloc when memory runs out (nothing queued).
  template <typename F, typename Allocator>
  void post(F&& f, const Allocator&) const {
    submit(*state_, std::forward<F>(f));
  }
  /// Queues f() on the pool (as post). Thread-safe (may block).
  /// @throws std::bad_alloc when memory runs out (nothing queued).
  template <typename F, typename Allocator>
  void defer(F&& f, const Allocator&) const {
    submit(*state_, std::forward<F>(f));
  }

  /// The context. (Asio's older executors named it so.) Thread-safe (lock-free).
  asio_context& context() const noexcept { return *state_->context; }

  /// Whether the calling thread runs one of the pool's tasks. Thread-safe (lock-free).
  bool running_in_this_thread() const noexcept { return state_->pool.running_in_this_thread(); }

  /// Equal when both have the same context and the same properties. Thread-safe (lock-free).
  friend bool operator==(const executor_type& a, const executor_type& b) noexcept {
    return a.state_ == b.state_ && a.bits_ == b.bits_;
  }
  /// Not equal: another context, or other properties. Thread-safe (lock-free).
  friend bool operator!=(const executor_type& a, const executor_type& b) noexcept {
    return !(a == b);
  }

private:
  friend class asio_context;

  explicit executor_type(state* s, unsigned bits = 0) noexcept : state_(s), bits_(bits) { track(); }

  // On one of the pool's threads: runs f here, counted while it runs as a queued function is
  // (the caller may be a task of another context over the same pool, or a plain pool task,
  // which join() does not wait for).
  template <typename F>
  bool run_here(F&& f) const {
    if (!state_->pool.running_in_this_thread()) {
      return false;
    }
    state& s = *state_;
    if (!enter(s)) {
      set_aside(s, std::forward<F>(f));
      return true;
    }
    const finisher count(s); // declared first: drops after the function's state is gone
    typename std::decay<F>::type local(std::forward<F>(f));
    const running_frame frame(&s);
    local();
    return true;
  }

  template <typename F>
  void run_here_or_submit(F&& f) const {
    if (!run_here(std::forward<F>(f))) {
      submit(*state_, std::forward<F>(f));
    }
  }

  // blocking.always from outside the pool: the queued call refers to the caller's function
  // and settles the caller's wait when it has run, or when it is destroyed unrun.
  template <typename F>
  struct waited_call {
    F* f;
    std::promise<void> settled;
    bool armed; // owns the promise, not yet settled

    waited_call(F* function, std::promise<void>&& p) noexcept
        : f(function), settled(std::move(p)), armed(true) {}
    waited_call(waited_call&& other) noexcept
        : f(other.f), settled(std::move(other.settled)), armed(other.armed) {
      other.armed = false;
    }
    waited_call(const waited_call&) = delete;
    waited_call& operator=(const waited_call&) = delete;
    waited_call& operator=(waited_call&&) = delete;
    ~waited_call() {
      if (armed) {
        settled.set_value(); // dropped unrun (stop): the caller goes on
      }
    }
    void operator()() {
      armed = false;
      try {
        (*f)();
      } catch (...) {
        settled.set_exception(std::current_exception());
        return;
      }
      settled.set_value();
    }
  };

  template <typename F>
  void run_and_wait(F&& f) const {
    typename std::decay<F>::type local(std::forward<F>(f));
    if (run_here(std::move(local))) {
      return;
    }
    state& s = *state_;
    if (!enter(s)) {
      const finisher count(s);
      return; // stopped: it would not run, so nothing to wait for (not set aside: helper-3)
    }
    std::promise<void> settled;
    std::future<void> done = settled.get_future();
    using call = waited_call<decltype(local)>;
    s.pool.execute(counted_function<call>{finisher(s), call(&local, std::move(settled))});
    done.get(); // rethrows what f threw
  }

  executor_type with(unsigned bits) const noexcept { return executor_type(state_, bits); }

  void track() noexcept {
    if ((bits_ & tracked_bit) != 0) {
      count_up(state_->work);
    }
  }
  void untrack() noexcept {
    if ((bits_ & tracked_bit) != 0) {
      count_down(*state_, state_->work);
    }
  }
  void swap(executor_type& other) noexcept {
    std::swap(state_, other.state_);
    std::swap(bits_, other.bits_);
  }

  state* state_;
  unsigned bits_;
};

inline asio_context::executor_type asio_context::get_executor() noexcept {
  return executor_type(state_);
}

inline asio_context::executor_type asio_context::executor() noexcept {
  return executor_type(state_);
}

} // namespace async

#endif // ASYNC_ASIO_H
