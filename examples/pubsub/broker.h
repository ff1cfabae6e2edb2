// SPDX-License-Identifier: BSL-1.0
// A TCP pub/sub broker over loopback on Asio's asynchronous I/O: publishers connect to one port
// and send frames (frame.h) to channels; subscribers connect to another, subscribe to channels,
// and receive every frame of those channels.
//
// How it runs. The sessions, the channels' drains, the accept loops and the stall sweeper are
// handlers on one event loop of a fixed number of threads, whatever the number of
// connections: by default async::asio_context over an async::threadpool (async/asio.h), or
// Asio's own io_context run by as many threads (the usual design, the benchmark's peer). Each
// connection is a session object with a strand; it owns its socket, and the socket closes the
// moment the session ends.
//
//   publisher session --try_push--> channel queue --drain--> subscriber outbox --> writer
//         (strand)                  (kind chosen)  (one at a    (async::bounded_     (strand,
//                                                   time)        queue)             gathered)
//
// Flow control: nothing is dropped for a subscriber that reads, however slowly.
//   - A channel holds at most `channel_capacity` frames (plus one per publisher racing for the
//     last places). A publisher whose frame finds its channel full stops reading its socket
//     (TCP then slows the client down) and waits on the channel; the drain wakes it when it
//     has taken frames out.
//   - A subscriber's outbox holds at most `subscriber_backlog` frames (plus one per channel it
//     has, and the subscription's answer). A channel that finds one of its subscribers at that
//     mark stops draining and waits on that subscriber; the subscriber's writer wakes it once
//     the outbox is down to half the mark. So a slow subscriber slows its channels, and through
//     them their publishers, instead of being disconnected.
//   - A subscriber is disconnected only when it reads nothing at all for `stall_timeout` while
//     frames wait for it (no write completes and its socket's send queue does not shrink:
//     Linux's SIOCOUTQ), checked every quarter of that window. Its channels then go on without
//     it. "Nothing" as TCP lets the sender see it: the reader's kernel reopens its window one
//     segment at a time (64 KiB over loopback, about 1.4 KiB over Ethernet), so a subscriber
//     that reads less than a segment per stall_timeout (32 KiB/s over loopback with the
//     default 2 s) looks stalled. Keep stall_timeout well above a segment's reading time.
//   Memory therefore stays bounded: channels x channel_capacity frames, subscribers x
//   subscriber_backlog frames (shared: a frame is held once, by reference), one frame per
//   publisher, and a read buffer of max(64 KiB, max_frame + 4) per publisher.
//
// Errors stay local; each closes one connection with a logged reason: a frame whose length is
// below 2 (malformed) or above max_frame (oversized), a frame to a channel that does not exist,
// a first subscriber frame that is not a list of existing channels, a frame from a subscriber
// after its subscription, an exception (std::bad_alloc) in one of its session's handlers.
// (Running out of memory in a channel's drain, the sweeper or an accept loop ends the program:
// those handlers are not guarded; a drain that could not continue would stall its channel.)
// A subscriber that
// half-closes (shutdown(SHUT_WR)) after subscribing is still served. A failing accept (no
// descriptor left: EMFILE) is logged once per burst and retried every 50 ms; connections that
// end free their descriptors at once, so the broker serves again as soon as they do.
//
// stop() (and the destructor) stops the event loop, waits for the handlers running, and closes
// every remaining connection abortively (a publisher still sending gets a reset; a session that
// a running handler ends meanwhile closes gracefully); what is still queued is not delivered.
//
// Linux (SIOCOUTQ); Boost.Asio.
#ifndef ASYNC_EXAMPLES_PUBSUB_BROKER_H
#define ASYNC_EXAMPLES_PUBSUB_BROKER_H

#include "channel_drain.h"
#include "core.h"
#include "event_loop.h"
#include "options.h"
#include "publisher_session.h"
#include "subscriber_session.h"

#include <algorithm>
#include <chrono>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace pubsub {

namespace detail {

// ---- accepting --------------------------------------------------------------------------------

class listener : public std::enable_shared_from_this<listener> {
public:
  listener(core& c, tcp::acceptor acceptor, bool publishers)
      : core_(c), acceptor_(std::move(acceptor)), retry_(c.executor()), publishers_(publishers) {}

  void accept() {
    auto self = shared_from_this();
    acceptor_.async_accept(
        net::make_strand(core_.executor()),
        [self](error_code ec, tcp::socket socket) { self->accepted(ec, std::move(socket)); });
  }

private:
  void accepted(error_code ec, tcp::socket socket) {
    if (ec == net::error::operation_aborted) {
      return;
    }
    if (ec) { // no descriptor left (EMFILE, ENFILE), no buffer (ENOBUFS)...: try again later
      core_.accept_failures.fetch_add(1);
      if (!failing_) {
        failing_ = true;
        core_.log(std::string(publishers_ ? "publisher" : "subscriber") + " port: accept failed (" +
                  ec.message() + "); retrying every 50 ms");
      }
      auto self = shared_from_this();
      retry_.expires_after(std::chrono::milliseconds(50));
      retry_.async_wait([self](error_code e) {
        if (!e) {
          self->accept();
        }
      });
      return;
    }
    if (failing_) {
      failing_ = false;
      core_.log(std::string(publishers_ ? "publisher" : "subscriber") + " port: accepting again");
    }
    try {
      if (publishers_) {
        std::make_shared<publisher_session>(core_, std::move(socket))->start();
      } else {
        std::make_shared<subscriber_session>(core_, std::move(socket))->start();
      }
    } catch (const std::exception& e) { // the socket closes with its session
      core_.refused.fetch_add(1);
      core_.log(std::string("connection refused (") + e.what() + ")");
    }
    accept();
  }

