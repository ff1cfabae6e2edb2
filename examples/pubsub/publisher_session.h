// SPDX-License-Identifier: BSL-1.0
// A publisher's session: reads frames into a buffer that holds many, publishes each whole one to
// its channel, and stops reading while a channel is full (the drain resumes it).
#ifndef ASYNC_EXAMPLES_PUBSUB_PUBLISHER_SESSION_H
#define ASYNC_EXAMPLES_PUBSUB_PUBLISHER_SESSION_H

#include "core.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

namespace pubsub {

namespace detail {

class publisher_session : public std::enable_shared_from_this<publisher_session> {
public:
  publisher_session(core& c, tcp::socket socket)
      : core_(c), socket_(std::move(socket)), id_(c.next_id.fetch_add(1)),
        in_((std::max)(std::size_t(64 * 1024), c.options.max_frame + 4)) {
    core_.sessions.fetch_add(1);
  }
  publisher_session(const publisher_session&) = delete;
  publisher_session& operator=(const publisher_session&) = delete;
  ~publisher_session() {
    close_socket(socket_, core_.stopping.load());
    if (!closed_) {
      core_.sessions.fetch_sub(1);
    }
  }

  void start() { read_more(); }

  /// From a channel's drain (through the strand): the channel has room again.
  void resume() {
    guarded([&] {
      if (closed_ || !pending_) {
        return;
      }
      if (!core_.publish(*core_.channels[pending_channel_], pending_, shared_from_this())) {
        return; // full again: waits again
      }
      pending_.reset();
      parse();
    });
  }

  net::any_io_executor executor() { return socket_.get_executor(); }

private:
  template <typename F>
  void guarded(F&& f) noexcept {
    run_guarded(std::forward<F>(f), [this](const std::string& why) { end(why); });
  }

  void read_more() {
    auto self = shared_from_this();
    socket_.async_read_some(net::buffer(in_.data() + end_, in_.size() - end_),
                            [self](error_code ec, std::size_t n) {
                              self->guarded([&] {
                                if (ec) {
                                  self->end(""); // the publisher is done (or gone)
                                  return;
                                }
                                self->end_ += n;
                                self->parse();
                              });
                            });
  }

  // Publishes every whole frame in the buffer, then reads more; stops (without reading) when
  // a channel is full.
  void parse() {
    const auto* base = reinterpret_cast<const unsigned char*>(in_.data());
    for (;;) {
      const std::size_t avail = end_ - begin_;
      if (avail < 4) {
        break;
      }
      const std::uint32_t length = get_u32(base + begin_);
      if (length < 2) {
        refuse("malformed frame (length below 2)");
        return;
      }
      if (length > core_.options.max_frame) {
        refuse("oversized frame (length above " + std::to_string(core_.options.max_frame) + ")");
        return;
      }
      if (avail < 4 + std::size_t(length)) {
        break;
      }
      const std::uint16_t c = get_u16(base + begin_ + 4);
      if (c >= core_.channels.size()) {
        refuse("channel " + std::to_string(c) + " does not exist");
        return;
      }
      message m = std::make_shared<const std::string>(in_.data() + begin_, 4 + std::size_t(length));
      begin_ += 4 + std::size_t(length);
      core_.frames_in.fetch_add(1, std::memory_order_relaxed);
      if (!core_.publish(*core_.channels[c], m, shared_from_this())) {
        pending_ = std::move(m); // resume() goes on from here
        pending_channel_ = c;
        return;
      }
    }
    if (begin_ > 0) {
      std::memmove(in_.data(), in_.data() + begin_, end_ - begin_);
      end_ -= begin_;
      begin_ = 0;
    }
    read_more();
  }

  void refuse(const std::string& why) {
    core_.refused.fetch_add(1);
    end(why + "; connection closed");
  }

  void end(const std::string& why) noexcept {
    if (closed_) {
      return;
    }
    closed_ = true;
    core_.sessions.fetch_sub(1);
    log_end(core_, "publisher", id_, why);
    close_socket(socket_, false);
  }

  core& core_;
  tcp::socket socket_;
  const unsigned id_;
  std::vector<char> in_;
  std::size_t begin_ = 0; // the first byte not yet published
  std::size_t end_ = 0;   // the end of what was read
  message pending_;       // a frame that found its channel full
  std::uint16_t pending_channel_ = 0;
  bool closed_ = false;
};

} // namespace detail

} // namespace pubsub

#endif // ASYNC_EXAMPLES_PUBSUB_PUBLISHER_SESSION_H
