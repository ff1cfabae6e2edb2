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
//     frames wait for it (its socket's send queue does not shrink: Linux's SIOCOUTQ), checked
//     every quarter of that window. Its channels then go on without it.
//   Memory therefore stays bounded: channels x channel_capacity frames, subscribers x
//   subscriber_backlog frames (shared: a frame is held once, by reference), one frame per
//   publisher, and a read buffer of max(64 KiB, max_frame + 6) per publisher.
//
// Errors stay local; each closes one connection with a logged reason: a frame whose length is
// below 2 (malformed) or above max_frame (oversized), a frame to a channel that does not exist,
// a first subscriber frame that is not a list of existing channels, a frame from a subscriber
// after its subscription, an exception (std::bad_alloc) while serving it. A subscriber that
// half-closes (shutdown(SHUT_WR)) after subscribing is still served. A failing accept (no
// descriptor left: EMFILE) is logged once per burst and retried every 50 ms; connections that
// end free their descriptors at once, so the broker serves again as soon as they do.
//
// stop() (and the destructor) stops the event loop, waits for the handlers running, and closes
// every connection abortively (a publisher still sending gets a reset); what is still queued is
// not delivered.
//
// Linux (SIOCOUTQ); Boost.Asio.
#ifndef ASYNC_EXAMPLES_PUBSUB_BROKER_H
#define ASYNC_EXAMPLES_PUBSUB_BROKER_H

#include "channel_queue.h"
#include "frame.h"

#include <async/asio.h>
#include <async/bounded_queue.h>
#include <async/threadpool.h>

#include <linux/sockios.h>
#include <sys/ioctl.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

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

namespace detail {

// ---- the event loop ---------------------------------------------------------------------------

class runtime {
public:
  virtual ~runtime() = default;
  virtual net::any_io_executor executor() = 0;
  /// Nothing more starts; returns once no handler runs.
  virtual void stop() = 0;
};

class pool_runtime final : public runtime {
public:
  explicit pool_runtime(unsigned threads) : pool_(static_cast<int>(threads)), context_(pool_) {}
  net::any_io_executor executor() override { return context_.get_executor(); }
  void stop() override {
    context_.stop();
    context_.join(); // once stopped: until no function of the context runs
  }

private:
  async::threadpool pool_;
  async::asio_context context_; // after the pool: destroyed first
};

class io_runtime final : public runtime {
public:
  explicit io_runtime(unsigned threads) : work_(io_.get_executor()) {
    for (unsigned i = 0; i < threads; ++i) {
      threads_.emplace_back([this] { io_.run(); });
    }
  }
  ~io_runtime() override { stop(); }
  net::any_io_executor executor() override { return io_.get_executor(); }
  void stop() override {
    io_.stop();
    for (auto& t : threads_) {
      if (t.joinable()) {
        t.join();
      }
    }
  }

private:
  net::io_context io_;
  net::executor_work_guard<net::io_context::executor_type> work_;
  std::vector<std::thread> threads_;
};

class core;
class subscriber_session;
class publisher_session;
using subscriber_list = std::vector<std::shared_ptr<subscriber_session>>;

// ---- channels ---------------------------------------------------------------------------------

struct channel {
  channel(std::uint16_t n, std::unique_ptr<channel_queue> q)
      : id(n), queue(std::move(q)), subscribers(std::make_shared<subscriber_list>()) {}

  const std::uint16_t id;
  const std::unique_ptr<channel_queue> queue;
  // Frames pushed (counted once in) and not yet handed to the subscribers. The push that takes
  // it from 0 schedules the drain; the drain that takes it back to 0 ends: one drain at a time.
  std::atomic<std::int64_t> pending{0};

  std::mutex mutex;                                        // guards subscribers and waiters
  std::shared_ptr<const subscriber_list> subscribers;      // copied on write
  std::vector<std::shared_ptr<publisher_session>> waiters; // publishers waiting for room

