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
//
// (net = boost::asio or asio.) Handlers run as the pool's execute() tasks: an exception that
// escapes one goes to the pool's exception handler (threadpool::set_exception_handler;
// std::terminate by default) and the pool goes on. Resizing the pool, pausing it at size 0
// included, is fine while handlers run or wait. threadpool::cancel_pending() leaves the
// context's functions queued (Asio expects each to run: a strand would stay locked for good).
#ifndef ASYNC_ASIO_H
#define ASYNC_ASIO_H

#include "threadpool.h"

#if defined(ASYNC_ASIO_STANDALONE)
#include <asio/execution.hpp>
#include <asio/execution_context.hpp>
#else
#include <boost/asio/execution.hpp>
#include <boost/asio/execution_context.hpp>
#endif

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdio>
#include <mutex>
#include <stdexcept>
#include <type_traits>
#include <utility>

namespace async {
namespace detail {
#if defined(ASYNC_ASIO_STANDALONE)
namespace net = ::asio;
#else
namespace net = ::boost::asio;
#endif
} // namespace detail

/// An Asio execution context whose executor runs functions on an async::threadpool. The pool
/// must outlive the context. Thread-safe, except for construction and destruction.
class asio_context : public detail::net::execution_context {
public:
  class executor_type;

  /// A context over `pool`. Not thread-safe (construction).
  explicit asio_context(threadpool& pool) : pool_(pool) {}

  asio_context(const asio_context&) = delete;
  asio_context& operator=(const asio_context&) = delete;

  /// Waits as join() does, then shuts the context's services down (the strands' included);
  /// with the pool paused at size 0 it waits until the pool is resized. From one of the pool's
  /// tasks, only a context with nothing to wait for may be destroyed (no function submitted
  /// through it queued or running, no executor of it tracking work: after join(), or never
  /// used); otherwise the task would wait on the pool, perhaps for itself, and the program
  /// ends (a message on stderr, then std::terminate). Not thread-safe (destruction).
  ~asio_context() {
    if (pool_.running_in_this_thread() && !done_now()) {
      std::fputs("async::asio_context: destroyed from a task of its pool while functions "
                 "submitted through it are queued or running, or an executor of it tracks "
                 "work (std::terminate)\n",
                 stderr);
      std::terminate();
    }
    wait_until_done();
    shutdown();
    destroy();
  }

  /// An executor of this context (blocking.possibly, outstanding_work.untracked,
  /// relationship.fork). Thread-safe.
  executor_type get_executor() noexcept;

  /// The pool that runs the context's functions. Thread-safe.
  threadpool& pool() const noexcept { return pool_; }

  /// Blocks until no function submitted through this context's executors is queued or running
  /// (those they submit included) and no executor of it tracks outstanding work
  /// (outstanding_work.tracked, such as an executor_work_guard's). Throws std::logic_error when
  /// called from one of the pool's tasks (it could wait for itself). Thread-safe (blocks).
  void join() {
    if (pool_.running_in_this_thread()) {
      throw std::logic_error("async::asio_context: join() from one of the pool's tasks");
    }
    wait_until_done();
  }

