// SPDX-License-Identifier: BSL-1.0
// A TCP pub/sub broker over loopback: publishers connect to one port and send frames (frame.h)
// to channels; subscribers connect to another, subscribe to channels, and receive every frame of
// those channels. Each channel is a queue of the kind chosen at start-up (channel_queue.h),
// drained by one dispatcher thread that hands each frame to the outbox of every subscriber of
// the channel; one writer thread per subscriber sends its outbox.
//
// Bad input closes that connection only, with a logged reason: a frame whose length is below 2
// (malformed) or above max_frame (oversized), a frame to a channel that does not exist, a
// subscription that is not a list of existing channels, a frame from a subscriber after its
// subscription.
//
// Slow subscribers: a subscriber's outbox holds at most `subscriber_backlog` frames. A frame
// that finds it full waits for room (the channel waits with it: a burst is absorbed), out of a
// budget of `slow_timeout` per subscriber for its whole life; once the budget is spent, the
// next frame that finds the outbox full disconnects the subscriber (logged) and the others go
// on. So a subscriber holds at most subscriber_backlog frames (plus its socket's buffers) and
// holds each of its channels up for at most slow_timeout in all, however it reads (the
// dispatchers of two of its channels may wait for it at the same time, each out of what is
// left of the budget when it starts waiting). While the broker stops, nobody waits.
//
// Connections that end are reaped (threads joined, sockets closed) when the next connection
// is accepted; a failing accept (no descriptor left) is retried after 10 ms. With the bounded_queue
// kind a publisher waits while its channel is full (back-pressure); with the other two a channel
// grows only if its dispatcher falls behind the publishers.
//
// Sockets are blocking, one thread per connection (a few connections, as in the test and the
// benchmark). POSIX: stop() wakes the blocked threads with shutdown(2) on their sockets.
#ifndef ASYNC_EXAMPLES_PUBSUB_BROKER_H
#define ASYNC_EXAMPLES_PUBSUB_BROKER_H

#include "channel_queue.h"
#include "frame.h"

#include <async/bounded_queue.h>

#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace pubsub {

struct broker_options {
  queue_kind kind = queue_kind::queue;
  std::uint16_t channels = 4;
  std::size_t channel_capacity = 1024;         // bounded_queue only
  std::size_t subscriber_backlog = 1024;       // frames waiting for one subscriber, at most
  std::size_t max_frame = 64 * 1024;           // the largest length field accepted
  std::chrono::milliseconds slow_timeout{500}; // a full outbox for this long: disconnected
  int subscriber_send_buffer = 0;              // SO_SNDBUF of subscriber sockets (0: the system's)
  unsigned short publisher_port = 0;           // 0: any free port
  unsigned short subscriber_port = 0;
  std::function<void(const std::string&)> log; // empty: stderr
};

class broker {
public:
  explicit broker(broker_options options)
      : options_(std::move(options)),
        publisher_acceptor_(
            io_, tcp::endpoint(net::ip::address_v4::loopback(), options_.publisher_port)),
        subscriber_acceptor_(
            io_, tcp::endpoint(net::ip::address_v4::loopback(), options_.subscriber_port)) {
    if (options_.channels == 0 || options_.channels == control_channel) {
      throw std::invalid_argument("pubsub::broker: channels must be 1 .. 65534");
    }
    for (std::uint16_t c = 0; c < options_.channels; ++c) {
      channels_.emplace_back(new channel(make_channel(options_.kind, options_.channel_capacity)));
    }
    for (std::uint16_t c = 0; c < options_.channels; ++c) {
      channels_[c]->dispatcher = std::thread([this, c] { dispatch(*channels_[c]); });
    }
    publisher_accepting_ = std::thread([this] { accept_publishers(); });
    subscriber_accepting_ = std::thread([this] { accept_subscribers(); });
  }

  broker(const broker&) = delete;
  broker& operator=(const broker&) = delete;
  ~broker() { stop(); }

  unsigned short publisher_port() const { return publisher_acceptor_.local_endpoint().port(); }
  unsigned short subscriber_port() const { return subscriber_acceptor_.local_endpoint().port(); }

