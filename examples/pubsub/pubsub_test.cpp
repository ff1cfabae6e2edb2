// SPDX-License-Identifier: BSL-1.0
// The pub/sub broker over 127.0.0.1, for each queue kind:
//   traffic:  P publishers, S subscribers with two channels each: every subscriber gets every
//             frame of its channels exactly once, in each publisher's order; meanwhile bad
//             clients (a malformed frame, an oversized one, a frame to a missing channel, a
//             subscription that is not a list of channels) are closed with a logged reason and
//             nobody else notices;
//   slow:     a subscriber that never reads is disconnected once its backlog is full, while a
//             fast subscriber of the same channel gets everything;
//   policies: a subscriber that reads too slowly but steadily is disconnected after holding its
//             channel up for slow_timeout in all; a channel named twice is delivered once;
//             connections that ended are reaped;
//   stop:     stop() under full load returns, and publishers still sending see the connection
//             end instead of blocking.
// Exit status 0 when every check held. Every wait is bounded (a lost frame fails, not hangs).
#include "broker.h"
#include "client.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace {

using namespace pubsub;
using clock_type = std::chrono::steady_clock;

int failures = 0;

void check(bool ok, const std::string& what) {
  if (!ok) {
    ++failures;
    std::fprintf(stderr, "FAILED: %s\n", what.c_str());
  }
}

// Collects the broker's log lines.
struct log_sink {
  std::mutex mutex;
  std::vector<std::string> lines;
  std::function<void(const std::string&)> function() {
    return [this](const std::string& line) {
      std::lock_guard<std::mutex> lock(mutex);
      lines.push_back(line);
    };
  }
  bool has(const std::string& part) {
    std::lock_guard<std::mutex> lock(mutex);
    for (const auto& l : lines) {
      if (l.find(part) != std::string::npos) {
        return true;
      }
    }
    return false;
  }
};

