// SPDX-License-Identifier: BSL-1.0
//
// task_queue: a lock, a ring of tasks and the ring's count. The pool has two kinds: each
// worker's own queue (the tasks its running tasks posted beyond the first), and the lanes of
// the shared queue (the tasks posted from outside). Both are first in, first out, for the
// owner and for the workers that take from them (the next slot already keeps the newest task
// of a chain hot). Whoever looks without taking reads the count first, so that a look over
// many empty queues writes none of their lines.
//
// The count is stored seq_cst after every push: the pusher then looks at the idle workers
// (detail::idle_workers, (IW1)), and a worker about to park registers before its last look,
// which reads the counts through maybe_holds_tasks(): either it sees the task or the pusher
// sees it registered and wakes somebody.
#ifndef ASYNC_DETAIL_POOL_TASK_QUEUE_H
#define ASYNC_DETAIL_POOL_TASK_QUEUE_H

#include "../config.h"

#include "../word_lock.h"
#include "ring_deque.h"
#include "task.h"

#include <atomic>
#include <cstddef>
#include <mutex>
#include <utility>

namespace async {
namespace detail {

/// Thread-safe. The moves of tasks happen under the queue's lock: a callable's move
/// constructor must not use the pool (see threadpool's requirements on callables).
template <template <typename> class Atom = std::atomic>
class task_queue {
public:
  using lock_type = word_lock<Atom>;

  /// Appends t. Returns whether the queue was empty before. Throws std::bad_alloc (nothing
  /// appended, t untouched) when memory runs out.
  bool push(task&& t) {
    std::lock_guard<lock_type> lock(lock_);
    tasks_.push_back(std::move(t));
    count_.store(tasks_.size(), std::memory_order_seq_cst);
    return tasks_.size() == 1;
  }

  /// Puts t at the front (a retiring worker with the task it could not run). Throws as push.
  void push_front(task&& t) {
    std::lock_guard<lock_type> lock(lock_);
    tasks_.push_front(std::move(t));
    count_.store(tasks_.size(), std::memory_order_seq_cst);
  }

  /// The oldest task, if any.
  bool pop(task& out) {
    std::lock_guard<lock_type> lock(lock_);
    return pop_locked(out);
  }

  /// Owner: puts t at the back and takes the oldest task in its place, in one hold of the lock;
  /// false (t untouched) when the queue is empty. Allocates nothing (one in, one out).
  bool exchange_oldest(task& t) {
    std::lock_guard<lock_type> lock(lock_);
    if (tasks_.empty()) {
      return false;
    }
    task oldest = std::move(tasks_.front());
    tasks_.pop_front();
    tasks_.push_back(std::move(t));
    t = std::move(oldest);
    return true;
  }

  /// False only when the queue was empty at some moment after every push that the caller must
  /// see (seq_cst: pairs with the store of push, as above). A true answer may be stale; pop
  /// decides.
  bool maybe_holds_tasks() const noexcept { return count_.load(std::memory_order_seq_cst) != 0; }

  /// The queue's lock, for a caller that must see or change several queues at one moment;
  /// tasks() is its view of the ring while it holds the lock, and recount() (before it lets go
  /// of the lock) stores the count that maybe_holds_tasks() reads.
  std::unique_lock<lock_type> lock() { return std::unique_lock<lock_type>(lock_); }
  ring_deque<task>& tasks(const std::unique_lock<lock_type>& held) noexcept {
    static_cast<void>(held);
    return tasks_;
  }
  void recount(const std::unique_lock<lock_type>& held) noexcept {
    static_cast<void>(held);
    count_.store(tasks_.size(), std::memory_order_seq_cst);
  }
  /// pop() for a caller that holds the lock.
  bool pop(const std::unique_lock<lock_type>& held, task& out) noexcept {
    static_cast<void>(held);
    return pop_locked(out);
  }

private:
  bool pop_locked(task& out) noexcept {
    if (tasks_.empty()) {
      return false;
    }
    out = std::move(tasks_.front());
    tasks_.pop_front();
    // relaxed: fewer tasks; nobody's decision needs to see it at once.
    count_.store(tasks_.size(), std::memory_order_relaxed);
    return true;
  }

  lock_type lock_;
  ring_deque<task> tasks_;     // guarded by lock_
  Atom<std::size_t> count_{0}; // tasks_.size(), written under lock_, read without it
};

} // namespace detail
} // namespace async

#endif // ASYNC_DETAIL_POOL_TASK_QUEUE_H
