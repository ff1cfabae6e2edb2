// SPDX-License-Identifier: BSL-1.0
// The broker's per-channel queue, chosen at start-up: a mutex + deque baseline, async::queue
// (unbounded, lock-free) or async::bounded_queue (a fixed ring). Publishers' sessions push,
// the channel's one drain pops; nobody waits inside the queue (the broker's flow control
// decides who waits: broker.h).
#ifndef ASYNC_EXAMPLES_PUBSUB_CHANNEL_QUEUE_H
#define ASYNC_EXAMPLES_PUBSUB_CHANNEL_QUEUE_H

#include <async/bounded_queue.h>
#include <async/queue.h>

#include <deque>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <utility>

namespace pubsub {

/// A frame on its way to the subscribers of its channel (shared by all of them).
using message = std::shared_ptr<const std::string>;

enum class queue_kind { mutex_deque, queue, bounded_queue };

inline const char* name_of(queue_kind kind) {
  switch (kind) {
  case queue_kind::mutex_deque:
    return "mutex+deque";
  case queue_kind::queue:
    return "async::queue";
  case queue_kind::bounded_queue:
    return "async::bounded_queue";
  }
  return "?";
}

inline queue_kind kind_from(const std::string& name) {
  if (name == "mutex_deque") {
    return queue_kind::mutex_deque;
  }
  if (name == "queue") {
    return queue_kind::queue;
  }
  if (name == "bounded_queue") {
    return queue_kind::bounded_queue;
  }
  throw std::invalid_argument("unknown queue kind '" + name +
                              "' (mutex_deque, queue or bounded_queue)");
}

/// Many publishers' sessions push, one drain at a time pops. Neither call waits.
class channel_queue {
public:
  virtual ~channel_queue() = default;
  /// Moves `m` in and returns true, or returns false (the queue is full) and leaves `m` as it
  /// was.
  virtual bool try_push(message& m) = 0;
  /// Takes the oldest frame; false when there is none (or the oldest is still being pushed).
  virtual bool try_pop(message& m) = 0;
};

class mutex_deque_channel final : public channel_queue {
public:
  bool try_push(message& m) override {
    std::lock_guard<std::mutex> lock(mutex_);
    items_.push_back(std::move(m));
    return true;
  }
  bool try_pop(message& m) override {
    std::lock_guard<std::mutex> lock(mutex_);
    if (items_.empty()) {
      return false;
    }
    m = std::move(items_.front());
    items_.pop_front();
    return true;
  }

private:
  std::mutex mutex_;
  std::deque<message> items_;
};

class queue_channel final : public channel_queue {
public:
  bool try_push(message& m) override { return queue_.enqueue(std::move(m)); }
  bool try_pop(message& m) override { return queue_.dequeue(m); }

private:
  async::queue<message> queue_;
};

class bounded_queue_channel final : public channel_queue {
public:
  explicit bounded_queue_channel(std::size_t capacity) : queue_(capacity) {}
  // The try call: a full ring leaves `m` untouched.
  bool try_push(message& m) override { return queue_.enqueue(std::move(m)); }
  bool try_pop(message& m) override { return queue_.dequeue(m); }

private:
  async::bounded_queue<message> queue_;
};

inline std::unique_ptr<channel_queue> make_channel(queue_kind kind, std::size_t capacity) {
  switch (kind) {
  case queue_kind::mutex_deque:
    return std::unique_ptr<channel_queue>(new mutex_deque_channel());
  case queue_kind::queue:
    return std::unique_ptr<channel_queue>(new queue_channel());
  case queue_kind::bounded_queue:
    break;
  }
  return std::unique_ptr<channel_queue>(new bounded_queue_channel(capacity));
}

} // namespace pubsub

#endif // ASYNC_EXAMPLES_PUBSUB_CHANNEL_QUEUE_H