  core& core_;
  tcp::acceptor acceptor_;
  net::steady_timer retry_;
  const bool publishers_;
  bool failing_ = false;
};

// Every quarter of the stall window, asks each subscriber with a write waiting to look at its
// progress (on its strand).
class sweeper : public std::enable_shared_from_this<sweeper> {
public:
  explicit sweeper(core& c) : core_(c), timer_(c.executor()) {}

  void arm() {
    auto self = shared_from_this();
    timer_.expires_after(
        (std::max)(core_.options.stall_timeout / 4, std::chrono::milliseconds(10)));
    timer_.async_wait([self](error_code ec) {
      if (!ec) {
        self->sweep();
        self->arm();
      }
    });
  }

private:
  void sweep() {
    std::lock_guard<std::mutex> lock(core_.registry_mutex);
    auto& r = core_.registry;
    for (std::size_t i = 0; i < r.size();) {
      auto s = r[i].lock();
      if (!s) {
        r[i] = std::move(r.back());
        r.pop_back();
        continue;
      }
      if (s->worth_a_look()) {
        net::post(s->executor(), [s] { s->look(); });
      }
      ++i;
    }
  }

  core& core_;
  net::steady_timer timer_;
};

} // namespace detail

class broker {
public:
  /// Listens on 127.0.0.1 and starts serving. Throws std::invalid_argument for options out of
  /// range, pubsub::system_error when a port cannot be bound.
  explicit broker(broker_options options) : core_(std::move(options)) {
    const broker_options& o = core_.options;
    if (o.channels == 0 || o.channels == control_channel) {
      throw std::invalid_argument("pubsub::broker: channels must be 1 .. 65534");
    }
    if (o.channel_capacity == 0 || o.subscriber_backlog == 0 || o.max_frame < 2 ||
        o.stall_timeout.count() <= 0) {
      throw std::invalid_argument("pubsub::broker: channel_capacity, subscriber_backlog and "
                                  "stall_timeout must be positive, max_frame at least 2");
    }
    for (std::uint16_t c = 0; c < o.channels; ++c) {
      core_.channels.emplace_back(new detail::channel(c, make_channel(o.kind, o.channel_capacity)));
      core_.channels.back()->carry.reserve(detail::core::drain_batch);
    }
    const unsigned threads =
        o.threads != 0 ? o.threads : (std::max)(2u, std::thread::hardware_concurrency());
    threads_ = threads;
    if (o.runtime == runtime_kind::pool) {
      core_.loop.reset(new detail::pool_runtime(threads));
    } else {
      core_.loop.reset(new detail::io_runtime(threads));
    }
    try {
      auto loopback = net::ip::address_v4::loopback();
      tcp::acceptor pub(core_.executor(), tcp::endpoint(loopback, o.publisher_port));
      tcp::acceptor sub(core_.executor(), tcp::endpoint(loopback, o.subscriber_port));
      publisher_port_ = pub.local_endpoint().port();
      subscriber_port_ = sub.local_endpoint().port();
      std::make_shared<detail::listener>(core_, std::move(pub), true)->accept();
      std::make_shared<detail::listener>(core_, std::move(sub), false)->accept();
      std::make_shared<detail::sweeper>(core_)->arm();
    } catch (...) {
      stop();
      throw;
    }
  }

  broker(const broker&) = delete;
  broker& operator=(const broker&) = delete;
  ~broker() { stop(); }

  unsigned short publisher_port() const { return publisher_port_; }
  unsigned short subscriber_port() const { return subscriber_port_; }
  /// The threads that run the handlers (Asio adds one of its own for the reactor on an
  /// asio_context).
  unsigned threads() const { return threads_; }

  std::uint64_t frames_in() const { return core_.frames_in.load(); }
  /// Connections closed for bad input (or refused for lack of memory).
  std::uint64_t connections_refused() const { return core_.refused.load(); }
  /// Subscribers disconnected for reading nothing during stall_timeout.
  std::uint64_t subscribers_dropped() const { return core_.stalled.load(); }
  /// Accepts that failed (and were retried): no descriptor left, for instance.
  std::uint64_t accept_failures() const { return core_.accept_failures.load(); }
  /// Connections open (sessions that have not ended).
  std::size_t connections() const {
    return static_cast<std::size_t>((std::max)(std::int64_t(0), core_.sessions.load()));
  }

  /// Stops serving: the event loop stops, the handlers running finish, every connection is
  /// closed abortively; what is still queued is not delivered. Idempotent. Not from the
  /// broker's own handlers.
  void stop() {
    if (core_.stopping.exchange(true) || !core_.loop) {
      return;
    }
    core_.loop->stop();
    // Nothing runs now: drop what the channels hold (sessions among it), then the loop, whose
    // destruction destroys the pending operations and with them the remaining sessions.
    for (auto& c : core_.channels) {
      std::lock_guard<std::mutex> lock(c->mutex);
      c->subscribers.reset(); // nothing reads the lists after stop(): no allocation here
      c->waiters.clear();
      c->carry.clear();
      c->carry_at = 0;
      c->carry_for.reset();
    }
    {
      std::lock_guard<std::mutex> lock(core_.registry_mutex);
      core_.registry.clear();
    }
    core_.loop.reset();
  }

private:
  detail::core core_;
  unsigned threads_ = 0;
  unsigned short publisher_port_ = 0;
  unsigned short subscriber_port_ = 0;
};

} // namespace pubsub

#endif // ASYNC_EXAMPLES_PUBSUB_BROKER_H