  std::uint64_t frames_in() const { return frames_in_.load(); }
  std::uint64_t connections_refused() const { return refused_.load(); }
  std::uint64_t subscribers_dropped() const { return dropped_.load(); }
  /// Connections accepted and not yet reaped (see the top of this file).
  std::size_t connections() {
    std::lock_guard<std::mutex> lock(mutex_);
    return publishers_.size() + subscribers_.size();
  }

  /// Stops accepting, ends and closes every connection (what is still queued is not
  /// delivered) and joins every thread. Idempotent. Not from the broker's own threads.
  void stop() {
    if (stopping_.exchange(true)) {
      return;
    }
    ::shutdown(publisher_acceptor_.native_handle(), SHUT_RDWR);
    ::shutdown(subscriber_acceptor_.native_handle(), SHUT_RDWR);
    publisher_accepting_.join();
    subscriber_accepting_.join();
    boost::system::error_code ignored;
    publisher_acceptor_.close(ignored); // connections not yet accepted are reset
    subscriber_acceptor_.close(ignored);
    std::vector<std::shared_ptr<publisher>> publishers;
    std::vector<std::shared_ptr<subscriber>> subscribers;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      publishers = publishers_;
      subscribers = subscribers_;
    }
    for (auto& p : publishers) {
      ::shutdown(p->socket.native_handle(), SHUT_RDWR); // a blocked read returns
    }
    for (auto& c : channels_) {
      c->queue->close(); // a publisher waiting for room gives up; the dispatcher drains, ends
    }
    for (auto& s : subscribers) {
      drop(*s, nullptr); // a dispatcher waiting for room in its outbox stops waiting
    }
    for (auto& p : publishers) {
      p->thread.join();
      // An abortive close (linger 0): the client still sending gets a reset at once. A plain
      // close after the thread had read what was buffered left the socket in FIN-WAIT-2
      // advertising a zero window, and the client's send blocked until that timed out (60 s).
      p->socket.set_option(net::socket_base::linger(true, 0), ignored);
      p->socket.close(ignored);
    }
    for (auto& c : channels_) {
      c->dispatcher.join();
    }
    for (auto& s : subscribers) {
      s->writer.join();
      s->reader.join();
      s->socket.close(ignored);
    }
  }