template <typename Pred>
bool eventually(Pred pred, std::chrono::seconds limit) {
  const auto end = clock_type::now() + limit;
  while (!pred()) {
    if (clock_type::now() > end) {
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

std::string payload_of(std::uint32_t publisher, std::uint32_t seq, std::size_t size) {
  std::string p;
  put_u32(p, publisher);
  put_u32(p, seq);
  p.resize(size < 8 ? 8 : size, 'x');
  return p;
}

// Sends raw bytes to `port` and reports whether the broker then closed the connection.
bool closed_after(net::io_context& io, unsigned short port, const std::string& bytes) {
  tcp::socket s(io);
  connect_loopback(s, port);
  net::write(s, net::buffer(bytes));
  s.set_option(net::socket_base::receive_buffer_size(4096));
  char c;
  boost::system::error_code error;
  s.read_some(net::buffer(&c, 1), error); // the broker sends nothing: only the close ends this
  return static_cast<bool>(error);
}

// Reads frames of publisher 0 on its own thread until `frames` arrived or the connection
// ended, counting every frame whose sequence number is not the next one expected.
class ordered_reader {
public:
  ordered_reader(subscriber_client& client, std::uint32_t frames, std::size_t max_frame)
      : thread_([this, &client, frames, max_frame] {
          frame f;
          while (next_.load() < frames && client.receive(f, max_frame)) {
            const std::uint32_t seq =
                get_u32(reinterpret_cast<const unsigned char*>(f.payload.data()) + 4);
            wrong_ += seq == next_.load() ? 0 : 1;
            next_ = seq + 1;
          }
        }) {}
  ordered_reader(const ordered_reader&) = delete;
  ordered_reader& operator=(const ordered_reader&) = delete;
  ~ordered_reader() { join(); }
  std::uint32_t next() const { return next_.load(); }
  // The count of frames out of order; joins the thread first.
  std::uint64_t wrong() {
    join();
    return wrong_;
  }

private:
  void join() {
    if (thread_.joinable()) {
      thread_.join();
    }
  }
  std::atomic<std::uint32_t> next_{0}; // read by the main thread while it waits
  std::uint64_t wrong_ = 0;
  std::thread thread_; // last: starts once the counters exist
};

void traffic(queue_kind kind) {
  const std::string name = name_of(kind);
  constexpr std::uint16_t channels = 4;
  constexpr int publishers = 3;
  constexpr int subscribers = 4;
  constexpr std::uint32_t per_publisher = 4000; // k goes to channel k % 4
  log_sink log;
  broker_options o;
  o.kind = kind;
  o.channels = channels;
  o.channel_capacity = 64; // small: publishers wait on full channels (bounded_queue)
  o.subscriber_backlog = 1 << 16;
  o.max_frame = 1024;
  o.log = log.function();
  broker b(o);
  net::io_context io;

  // Subscribers first (they get what is published after their subscription).
  struct received {
    std::map<std::pair<int, int>, std::uint32_t> next; // (channel, publisher) -> next seq
    std::atomic<std::uint64_t> count{0};               // read by the main thread while it waits
    std::uint64_t wrong = 0;
  };
  std::vector<received> got(subscribers);
  std::vector<std::unique_ptr<subscriber_client>> subs;
  for (int s = 0; s < subscribers; ++s) {
    subs.emplace_back(new subscriber_client(io, b.subscriber_port()));
    const std::uint16_t a = static_cast<std::uint16_t>(s % channels);
    const std::uint16_t c = static_cast<std::uint16_t>((s + 1) % channels);
    subs.back()->subscribe({a, c});
    for (int p = 0; p < publishers; ++p) {
      got[static_cast<std::size_t>(s)].next[{a, p}] = a;
      got[static_cast<std::size_t>(s)].next[{c, p}] = c;
    }
  }
  const std::uint64_t expected = publishers * (per_publisher / channels) * 2;
  std::vector<std::thread> readers;
  for (int s = 0; s < subscribers; ++s) {
    readers.emplace_back([&, s] {
      received& r = got[static_cast<std::size_t>(s)];
      frame f;
      while (r.count < expected && subs[static_cast<std::size_t>(s)]->receive(f)) {
        const auto* bytes = reinterpret_cast<const unsigned char*>(f.payload.data());
        const int p = static_cast<int>(get_u32(bytes));
        const std::uint32_t seq = get_u32(bytes + 4);
        auto it = r.next.find({f.channel, p});
        if (it == r.next.end() || it->second != seq) {
          ++r.wrong; // not subscribed, duplicated, lost or out of order
        } else {
          it->second += channels;
        }
        ++r.count;
      }
    });
  }

  // Bad clients, while the traffic runs.
  std::thread bad([&] {
    std::string malformed;
    put_u32(malformed, 1);
    malformed.push_back('x');
    check(closed_after(io, b.publisher_port(), malformed), name + ": malformed frame closed");
    std::string oversized;
    put_u32(oversized, 1025);
    put_u16(oversized, 0);
    check(closed_after(io, b.publisher_port(), oversized), name + ": oversized frame closed");
    check(closed_after(io, b.publisher_port(), encode(9, "nowhere")),
          name + ": frame to a missing channel closed");
    check(closed_after(io, b.subscriber_port(), encode(3, "not a subscription")),
          name + ": bad subscription closed");
  });

  std::vector<std::thread> pubs;
  for (int p = 0; p < publishers; ++p) {
    pubs.emplace_back([&, p] {
      publisher_client client(io, b.publisher_port());
      for (std::uint32_t k = 0; k < per_publisher; ++k) {
        client.publish(static_cast<std::uint16_t>(k % channels),
                       payload_of(static_cast<std::uint32_t>(p), k, 8 + k % 64));
      }
    });
  }
  for (auto& t : pubs) {
    t.join();
  }
  bad.join();
  const bool all = eventually(
      [&] {
        for (auto& r : got) {
          if (r.count < expected) {
            return false;
          }
        }
        return true;
      },
      std::chrono::seconds(60));
  check(all, name + ": every subscriber got all its frames within 60 s");
  b.stop(); // ends the connections: a reader still waiting returns
  for (auto& t : readers) {
    t.join();
  }
  for (int s = 0; s < subscribers; ++s) {
    const received& r = got[static_cast<std::size_t>(s)];
    check(r.count == expected && r.wrong == 0,
          name + ": subscriber " + std::to_string(s) + " got " + std::to_string(r.count.load()) +
              " of " + std::to_string(expected) + ", " + std::to_string(r.wrong) + " wrong");
  }
  check(b.frames_in() == static_cast<std::uint64_t>(publishers) * per_publisher,
        name + ": the broker counted every published frame once");
  check(log.has("malformed"), name + ": malformed frame logged");
  check(log.has("oversized"), name + ": oversized frame logged");
  check(log.has("does not exist"), name + ": missing channel logged");
  check(log.has("must list existing channels"), name + ": bad subscription logged");
  check(b.connections_refused() == 4, name + ": exactly the 4 bad connections were refused");
  check(b.subscribers_dropped() == 0, name + ": no subscriber was too slow");
}

// A broker whose subscriber sockets have small send buffers, so that a subscriber which does
// not keep up fills them (and then its backlog) after a few frames; `small_window` then
// subscribes a client whose receive buffer is small as well.
broker_options slow_client_options(queue_kind kind, std::uint16_t channels, std::size_t backlog,
                                   log_sink& log) {
  broker_options o;
  o.kind = kind;
  o.channels = channels;
  o.subscriber_backlog = backlog;
  o.subscriber_send_buffer = 4096;
  o.max_frame = 2048;
  o.log = log.function();
  return o;
}

void small_window(subscriber_client& client, const std::vector<std::uint16_t>& channels) {
  client.socket().set_option(net::socket_base::receive_buffer_size(4096));
  client.subscribe(channels);
}

void slow_subscriber(queue_kind kind) {
  const std::string name = std::string(name_of(kind)) + " (slow subscriber)";
  log_sink log;
  // A budget of 2 s and room for 64 frames: the fast subscriber keeps up on a loaded machine
  // (with 16 frames and 0.5 s it was dropped too under three busy loops).
  broker_options o = slow_client_options(kind, 1, 64, log);
  o.slow_timeout = std::chrono::seconds(2);
  broker b(o);
  net::io_context io;
  subscriber_client slow(io, b.subscriber_port());
  small_window(slow, {0});
  subscriber_client fast(io, b.subscriber_port());
  fast.subscribe({0});
  constexpr std::uint32_t frames = 3000;
  ordered_reader reader(fast, frames, o.max_frame);
  {
    publisher_client p(io, b.publisher_port());
    for (std::uint32_t k = 0; k < frames; ++k) {
      p.publish(0, payload_of(0, k, 1000)); // ~3 MB: far more than the slow one's buffers
    }
  }
  check(eventually([&] { return reader.next() == frames; }, std::chrono::seconds(60)),
        name + ": the fast subscriber got every frame within 60 s");
  b.stop();
  check(reader.wrong() == 0, name + ": the fast subscriber got them in order, once each");
  check(b.subscribers_dropped() == 1, name + ": the slow subscriber was disconnected");
  check(log.has("too slow"), name + ": the disconnection was logged");
}

// A subscriber that reads, but slowly, holds its channel up for slow_timeout in all and is then
// disconnected; a subscription naming a channel twice gets each frame once; connections that
// ended are reaped.
void policies(queue_kind kind) {
  const std::string name = std::string(name_of(kind)) + " (policies)";
  log_sink log;
  broker_options o = slow_client_options(kind, 2, 4, log);
  o.slow_timeout = std::chrono::milliseconds(300);
  broker b(o);
  net::io_context io;
  subscriber_client trickle(io, b.subscriber_port());
  small_window(trickle, {0});
  subscriber_client fast(io, b.subscriber_port());
  fast.subscribe({0, 0, 1}); // channel 0 named twice
  std::atomic<bool> done{false};
  std::thread slow_reader([&] {
    frame f;
    while (!done.load() && trickle.receive(f, o.max_frame)) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20)); // one frame per 20 ms
    }
  });
  constexpr std::uint32_t frames = 400;
  ordered_reader fast_reader(fast, frames, o.max_frame);
  const auto t0 = clock_type::now();
  {
    publisher_client p(io, b.publisher_port());
    for (std::uint32_t k = 0; k < frames; ++k) {
      p.publish(0, payload_of(0, k, 1000));
    }
  }
  // 400 frames at the trickle's pace would take 8 s; its budget lets it hold them up 0.3 s.
  check(eventually([&] { return fast_reader.next() == frames; }, std::chrono::seconds(30)),
        name + ": the fast subscriber got every frame");
  check(clock_type::now() - t0 < std::chrono::seconds(5),
        name + ": a trickling subscriber held the channel up for less than 5 s");
  check(b.subscribers_dropped() == 1, name + ": the trickling subscriber was disconnected");
  // Connections that ended are reaped when the next one is accepted.
  for (int i = 0; i < 30; ++i) {
    publisher_client c(io, b.publisher_port());
    c.publish(1, "bye");
  }
  const bool reaped = eventually(
      [&] {
        publisher_client c(io, b.publisher_port()); // an accept reaps what has ended
        return b.connections() <= 4;
      },
      std::chrono::seconds(10));
  check(reaped,
        name + ": ended connections were reaped (" + std::to_string(b.connections()) + " left)");
  done = true;
  b.stop();
  slow_reader.join();
  check(fast_reader.wrong() == 0,
        name + ": the fast subscriber got each frame once, in order (channel 0 "
               "was named twice)");
}