  /// How many executors of this context track outstanding work right now. Thread-safe.
  std::size_t outstanding_work() const noexcept { return work_.load(std::memory_order_acquire); }

private:
  // A count that join() waits on. It reaches zero only under mutex_, where join() looks: so a
  // join() that sees zero has nobody left inside count_down (the context may die at once).
  //
  // count_up may be relaxed: it is sequenced before the submission it counts (or, for work,
  // before the executor that tracks it is handed on), and join() owes a wait only to what was
  // submitted before it was called. A task that submits more counts up before its own
  // count_down (acq_rel) releases it, and the counter's modification order then puts the count
  // up first, so the count cannot touch zero between the two.
  void count_up(std::atomic<std::size_t>& count) noexcept {
    count.fetch_add(1, std::memory_order_relaxed);
  }
  void count_down(std::atomic<std::size_t>& count) noexcept {
    std::size_t c = count.load(std::memory_order_relaxed);
    for (;;) {
      if (c == 1) {
        std::lock_guard<std::mutex> lock(mutex_);
        // acq_rel: what the function did happens before join() returns (its acquire loads).
        if (count.fetch_sub(1, std::memory_order_acq_rel) == 1) {
          done_.notify_all();
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

  // Whether nothing is left to wait for (checked under mutex_, where the counts reach zero:
  // nobody is left inside count_down then).
  bool done_now() {
    std::lock_guard<std::mutex> lock(mutex_);
    return inflight_.load(std::memory_order_acquire) == 0 &&
           work_.load(std::memory_order_acquire) == 0;
  }

  void wait_until_done() {
    std::unique_lock<std::mutex> lock(mutex_);
    while (inflight_.load(std::memory_order_acquire) != 0 ||
           work_.load(std::memory_order_acquire) != 0) {
      done_.wait(lock);
    }
  }

  // Counts a function from submission to the destruction of the last of its state (which may
  // use the context's services: a strand's), however the task ends.
  class finisher {
  public:
    explicit finisher(asio_context* context) noexcept : context_(context) {
      context_->count_up(context_->inflight_);
    }
    finisher(finisher&& other) noexcept : context_(other.context_) { other.context_ = nullptr; }
    finisher(const finisher&) = delete;
    finisher& operator=(const finisher&) = delete;
    finisher& operator=(finisher&&) = delete;
    ~finisher() {
      if (context_ != nullptr) {
        context_->count_down(context_->inflight_);
      }
    }

  private:
    asio_context* context_;
  };

  // A submitted function with its count. The finisher is declared first, so destroyed last:
  // the function's state is gone before the count drops. threadpool::cancel_pending() leaves
  // it queued: Asio expects every function it submits to run (a strand marks itself busy when
  // it submits its invoker, and only the invoker's run clears the mark).
  template <typename F>
  struct counted_function {
    using async_keep_on_cancel = std::true_type;
    finisher count;
    F f;
    void operator()() { f(); }
  };

  template <typename F>
  void submit(F&& f) {
    using function = typename std::decay<F>::type;
    pool_.execute(counted_function<function>{finisher(this), function(std::forward<F>(f))});
  }

  threadpool& pool_;
  std::atomic<std::size_t> inflight_{0}; // functions submitted and not yet destroyed
  std::atomic<std::size_t> work_{0};     // executors tracking outstanding work
  std::mutex mutex_;
  std::condition_variable done_;
};

/// The executor of an asio_context: a pointer to the context and its properties (blocking,
/// outstanding_work, relationship), which require() changes. Executors compare equal when
/// they have the same context and the same properties. A tracked executor (outstanding_work
/// .tracked) counts in asio_context::outstanding_work() for as long as it exists. Thread-safe
/// as a value (copies may be used from any thread).
class asio_context::executor_type {
  using blocking_t = detail::net::execution::blocking_t;
  using outstanding_work_t = detail::net::execution::outstanding_work_t;
  using relationship_t = detail::net::execution::relationship_t;

  static constexpr unsigned never_bit = 1;        // blocking.never (else possibly)
  static constexpr unsigned tracked_bit = 2;      // outstanding_work.tracked (else untracked)
  static constexpr unsigned continuation_bit = 4; // relationship.continuation (else fork)

public:
  executor_type(const executor_type& other) noexcept
      : context_(other.context_), bits_(other.bits_) {
    track();
  }
  executor_type(executor_type&& other) noexcept : context_(other.context_), bits_(other.bits_) {
    other.bits_ &= ~tracked_bit; // the count moves with it
  }
  executor_type& operator=(const executor_type& other) noexcept {
    if (this != &other) {
      executor_type copy(other);
      swap(copy);
    }
    return *this;
  }
  executor_type& operator=(executor_type&& other) noexcept {
    if (this != &other) {
      executor_type moved(std::move(other));
      swap(moved);
    }
    return *this;
  }
  ~executor_type() { untrack(); }

  // ---- Asio's queries ---------------------------------------------------------------------

  detail::net::execution_context& query(detail::net::execution::context_t) const noexcept {
    return *context_;
  }
  blocking_t query(blocking_t) const noexcept {
    return (bits_ & never_bit) != 0 ? blocking_t(blocking_t::never)
                                    : blocking_t(blocking_t::possibly);
  }
  outstanding_work_t query(outstanding_work_t) const noexcept {
    return (bits_ & tracked_bit) != 0 ? outstanding_work_t(outstanding_work_t::tracked)
                                      : outstanding_work_t(outstanding_work_t::untracked);
  }
  relationship_t query(relationship_t) const noexcept {
    return (bits_ & continuation_bit) != 0 ? relationship_t(relationship_t::continuation)
                                           : relationship_t(relationship_t::fork);
  }

  // ---- Asio's requirements ----------------------------------------------------------------

  executor_type require(blocking_t::possibly_t) const noexcept { return with(never_bit, false); }
  executor_type require(blocking_t::never_t) const noexcept { return with(never_bit, true); }
  executor_type require(outstanding_work_t::untracked_t) const noexcept {
    return with(tracked_bit, false);
  }
  executor_type require(outstanding_work_t::tracked_t) const noexcept {
    return with(tracked_bit, true);
  }
  executor_type require(relationship_t::fork_t) const noexcept {
    return with(continuation_bit, false);
  }
  executor_type require(relationship_t::continuation_t) const noexcept {
    return with(continuation_bit, true);
  }

  // ---- running functions ------------------------------------------------------------------

  /// Runs f() on the pool. With blocking.possibly (dispatch), when the calling thread runs one
  /// of the pool's tasks, f runs at once, before execute returns (an exception from f then
  /// reaches the caller); otherwise, and always with blocking.never (post, defer), it is
  /// queued as the pool's execute() does. Throws std::bad_alloc (nothing queued) when memory
  /// runs out.
  template <typename F>
  void execute(F&& f) const {
    if ((bits_ & never_bit) == 0) {
      run_here_or_submit(std::forward<F>(f));
    } else {
      context_->submit(std::forward<F>(f));
    }
  }

  // ---- the Networking TS's executor model ---------------------------------------------------
  // What Asio's older executors require (the polymorphic net::executor, strands and work
  // guards of that model, and every default of a program built with
  // BOOST_ASIO_USE_TS_EXECUTOR_AS_DEFAULT or ASIO_USE_TS_EXECUTOR_AS_DEFAULT). The allocator
  // is not used: the pool allocates a task as execute() does.

  /// Counts outstanding work, as a tracked executor does while it exists (join() waits until
  /// every on_work_started() has had its on_work_finished()).
  void on_work_started() const noexcept { context_->count_up(context_->work_); }
  void on_work_finished() const noexcept { context_->count_down(context_->work_); }

  /// Runs f() at once when the calling thread runs one of the pool's tasks, else queues it.
  template <typename F, typename Allocator>
  void dispatch(F&& f, const Allocator&) const {
    run_here_or_submit(std::forward<F>(f));
  }
  /// Queues f() on the pool.
  template <typename F, typename Allocator>
  void post(F&& f, const Allocator&) const {
    context_->submit(std::forward<F>(f));
  }
  /// Queues f() on the pool (as post).
  template <typename F, typename Allocator>
  void defer(F&& f, const Allocator&) const {
    context_->submit(std::forward<F>(f));
  }

  /// The context. (Asio's older executors named it so.)
  asio_context& context() const noexcept { return *context_; }

  /// Whether the calling thread runs one of the pool's tasks.
  bool running_in_this_thread() const noexcept { return context_->pool_.running_in_this_thread(); }

  friend bool operator==(const executor_type& a, const executor_type& b) noexcept {
    return a.context_ == b.context_ && a.bits_ == b.bits_;
  }
  friend bool operator!=(const executor_type& a, const executor_type& b) noexcept {
    return !(a == b);
  }

private:
  friend class asio_context;

  explicit executor_type(asio_context* context, unsigned bits = 0) noexcept
      : context_(context), bits_(bits) {
    track();
  }

  template <typename F>
  void run_here_or_submit(F&& f) const {
    if (context_->pool_.running_in_this_thread()) {
      // Counted while it runs, as a queued function is: the caller may be a task of another
      // context over the same pool (or a plain pool task), which join() does not wait for.
      // The count is declared first, so it drops after the function's state is gone.
      const finisher count(context_);
      typename std::decay<F>::type local(std::forward<F>(f));
      local();
      return;
    }
    context_->submit(std::forward<F>(f));
  }

  executor_type with(unsigned bit, bool on) const noexcept {
    return executor_type(context_, on ? (bits_ | bit) : (bits_ & ~bit));
  }

  void track() noexcept {
    if ((bits_ & tracked_bit) != 0) {
      context_->count_up(context_->work_);
    }
  }
  void untrack() noexcept {
    if ((bits_ & tracked_bit) != 0) {
      context_->count_down(context_->work_);
    }
  }
  void swap(executor_type& other) noexcept {
    std::swap(context_, other.context_);
    std::swap(bits_, other.bits_);
  }

  asio_context* context_;
  unsigned bits_;
};

inline asio_context::executor_type asio_context::get_executor() noexcept {
  return executor_type(this);
}

} // namespace async

#endif // ASYNC_ASIO_H
