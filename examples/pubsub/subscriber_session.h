// SPDX-License-Identifier: BSL-1.0
// A subscriber's session: reads its subscription, joins its channels, writes its outbox out
// (gathered writes, one chain at a time), holds the channels that find the outbox at its mark,
// and answers the stall sweeper.
#ifndef ASYNC_EXAMPLES_PUBSUB_SUBSCRIBER_SESSION_H
#define ASYNC_EXAMPLES_PUBSUB_SUBSCRIBER_SESSION_H

#include "core.h"

#include <async/bounded_queue.h>

#include <linux/sockios.h>
#include <sys/ioctl.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace pubsub {

namespace detail {

class subscriber_session : public std::enable_shared_from_this<subscriber_session> {
public:
  subscriber_session(core& c, tcp::socket socket)
      : core_(c), socket_(std::move(socket)), id_(c.next_id.fetch_add(1)),
        high_(static_cast<std::int64_t>(c.options.subscriber_backlog)), low_(high_ / 2) {
    core_.sessions.fetch_add(1);
  }
  subscriber_session(const subscriber_session&) = delete;
  subscriber_session& operator=(const subscriber_session&) = delete;
  ~subscriber_session() {
    close_socket(socket_, core_.stopping.load());
    if (!closed_) {
      core_.sessions.fetch_sub(1);
    }
  }

  void start() {
    error_code ignored;
    socket_.set_option(tcp::no_delay(true), ignored); // frames go out as they come
    if (core_.options.subscriber_send_buffer > 0) {
      socket_.set_option(net::socket_base::send_buffer_size(core_.options.subscriber_send_buffer),
                         ignored);
    }
    auto self = shared_from_this();
    net::async_read(socket_, net::buffer(head_, 4), [self](error_code ec, std::size_t) {
      self->guarded([&] { self->on_length(ec); });
    });
  }

  /// From a channel's drain: queues `m`. True when the outbox is at its mark (or beyond) now.
  bool deliver(const message& m) {
    if (dead_.load(std::memory_order_acquire)) {
      return false;
    }
    if (!outbox_->enqueue(m)) { // cannot happen: the outbox has room for the mark's slack
      auto self = shared_from_this();
      net::post(socket_.get_executor(), [self] { self->end("outbox overflow (a defect)"); });
      return false;
    }
    const std::int64_t before = queued_.fetch_add(1, std::memory_order_acq_rel);
    if (before == 0) {
      auto self = shared_from_this();
      net::post(socket_.get_executor(), [self] { self->guarded([&] { self->write_more(); }); });
    }
    return before + 1 >= high_;
  }

  /// From a channel's drain: whether the outbox is at its mark; if so the channel waits until
  /// the writer (or the session's end) resumes it.
  bool hold(channel& c) {
    if (queued_.load(std::memory_order_acquire) < high_) {
      return false;
    }
    std::lock_guard<std::mutex> lock(mutex_);
    // Under the lock the writer takes once it has brought the outbox down: either it sees us,
    // or we see its count.
    if (dead_.load(std::memory_order_acquire) || queued_.load(std::memory_order_acquire) < high_) {
      return false;
    }
    held_.push_back(&c);
    return true;
  }

  /// From the sweeper: whether a write waits (a stall can happen then), or the client has
  /// half-closed (see look()).
  bool worth_a_look() const noexcept {
    return writing_.load(std::memory_order_acquire) || eof_.load(std::memory_order_acquire);
  }

  /// From the sweeper, on the strand. A write waiting: disconnects the subscriber when its
  /// socket's send queue has not shrunk for stall_timeout. Otherwise, after the client's end
  /// of the stream (a half-close, or a close: TCP does not tell them apart), an empty control
  /// frame when nothing else is on its way: a closed client answers it with a reset, and the
  /// next write fails and ends the session; a half-closed one reads and ignores it.
  void look() {
    if (closed_) {
      return;
    }
    if (!writing_.load(std::memory_order_relaxed)) {
      if (eof_.load(std::memory_order_relaxed) && queued_.load(std::memory_order_acquire) == 0) {
        static const message heartbeat =
            std::make_shared<const std::string>(encode(control_channel, ""));
        deliver(heartbeat);
      }
      return;
    }
    const auto now = std::chrono::steady_clock::now();
    int unsent = 0;
    if (::ioctl(socket_.native_handle(), SIOCOUTQ, &unsent) == 0 && unsent < last_unsent_) {
      progress_at_ = now; // the client read something since the last look
    }
    last_unsent_ = unsent;
    if (now - progress_at_ >= core_.options.stall_timeout) {
      core_.stalled.fetch_add(1);
      end("read nothing for " + std::to_string(core_.options.stall_timeout.count()) +
          " ms with frames waiting (stalled); disconnected");
    }
  }