private:
  struct publisher {
    explicit publisher(net::io_context& io) : socket(io) {}
    tcp::socket socket;
    std::thread thread;
    std::atomic<bool> done{false}; // its thread has ended: ready to be reaped
  };

  struct subscriber {
    subscriber(net::io_context& io, std::size_t backlog) : socket(io), outbox(backlog) {}
    tcp::socket socket;
    async::bounded_queue<message> outbox;
    std::atomic<bool> dropped{false};
    std::atomic<long long> waited_ns{0}; // time the dispatchers waited for room, in all
    std::thread reader;
    std::thread writer;
    std::atomic<int> threads_done{0}; // 2: reader and writer ended (dropped): ready to be reaped
    unsigned id = 0;
  };

  struct channel {
    explicit channel(std::unique_ptr<channel_queue> q) : queue(std::move(q)) {}
    std::unique_ptr<channel_queue> queue;
    std::mutex mutex; // guards subscribers
    std::vector<std::shared_ptr<subscriber>> subscribers;
    std::thread dispatcher;
  };

  void log(const std::string& what) {
    if (options_.log) {
      options_.log(what);
      return;
    }
    std::lock_guard<std::mutex> lock(mutex_);
    std::fprintf(stderr, "pubsub broker: %s\n", what.c_str());
  }

  // ---- publishers ---------------------------------------------------------------------------

  // Accepts connections on `acceptor` until the broker stops: `make()` creates a connection's
  // record (with a `socket`), `start(record, id)` registers it and starts its threads, with
  // mutex_ held and what has ended reaped first.
  template <typename Make, typename Start>
  void accept_loop(tcp::acceptor& acceptor, Make make, Start start) {
    for (unsigned id = 1;; ++id) {
      auto c = make();
      boost::system::error_code error;
      acceptor.accept(c->socket, error);
      if (stopping_.load()) {
        return;
      }
      if (error) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10)); // e.g. no descriptor left
        continue;
      }
      std::lock_guard<std::mutex> lock(mutex_);
      reap_locked();
      start(c, id);
    }
  }

  void accept_publishers() {
    accept_loop(
        publisher_acceptor_, [this] { return std::make_shared<publisher>(io_); },
        [this](const std::shared_ptr<publisher>& p, unsigned id) {
          publishers_.push_back(p);
          p->thread = std::thread([this, p, id] {
            serve_publisher(*p, id);
            p->done.store(true);
          });
        });
  }

  void serve_publisher(publisher& p, unsigned id) {
    frame f;
    for (;;) {
      const read_result r = read_frame(p.socket, options_.max_frame, f);
      if (r == read_result::closed) {
        return;
      }
      if (r != read_result::ok) {
        refuse(p.socket,
               "publisher " + std::to_string(id) + ": " +
                   (r == read_result::malformed ? "malformed frame (length below 2)"
                                                : "oversized frame (length above " +
                                                      std::to_string(options_.max_frame) + ")") +
                   "; connection closed");
        return;
      }
      if (f.channel >= options_.channels) {
        refuse(p.socket, "publisher " + std::to_string(id) + ": channel " +
                             std::to_string(f.channel) + " does not exist; connection closed");
        return;
      }
      frames_in_.fetch_add(1, std::memory_order_relaxed);
      if (!channels_[f.channel]->queue->push(std::make_shared<const std::string>(f.bytes))) {
        return; // stopping
      }
    }
  }

  void refuse(tcp::socket& socket, const std::string& why) {
    refused_.fetch_add(1);
    log(why);
    ::shutdown(socket.native_handle(), SHUT_RDWR);
  }

  // ---- subscribers --------------------------------------------------------------------------

  void accept_subscribers() {
    accept_loop(
        subscriber_acceptor_,
        [this] { return std::make_shared<subscriber>(io_, options_.subscriber_backlog); },
        [this](const std::shared_ptr<subscriber>& s, unsigned id) {
          s->id = id;
          boost::system::error_code error;
          s->socket.set_option(tcp::no_delay(true), error); // frames go out as they come
          if (options_.subscriber_send_buffer > 0) {
            s->socket.set_option(
                net::socket_base::send_buffer_size(options_.subscriber_send_buffer), error);
          }
          subscribers_.push_back(s);
          s->writer = std::thread([this, s] {
            write_to(*s);
            s->threads_done.fetch_add(1);
          });
          s->reader = std::thread([this, s] {
            read_subscription(s);
            s->threads_done.fetch_add(1);
          });
        });
  }

  void read_subscription(const std::shared_ptr<subscriber>& s) {
    frame f;
    const std::string who = "subscriber " + std::to_string(s->id) + ": ";
    const read_result r = read_frame(s->socket, options_.max_frame, f);
    if (r == read_result::closed) {
      drop(*s, nullptr);
      return;
    }
    bool valid = r == read_result::ok && f.channel == control_channel && !f.payload.empty() &&
                 f.payload.size() % 2 == 0;
    std::vector<std::uint16_t> wanted;
    for (std::size_t i = 0; valid && i < f.payload.size(); i += 2) {
      const std::uint16_t c = get_u16(reinterpret_cast<const unsigned char*>(f.payload.data()) + i);
      valid = c < options_.channels;
      wanted.push_back(c);
    }
    std::sort(wanted.begin(), wanted.end()); // a channel named twice is subscribed once
    wanted.erase(std::unique(wanted.begin(), wanted.end()), wanted.end());
    if (!valid) {
      refused_.fetch_add(1);
      drop(*s, (who + "the first frame must list existing channels; connection closed").c_str());
      return;
    }
    // The answer goes first into the outbox: it reaches the subscriber before any frame. The
    // channels' locks are held (in channel order, as no dispatcher holds two) from before the
    // answer is queued until the subscriber is on every list: a frame published after the
    // client has read the answer is dispatched after that, so it reaches the subscriber.
    // (Answering first and registering after let a dispatcher pass over a subscriber that had
    // its answer already: its first frames went missing under load.)
    std::vector<std::unique_lock<std::mutex>> locks;
    locks.reserve(wanted.size());
    for (std::uint16_t c : wanted) {
      locks.emplace_back(channels_[c]->mutex);
    }
    s->outbox.enqueue(std::make_shared<const std::string>(encode(control_channel, "")));
    for (std::uint16_t c : wanted) {
      channels_[c]->subscribers.push_back(s);
    }
    locks.clear();
    // A subscriber only listens: anything more it sends, or its going away, ends it.
    const read_result more = read_frame(s->socket, options_.max_frame, f);
    drop(*s, more == read_result::closed
                 ? nullptr
                 : (who + "sent a frame after its subscription; connection closed").c_str());
  }

  void write_to(subscriber& s) {
    message m;
    while (s.outbox.blocking_dequeue(m)) {
      boost::system::error_code error;
      net::write(s.socket, net::buffer(*m), error);
      if (error) {
        drop(s, nullptr);
        return;
      }
    }
  }

  // Ends a subscriber once (the first call logs `why` when given): no more frames are queued
  // for it, its socket is shut down (its reader and writer wake up and end), and the
  // dispatchers forget it.
  void drop(subscriber& s, const char* why) {
    if (s.dropped.exchange(true)) {
      return;
    }
    if (why != nullptr) {
      log(why);
    }
    s.outbox.close();
    ::shutdown(s.socket.native_handle(), SHUT_RDWR);
  }

  // ---- channels -----------------------------------------------------------------------------

  void dispatch(channel& c) {
    message m;
    while (c.queue->pop(m)) {
      std::lock_guard<std::mutex> lock(c.mutex);
      for (auto it = c.subscribers.begin(); it != c.subscribers.end();) {
        subscriber& s = **it;
        if (!s.dropped.load() && !s.outbox.enqueue(m) && !wait_for_room(s, m) &&
            !s.outbox.is_closed()) {
          dropped_.fetch_add(1);
          drop(s, ("subscriber " + std::to_string(s.id) + ": more than " +
                   std::to_string(options_.subscriber_backlog) + " frames waiting, after " +
                   std::to_string(options_.slow_timeout.count()) +
                   " ms of waits for it in all (too slow); disconnected")
                      .c_str());
        }
        it = s.dropped.load() ? c.subscribers.erase(it) : it + 1;
      }
    }
  }

  // A full outbox: waits for room out of the subscriber's budget of slow_timeout (not while
  // stopping). True when the frame went in.
  bool wait_for_room(subscriber& s, const message& m) {
    const long long budget =
        std::chrono::duration_cast<std::chrono::nanoseconds>(options_.slow_timeout).count() -
        s.waited_ns.load();
    if (budget <= 0 || stopping_.load()) {
      return false;
    }
    const auto t0 = std::chrono::steady_clock::now();
    const bool in = s.outbox.enqueue_for(m, std::chrono::nanoseconds(budget));
    s.waited_ns.fetch_add(
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0)
            .count());
    return in;
  }

  // mutex_ held: joins and closes the connections whose threads have ended.
  void reap_locked() {
    boost::system::error_code ignored;
    for (auto it = publishers_.begin(); it != publishers_.end();) {
      if ((*it)->done.load()) {
        (*it)->thread.join();
        (*it)->socket.close(ignored);
        it = publishers_.erase(it);
      } else {
        ++it;
      }
    }
    for (auto it = subscribers_.begin(); it != subscribers_.end();) {
      if ((*it)->threads_done.load() == 2) {
        (*it)->reader.join();
        (*it)->writer.join();
        (*it)->socket.close(ignored);
        it = subscribers_.erase(it);
      } else {
        ++it;
      }
    }
  }

  broker_options options_;
  net::io_context io_; // only for the sockets: every operation here is synchronous
  tcp::acceptor publisher_acceptor_;
  tcp::acceptor subscriber_acceptor_;
  std::vector<std::unique_ptr<channel>> channels_;
  std::mutex mutex_; // guards publishers_, subscribers_ and stderr
  std::vector<std::shared_ptr<publisher>> publishers_;
  std::vector<std::shared_ptr<subscriber>> subscribers_;
  std::thread publisher_accepting_;
  std::thread subscriber_accepting_;
  std::atomic<bool> stopping_{false};
  std::atomic<std::uint64_t> frames_in_{0};
  std::atomic<std::uint64_t> refused_{0};
  std::atomic<std::uint64_t> dropped_{0};
};

} // namespace pubsub

#endif // ASYNC_EXAMPLES_PUBSUB_BROKER_H
