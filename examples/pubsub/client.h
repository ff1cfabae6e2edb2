// SPDX-License-Identifier: BSL-1.0
// The two clients of the pub/sub example: a publisher sends frames to channels; a subscriber
// subscribes to channels and receives their frames. Blocking sockets on 127.0.0.1.
#ifndef ASYNC_EXAMPLES_PUBSUB_CLIENT_H
#define ASYNC_EXAMPLES_PUBSUB_CLIENT_H

#include "frame.h"

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace pubsub {

inline void connect_loopback(tcp::socket& socket, unsigned short port) {
  socket.connect(tcp::endpoint(net::ip::address_v4::loopback(), port));
  socket.set_option(tcp::no_delay(true));
}

class publisher_client {
public:
  publisher_client(net::io_context& io, unsigned short port) : socket_(io) {
    connect_loopback(socket_, port);
  }
  /// Sends one frame; throws pubsub::system_error when the connection is gone.
  void publish(std::uint16_t channel, const std::string& payload) {
    const std::string bytes = encode(channel, payload);
    net::write(socket_, net::buffer(bytes));
  }
  tcp::socket& socket() { return socket_; }

private:
  tcp::socket socket_;
};

class subscriber_client {
public:
  subscriber_client(net::io_context& io, unsigned short port) : socket_(io) {
    connect_loopback(socket_, port);
  }
  /// Subscribes and waits for the broker's answer. Throws std::runtime_error when the broker
  /// closes the connection instead.
  void subscribe(const std::vector<std::uint16_t>& channels, std::size_t max_frame = 1 << 20) {
    const std::string bytes = encode(control_channel, subscription(channels));
    net::write(socket_, net::buffer(bytes));
    frame answer;
    if (read_frame(socket_, max_frame, answer) != read_result::ok ||
        answer.channel != control_channel) {
      throw std::runtime_error("pubsub subscriber: the broker refused the subscription");
    }
  }
  /// The next frame of a channel (the broker's empty control frames are skipped); false when
  /// the connection ended.
  bool receive(frame& out, std::size_t max_frame = 1 << 20) {
    for (;;) {
      if (read_frame(socket_, max_frame, out) != read_result::ok) {
        return false;
      }
      if (out.channel != control_channel) {
        return true;
      }
    }
  }
  tcp::socket& socket() { return socket_; }

private:
  tcp::socket socket_;
};

} // namespace pubsub

#endif // ASYNC_EXAMPLES_PUBSUB_CLIENT_H