  // The drain's own (one drain at a time): frames taken out and not yet handed over, and the
  // subscribers they go to (those subscribed when they were taken out).
  std::vector<message> carry;
  std::size_t carry_at = 0;
  std::shared_ptr<const subscriber_list> carry_for;
};

// ---- what the sessions share ------------------------------------------------------------------

class core {
public:
  static constexpr std::size_t drain_batch = 64;

  explicit core(broker_options o) : options(std::move(o)) {}

  const broker_options options;
  std::vector<std::unique_ptr<channel>> channels;
  std::unique_ptr<runtime> loop;

  std::atomic<bool> stopping{false};
  std::atomic<std::uint64_t> frames_in{0};
  std::atomic<std::uint64_t> refused{0};
  std::atomic<std::uint64_t> stalled{0};
  std::atomic<std::uint64_t> accept_failures{0};
  std::atomic<std::int64_t> sessions{0};
  std::atomic<unsigned> next_id{1};

  std::mutex registry_mutex; // guards registry: the subscribers the stall sweeper looks at
  std::vector<std::weak_ptr<subscriber_session>> registry;

  net::any_io_executor executor() { return loop->executor(); }

  void log(const std::string& what) noexcept {
    try {
      if (options.log) {
        options.log(what);
        return;
      }
      std::lock_guard<std::mutex> lock(log_mutex_);
      std::fprintf(stderr, "pubsub broker: %s\n", what.c_str());
    } catch (...) {
      // a log line that cannot be written (no memory) is not worth a connection
    }
  }

  /// Puts `m` into channel `c` (moved from on success); false when the channel is full, and
  /// then `who` waits on the channel (resumed by the drain) with `m` left as it was.
  bool publish(channel& c, message& m, const std::shared_ptr<publisher_session>& who) {
    if (!push(c, m)) {
      // Checked again under the lock the drain takes after it has made room: either the drain
      // comes after us and sees the waiter, or its room is visible to this second try.
      std::lock_guard<std::mutex> lock(c.mutex);
      if (!push(c, m)) {
        c.waiters.push_back(who);
        return false;
      }
    }
    if (c.pending.fetch_add(1, std::memory_order_acq_rel) == 0) {
      schedule_drain(c);
    }
    return true;
  }

  void schedule_drain(channel& c) {
    channel* p = &c;
    net::post(executor(), [this, p] { drain(*p); });
  }

  void drain(channel& c);

private:
  bool push(channel& c, message& m) {
    return c.pending.load(std::memory_order_acquire) <
               static_cast<std::int64_t>(options.channel_capacity) &&
           c.queue->try_push(m);
  }
  void resume_publishers(channel& c);

  std::mutex log_mutex_;
};

// Closes a socket at once; an abortive close (a reset) when the broker stops, so that a client
// still sending sees the end instead of a zero window.
inline void close_socket(tcp::socket& socket, bool abort) noexcept {
  boost::system::error_code ignored;
  if (abort) {
    socket.set_option(net::socket_base::linger(true, 0), ignored);
  } else {
    socket.shutdown(tcp::socket::shutdown_both, ignored);
  }
  socket.close(ignored);
}

// ---- subscribers ------------------------------------------------------------------------------

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
    boost::system::error_code ignored;
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
  using error_code = boost::system::error_code;

  template <typename F>
  void guarded(F&& f) noexcept {
    try {
      f();
    } catch (const std::exception& e) {
      end(std::string("failed (") + e.what() + "); connection closed");
    } catch (...) {
      end("failed; connection closed");
    }
  }

  std::string who() const { return "subscriber " + std::to_string(id_) + ": "; }

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
  // locks of all its channels (taken in channel order; nobody holds two): a drain that sees the
  // subscriber took its list after the answer was queued, so no frame overtakes the answer; and
  // a frame published after the client read the answer is taken out after this, by a drain
  // whose list (taken after it took the frame out) has the subscriber.
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
    if (!why.empty()) {
      core_.log(who() + why);
    }
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

// ---- publishers -------------------------------------------------------------------------------

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
  using error_code = boost::system::error_code;

