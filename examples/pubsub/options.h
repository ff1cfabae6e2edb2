// SPDX-License-Identifier: BSL-1.0
// The broker's options: the channel queue kind, the event loop, the limits (broker.h says what
// each does).
#ifndef ASYNC_EXAMPLES_PUBSUB_OPTIONS_H
#define ASYNC_EXAMPLES_PUBSUB_OPTIONS_H

#include "channel_queue.h"

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

namespace pubsub {

/// What runs the broker's handlers.
enum class runtime_kind {
  pool,      ///< async::asio_context over an async::threadpool of `threads` threads
  io_context ///< Asio's io_context, run() by `threads` threads
};

inline const char* name_of(runtime_kind r) {
  return r == runtime_kind::pool ? "asio_context over threadpool" : "io_context";
}

struct broker_options {
  queue_kind kind = queue_kind::queue;
  runtime_kind runtime = runtime_kind::pool;
  unsigned threads = 0;                          // 0: the hardware's threads, at least 2
  std::uint16_t channels = 4;                    // 1 .. 65534
  std::size_t channel_capacity = 1024;           // frames queued per channel, at most
  std::size_t subscriber_backlog = 256;          // frames waiting for one subscriber, at most
  std::size_t max_frame = 64 * 1024;             // the largest length field accepted
  std::chrono::milliseconds stall_timeout{2000}; // reading nothing for this long: disconnected
  int subscriber_send_buffer = 0;                // SO_SNDBUF of subscriber sockets (0: system's)
  unsigned short publisher_port = 0;             // 0: any free port
  unsigned short subscriber_port = 0;            //
  std::function<void(const std::string&)> log;   // empty: stderr
};

} // namespace pubsub

#endif // ASYNC_EXAMPLES_PUBSUB_OPTIONS_H
