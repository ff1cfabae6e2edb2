// SPDX-License-Identifier: BSL-1.0
//
// local_queue: a worker's own queue of the pool, the tasks its running tasks posted beyond the
// first. The owner pushes and pops at the back (the newest task, the hottest in cache); idle
// workers steal at the front (the oldest, the least likely to be hot). One mutex per queue:
// the owner's push and pop touch a line nobody else writes unless a thief comes.
#ifndef ASYNC_DETAIL_LOCAL_QUEUE_H
#define ASYNC_DETAIL_LOCAL_QUEUE_H

#include "config.h"

#include "ring_deque.h"
#include "task.h"

#include <mutex>
#include <utility>

namespace async {
namespace detail {

/// A mutex and a ring of tasks. Thread-safe.
class local_queue {
public:
  /// Owner: appends t. Throws std::bad_alloc (nothing appended, t untouched) when memory runs
  /// out.
  void push(task&& t) {
    std::lock_guard<std::mutex> lock(mutex_);
    tasks_.push_back(std::move(t));
  }

  /// Owner: the newest task, if any.
  bool pop_newest(task& out) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (tasks_.empty()) {
      return false;
    }
    out = std::move(tasks_.back());
    tasks_.pop_back();
    return true;
  }

  /// Another worker: the oldest task, if any.
  bool steal_oldest(task& out) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (tasks_.empty()) {
      return false;
    }
    out = std::move(tasks_.front());
    tasks_.pop_front();
    return true;
  }

  /// Puts t back at the front (a retiring owner with the task it could not run).
  void push_oldest(task&& t) {
    std::lock_guard<std::mutex> lock(mutex_);
    tasks_.push_front(std::move(t));
  }

  /// The queue's lock, for a caller that must see several queues at one moment; tasks() is
  /// its view of the ring while it holds the lock.
  std::unique_lock<std::mutex> lock() { return std::unique_lock<std::mutex>(mutex_); }
  ring_deque<task>& tasks(const std::unique_lock<std::mutex>& held) noexcept {
    static_cast<void>(held);
    return tasks_;
  }

private:
  std::mutex mutex_;
  ring_deque<task> tasks_;
};

} // namespace detail
} // namespace async

#endif // ASYNC_DETAIL_LOCAL_QUEUE_H