// stop() while publishers send at full speed into full channels and a subscriber never reads:
// stop() returns, and every publisher's next send fails instead of blocking for ever.
void stop_under_load(queue_kind kind) {
  const std::string name = std::string(name_of(kind)) + " (stop under load)";
  broker_options o;
  o.kind = kind;
  o.channels = 2;
  o.channel_capacity = 2;
  o.max_frame = 4096;
  o.log = [](const std::string&) {};
  std::unique_ptr<broker> b(new broker(o));
  net::io_context io;
  subscriber_client slow(io, b->subscriber_port());
  slow.subscribe({0, 1});
  std::atomic<int> ended{0};
  std::vector<std::thread> pubs;
  for (int p = 0; p < 3; ++p) {
    pubs.emplace_back([&] {
      try {
        publisher_client c(io, b->publisher_port());
        const std::string payload(2000, 'x');
        for (std::uint32_t k = 0;; ++k) {
          c.publish(static_cast<std::uint16_t>(k % 2), payload);
        }
      } catch (const std::exception&) {
        // the broker went away: expected
      }
      ended.fetch_add(1);
    });
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const auto t0 = clock_type::now();
  b->stop();
  check(clock_type::now() - t0 < std::chrono::seconds(10), name + ": stop() returned within 10 s");
  if (!eventually([&] { return ended.load() == 3; }, std::chrono::seconds(10))) {
    std::fprintf(stderr, "FAILED: %s: a publisher still blocks in send after stop()\n",
                 name.c_str());
    std::_Exit(EXIT_FAILURE); // its thread cannot be joined
  }
  for (auto& t : pubs) {
    t.join();
  }
}

} // namespace

int main() {
  for (queue_kind kind : {queue_kind::mutex_deque, queue_kind::queue, queue_kind::bounded_queue}) {
    traffic(kind);
    slow_subscriber(kind);
    policies(kind);
    stop_under_load(kind);
    std::printf("%s: %s\n", name_of(kind), failures == 0 ? "ok" : "FAILED");
  }
  return failures == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