  template <typename F>
  void guarded(F&& f) noexcept {
    try {
      f();
    } catch (const std::exception& e) {
      end(std::string("failed (") + e.what() + "); connection closed");
    } catch (...) {
      end("failed; connection closed");
    }
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
    if (!why.empty()) {
      core_.log("publisher " + std::to_string(id_) + ": " + why);
    }
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

inline void core::resume_publishers(channel& c) {
  std::vector<std::shared_ptr<publisher_session>> waiters;
  {
    std::lock_guard<std::mutex> lock(c.mutex);
    waiters.swap(c.waiters);
  }
  for (auto& p : waiters) {
    auto who = std::move(p);
    net::post(who->executor(), [who] { who->resume(); });
  }
}

// One run of channel c's drain: hands up to drain_batch frames to its subscribers, stopping at
// a subscriber whose outbox is at its mark (that subscriber resumes the drain); schedules the
// next run while frames are pending.
inline void core::drain(channel& c) {
  if (c.carry_at == c.carry.size()) {
    c.carry.clear();
    c.carry_at = 0;
    const std::int64_t counted = c.pending.load(std::memory_order_acquire);
    message m;
    while (static_cast<std::int64_t>(c.carry.size()) < counted && c.carry.size() < drain_batch &&
           c.queue->try_pop(m)) {
      c.carry.push_back(std::move(m));
    }
    if (c.carry.empty()) { // counted, but its push has not finished: look again shortly
      schedule_drain(c);
      return;
    }
    std::lock_guard<std::mutex> lock(c.mutex); // after taking the frames out: see subscribe()
    c.carry_for = c.subscribers;
  }
  const std::shared_ptr<const subscriber_list> keep = c.carry_for; // reset below
  const subscriber_list& subscribers = *keep;
  // A subscriber at its mark since the last run (another channel filled it): wait for it.
  for (const auto& s : subscribers) {
    if (s->hold(c)) {
      return; // nothing of the channel is touched after this: the drain may run again now
    }
  }
  std::int64_t handed = 0;
  bool full = false;
  while (!full && c.carry_at < c.carry.size()) {
    const message& m = c.carry[c.carry_at];
    for (const auto& s : subscribers) {
      full = s->deliver(m) || full;
    }
    c.carry[c.carry_at].reset();
    ++c.carry_at;
    ++handed;
  }
  const bool carry_left = c.carry_at < c.carry.size();
  if (!carry_left) {
    c.carry_for.reset(); // the sessions of subscribers that ended go now, not at the next run
  }
  // Past this point the channel is not ours any more when `left` comes out 0: a publisher may
  // start the next drain at once. Nothing of the channel but its waiters (under its lock) is
  // touched.
  const std::int64_t left = c.pending.fetch_sub(handed, std::memory_order_acq_rel) - handed;
  resume_publishers(c);
  // The channel waits for a subscriber at its mark, which resumes this drain. Only while frames
  // are left in the carry: they keep `pending` above 0, so that no publisher starts a second
  // drain meanwhile. (Otherwise the next run's first look holds.)
  if (full && carry_left) {
    for (const auto& s : subscribers) {
      if (s->hold(c)) {
        return; // nothing of the channel is touched after this: the drain may run again now
      }
    }
  }
  if (left > 0) {
    schedule_drain(c); // a fresh task: other channels and sessions run in between
  }
}

// ---- accepting --------------------------------------------------------------------------------

class listener : public std::enable_shared_from_this<listener> {
public:
  listener(core& c, tcp::acceptor acceptor, bool publishers)
      : core_(c), acceptor_(std::move(acceptor)), retry_(c.executor()), publishers_(publishers) {}

  void accept() {
    auto self = shared_from_this();
    acceptor_.async_accept(net::make_strand(core_.executor()),
                           [self](boost::system::error_code ec, tcp::socket socket) {
                             self->accepted(ec, std::move(socket));
                           });
  }

private:
  void accepted(boost::system::error_code ec, tcp::socket socket) {
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
      retry_.async_wait([self](boost::system::error_code e) {
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
    timer_.async_wait([self](boost::system::error_code ec) {
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
  /// range, boost::system::system_error when a port cannot be bound.
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
      c->subscribers = std::make_shared<detail::subscriber_list>();
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