  net::any_io_executor executor() { return socket_.get_executor(); }

private:
  template <typename F>
  void guarded(F&& f) noexcept {
    run_guarded(std::forward<F>(f), [this](const std::string& why) { end(why); });
  }

  // ---- the subscription

  void on_length(error_code ec) {
    if (ec) {
      end("");
      return;
    }
    const std::uint32_t length = get_u32(head_);
    if (length < 4 || length > core_.options.max_frame || length % 2 != 0) {
      refuse();
      return;
    }
    body_.resize(length);
    auto self = shared_from_this();
    net::async_read(
        socket_, net::buffer(&body_[0], body_.size()),
        [self](error_code e, std::size_t) { self->guarded([&] { self->on_subscription(e); }); });
  }

  void refuse() {
    core_.refused.fetch_add(1);
    end("the first frame must list existing channels; connection closed");
  }

  void on_subscription(error_code ec) {
    if (ec) {
      end("");
      return;
    }
    const auto* p = reinterpret_cast<const unsigned char*>(body_.data());
    if (get_u16(p) != control_channel) {
      refuse();
      return;
    }
    for (std::size_t i = 2; i < body_.size(); i += 2) {
      const std::uint16_t c = get_u16(p + i);
      if (c >= core_.channels.size()) {
        refuse();
        return;
      }
      channels_.push_back(c);
    }
    std::sort(channels_.begin(), channels_.end()); // a channel named twice is subscribed once
    channels_.erase(std::unique(channels_.begin(), channels_.end()), channels_.end());
    std::string().swap(body_);
    // Room for the mark, the frames its channels may add before they see it (one each, two
    // for margin), and the answer or a heartbeat (see look()).
    outbox_.reset(new async::bounded_queue<message>(static_cast<std::size_t>(high_) +
                                                    2 * channels_.size() + 2));
    subscribe();
    {
      std::lock_guard<std::mutex> lock(core_.registry_mutex);
      core_.registry.push_back(shared_from_this());
    }
    listen();
  }

  // The answer goes into the outbox before the subscriber is on any channel's list, under the
  // locks of all its channels (taken in channel order; anyone else holds one at most): a drain that
  // sees the subscriber took its list after the answer was queued, so no frame overtakes the
  // answer; and a frame published after the client read the answer is taken out after this, by a
  // drain whose list (taken after it took the frame out) has the subscriber.
  void subscribe() {
    std::vector<std::unique_lock<std::mutex>> locks;
    locks.reserve(channels_.size());
    for (std::uint16_t c : channels_) {
      locks.emplace_back(core_.channels[c]->mutex);
    }
    std::vector<std::shared_ptr<const subscriber_list>> lists;
    lists.reserve(channels_.size());
    for (std::uint16_t c : channels_) {
      auto list = std::make_shared<subscriber_list>(*core_.channels[c]->subscribers);
      list->push_back(shared_from_this());
      lists.push_back(std::move(list));
    }
    deliver(std::make_shared<const std::string>(encode(control_channel, "")));
    for (std::size_t i = 0; i < channels_.size(); ++i) {
      core_.channels[channels_[i]]->subscribers = std::move(lists[i]);
    }
  }

  // A subscriber only listens: its end of the stream (a half-close) is fine, anything it sends
  // ends it.
  void listen() {
    auto self = shared_from_this();
    socket_.async_read_some(net::buffer(head_, sizeof head_), [self](error_code ec, std::size_t) {
      self->guarded([&] {
        if (ec == net::error::eof) {
          self->eof_.store(true, std::memory_order_release); // half-closed: still served
          return;
        }
        self->end(ec ? std::string()
                     : std::string("sent a frame after its subscription; connection closed"));
      });
    });
  }

  // ---- the writer (one chain at a time: deliver starts it when the outbox was empty)

