// SPDX-License-Identifier: BSL-1.0
//
// local_queue: a worker's own queue of the pool, the tasks its running tasks posted beyond the
// first. The owner pushes at the back and takes from the front, as idle workers that steal do:
// first in, first out (the next slot already keeps the newest task hot). One mutex per queue:
// the owner's push and pop touch a line nobody else writes unless a thief comes. A thief reads
// the queue's count before it takes the lock, so that a look over many empty queues writes
// none of their lines.
#ifndef ASYNC_DETAIL_LOCAL_QUEUE_H
#define ASYNC_DETAIL_LOCAL_QUEUE_H

#include "config.h"

#include "ring_deque.h"
#include "task.h"

#include <atomic>
#include <cstddef>
#include <mutex>
#include <utility>

namespace async {
namespace detail {

/// A mutex and a ring of tasks. Thread-safe.
class local_queue {
public:
  /// Owner: appends t. Throws std::bad_alloc (nothing appended, t untouched) when memory runs
  /// out.
  /// The count is stored seq_cst after the push: the owner then looks at the sleepers (IW1),
  /// a worker about to park counts itself a sleeper before its last look (IW2), which reads
  /// the count through maybe_holds_tasks(); so either it sees the task or the owner sees it.
  void push(task&& t) {
    std::lock_guard<std::mutex> lock(mutex_);
    tasks_.push_back(std::move(t));
    count_.store(tasks_.size(), std::memory_order_seq_cst);
  }

  /// The owner, and other workers stealing: the oldest task, if any. Oldest first for the owner
  /// too, so that no task waits behind tasks queued after it (a chain that keeps queueing its
  /// next link would otherwise starve what it queued before).
  bool pop_oldest(task& out) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (tasks_.empty()) {
      return false;
    }
    out = std::move(tasks_.front());
    tasks_.pop_front();
    count_.store(tasks_.size(), std::memory_order_relaxed);
    return true;
  }

  /// Owner: puts t at the back and takes the oldest task in its place, in one hold of the lock;
  /// false (t untouched) when the queue is empty. Allocates nothing (one in, one out).
  bool exchange_oldest(task& t) noexcept {
    std::lock_guard<std::mutex> lock(mutex_);
    if (tasks_.empty()) {
      return false;
    }
    task oldest = std::move(tasks_.front());
    tasks_.pop_front();
    tasks_.push_back(std::move(t));
    t = std::move(oldest);
    return true;
  }

  /// Puts t back at the front (a retiring owner with the task it could not run).
  void push_oldest(task&& t) {
    std::lock_guard<std::mutex> lock(mutex_);
    tasks_.push_front(std::move(t));
    count_.store(tasks_.size(), std::memory_order_seq_cst);
  }

  /// Another worker, before pop_oldest: false only when the queue was empty at some moment
  /// after every push it must see (seq_cst: pairs with the store of push, as above). A true
  /// answer may be stale; pop_oldest decides.
  bool maybe_holds_tasks() const noexcept { return count_.load(std::memory_order_seq_cst) != 0; }

  /// The queue's lock, for a caller that must see several queues at one moment; tasks() is
  /// its view of the ring while it holds the lock.
  std::unique_lock<std::mutex> lock() { return std::unique_lock<std::mutex>(mutex_); }
  /// A caller that changed the ring through tasks() calls recount() before it lets go of the
  /// lock (the count that maybe_holds_tasks() reads; seq_cst as in push).
  ring_deque<task>& tasks(const std::unique_lock<std::mutex>& held) noexcept {
    static_cast<void>(held);
    return tasks_;
  }
  void recount(const std::unique_lock<std::mutex>& held) noexcept {
    static_cast<void>(held);
    count_.store(tasks_.size(), std::memory_order_seq_cst);
  }

private:
  std::mutex mutex_;
  ring_deque<task> tasks_;
  std::atomic<std::size_t> count_{0}; // tasks_.size(), written under mutex_, read by thieves
};

} // namespace detail
} // namespace async

#endif // ASYNC_DETAIL_LOCAL_QUEUE_H