  void write_more() {
    if (closed_) {
      return;
    }
    while (batch_.size() < max_batch && taken_ < queued_.load(std::memory_order_acquire)) {
      message m;
      if (!outbox_->dequeue(m)) {
        break;
      }
      batch_.push_back(std::move(m));
      ++taken_;
    }
    if (batch_.empty()) { // counted, but its push has not finished: look again shortly
      auto self = shared_from_this();
      net::post(socket_.get_executor(), [self] { self->guarded([&] { self->write_more(); }); });
      return;
    }
    if (!writing_.load(std::memory_order_relaxed)) {
      progress_at_ = std::chrono::steady_clock::now();
      last_unsent_ = INT_MAX;
      writing_.store(true, std::memory_order_release);
    }
    buffers_.clear();
    buffers_.push_back(net::buffer(batch_[0]->data() + offset_, batch_[0]->size() - offset_));
    for (std::size_t i = 1; i < batch_.size(); ++i) {
      buffers_.push_back(net::buffer(*batch_[i]));
    }
    auto self = shared_from_this();
    socket_.async_write_some(buffers_, [self](error_code ec, std::size_t n) {
      self->guarded([&] { self->written(ec, n); });
    });
  }

  void written(error_code ec, std::size_t n) {
    if (ec) {
      end("");
      return;
    }
    progress_at_ = std::chrono::steady_clock::now();
    last_unsent_ = INT_MAX;
    offset_ += n;
    std::size_t done = 0;
    while (done < batch_.size() && offset_ >= batch_[done]->size()) {
      offset_ -= batch_[done]->size();
      ++done;
    }
    batch_.erase(batch_.begin(), batch_.begin() + static_cast<std::ptrdiff_t>(done));
    taken_ -= static_cast<std::int64_t>(done);
    const std::int64_t left =
        queued_.fetch_sub(static_cast<std::int64_t>(done), std::memory_order_acq_rel) -
        static_cast<std::int64_t>(done);
    if (left <= low_) {
      release_channels();
    }
    if (left > 0) {
      write_more();
    } else {
      writing_.store(false, std::memory_order_release);
    }
  }

  // Resumes the channels that wait for this outbox.
  void release_channels() {
    std::vector<channel*> held;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      held.swap(held_);
    }
    for (channel* c : held) {
      core_.schedule_drain(*c);
    }
  }

  // Ends the session once (on its strand): logs `why` when given, closes the socket (pending
  // operations end), lets its channels go on without it.
  void end(const std::string& why) noexcept {
    if (closed_) {
      return;
    }
    closed_ = true;
    core_.sessions.fetch_sub(1);
    log_end(core_, "subscriber", id_, why);
    dead_.store(true, std::memory_order_release);
    writing_.store(false, std::memory_order_release);
    close_socket(socket_, false);
    if (core_.stopping.load()) {
      return; // stop() clears the lists itself
    }
    try {
      release_channels();
      for (std::uint16_t n : channels_) {
        channel& c = *core_.channels[n];
        std::lock_guard<std::mutex> lock(c.mutex);
        auto list = std::make_shared<subscriber_list>();
        for (const auto& s : *c.subscribers) {
          if (s.get() != this) {
            list->push_back(s);
          }
        }
        c.subscribers = std::move(list);
      }
    } catch (...) {
      // No memory for the new list: the drains skip a dead subscriber anyway.
    }
  }

  static constexpr std::size_t max_batch = 64; // Asio gathers at most 64 buffers

  core& core_;
  tcp::socket socket_;
  const unsigned id_;
  const std::int64_t high_;
  const std::int64_t low_;
  unsigned char head_[4] = {};
  std::string body_;
  std::vector<std::uint16_t> channels_;
  std::unique_ptr<async::bounded_queue<message>> outbox_;
  // Frames delivered and not yet written out. deliver() counts a frame in after its push; the
  // writer counts frames out once written. The writer takes out at most what is counted.
  std::atomic<std::int64_t> queued_{0};
  std::atomic<bool> dead_{false};
  std::atomic<bool> writing_{false};
  std::atomic<bool> eof_{false}; // the client's end of the stream came
  std::mutex mutex_;             // guards held_
  std::vector<channel*> held_;
  // The strand's own:
  bool closed_ = false;
  std::vector<message> batch_;
  std::vector<net::const_buffer> buffers_;
  std::size_t offset_ = 0; // bytes of batch_[0] written
  std::int64_t taken_ = 0; // frames taken out of the outbox and not yet written
  std::chrono::steady_clock::time_point progress_at_{};
  int last_unsent_ = INT_MAX;
};

} // namespace detail

} // namespace pubsub

#endif // ASYNC_EXAMPLES_PUBSUB_SUBSCRIBER_SESSION_H
