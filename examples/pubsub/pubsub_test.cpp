// SPDX-License-Identifier: BSL-1.0
// The pub/sub broker over 127.0.0.1. `pubsub_test <scenario>` runs one scenario for every queue
// kind (and the io_context runtime where it says so); ctest runs each scenario as a test.
//   traffic:   P publishers x S subscribers with two channels each: every subscriber gets every
//              frame of its channels exactly once, in each publisher's order, while bad clients
//              (malformed, oversized, missing channel, bad subscription, a frame after the
//              subscription) are closed with a logged reason and nobody else notices; a channel
//              named twice is delivered once. Both runtimes.
//   flood:     one publisher floods a channel with 1 KiB frames; a subscriber reading as fast as
//              it can gets 100%, and one reading slowly (small buffers, a pause every 16 frames)
//              gets 100% too: the publisher is slowed, nobody is disconnected.
//   stall:     a subscriber that never reads, beside a fast one: the fast one gets everything,
//              the silent one is disconnected once, after the stall window, and the broker's
//              memory stays bounded while 32 MiB flow (not under sanitizers).
//   halfclose: a subscriber that half-closes after subscribing still gets every frame.
//   idle:      1,500 idle subscribers beside a live pair that gets everything; the broker runs
//              the same number of threads before and after they connect; connections that end
//              are gone at once (no accept needed).
//   nofile:    a broker (a child process) limited to 64 descriptors; 200 connections come and
//              close; the broker is alive after, logged the failing accepts, serves a new pair.
//   stop:      stop() while publishers send into full channels and a subscriber never reads:
//              stop() returns, every publisher's connection ends.
// Exit status 0 when every check held. A watchdog ends a scenario that hangs (a lost frame
// fails, not hangs); every loop is bounded in count.
#include "broker.h"
#include "client.h"

#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <dirent.h>
#include <fstream>
#include <functional>
#include <iterator>
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

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool sanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
constexpr bool sanitized = true;
#else
constexpr bool sanitized = false;
#endif
#else
constexpr bool sanitized = false;
#endif

// Ends the process when a scenario outlives its limit (a hang is a failure with a name).
class watchdog {
public:
  watchdog(std::string what, std::chrono::seconds limit)
      : thread_([this, what, limit] {
          std::unique_lock<std::mutex> lock(mutex_);
          if (!done_cv_.wait_for(lock, limit, [this] { return done_; })) {
            std::fprintf(stderr, "FAILED: %s: still running after %lld s (a hang)\n", what.c_str(),
                         static_cast<long long>(limit.count()));
            std::_Exit(EXIT_FAILURE);
          }
        }) {}
  ~watchdog() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      done_ = true;
    }
    done_cv_.notify_all();
    thread_.join();
  }

private:
  std::mutex mutex_;
  std::condition_variable done_cv_;
  bool done_ = false;
  std::thread thread_; // last: starts once the rest exists
};

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
  std::size_t count(const std::string& part) {
    std::lock_guard<std::mutex> lock(mutex);
    std::size_t n = 0;
    for (const auto& l : lines) {
      n += l.find(part) != std::string::npos ? 1 : 0;
    }
    return n;
  }
  bool has(const std::string& part) { return count(part) > 0; }
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

// Sends `frames` frames of `size` bytes to `channel` as publisher `id` (sequence numbers from
// 0), 64 frames per write.
void flood(publisher_client& p, std::uint16_t channel, std::uint32_t id, std::uint32_t frames,
           std::size_t size) {
  std::string chunk;
  for (std::uint32_t k = 0; k < frames; ++k) {
    chunk += encode(channel, payload_of(id, k, size));
    if (k % 64 == 63 || k + 1 == frames) {
      net::write(p.socket(), net::buffer(chunk));
      chunk.clear();
    }
  }
}

// Sends raw bytes to `port` and reports whether the broker then closed the connection.
bool closed_after(net::io_context& io, unsigned short port, const std::string& bytes) {
  tcp::socket s(io);
  connect_loopback(s, port);
  net::write(s, net::buffer(bytes));
  s.set_option(net::socket_base::receive_buffer_size(4096));
  char c[64];
  error_code error;
  for (int i = 0; i < 16 && !error; ++i) { // a subscription's answer comes first: read past it
    s.read_some(net::buffer(c), error);
  }
  return static_cast<bool>(error);
}

// Reads frames of publisher 0 on its own thread until `frames` arrived or the connection
// ended, counting every frame whose sequence number is not the next one expected; pauses
// `pause` every 16 frames.
class ordered_reader {
public:
  ordered_reader(subscriber_client& client, std::uint32_t frames, std::size_t max_frame,
                 std::chrono::microseconds pause = std::chrono::microseconds(0))
      : thread_([this, &client, frames, max_frame, pause] {
          frame f;
          while (next_.load() < frames && client.receive(f, max_frame)) {
            const std::uint32_t seq =
                get_u32(reinterpret_cast<const unsigned char*>(f.payload.data()) + 4);
            wrong_ += seq == next_.load() ? 0 : 1;
            next_ = seq + 1;
            if (pause.count() > 0 && seq % 16 == 15) {
              std::this_thread::sleep_for(pause);
            }
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

long rss_kib() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line)) {
    if (line.compare(0, 6, "VmRSS:") == 0) {
      return std::stol(line.substr(6));
    }
  }
  return 0;
}

int threads_now() {
  int n = 0;
  if (DIR* d = ::opendir("/proc/self/task")) {
    while (dirent* e = ::readdir(d)) {
      n += e->d_name[0] != '.' ? 1 : 0;
    }
    ::closedir(d);
  }
  return n;
}

struct config {
  queue_kind kind;
  runtime_kind runtime;
};

std::string name_of(const config& c) {
  return std::string(name_of(c.kind)) +
         (c.runtime == runtime_kind::pool ? "" : std::string(" on ") + name_of(c.runtime));
}

broker_options options_for(const config& c, log_sink& log) {
  broker_options o;
  o.kind = c.kind;
  o.runtime = c.runtime;
  o.threads = 2;
  o.log = log.function();
  return o;
}

// One channel, frames up to 2 KiB: the scenarios that push tens of MiB of 1 KiB frames at it.
broker_options one_channel_options(const config& c, log_sink& log) {
  broker_options o = options_for(c, log);
  o.channels = 1;
  o.max_frame = 2048;
  return o;
}

// ---- scenarios ---------------------------------------------------------------------------------

void traffic(const config& cfg) {
  const std::string name = name_of(cfg) + " (traffic)";
  constexpr std::uint16_t channels = 4;
  constexpr int publishers = 3;
  constexpr int subscribers = 4;
  constexpr std::uint32_t per_publisher = 4000; // k goes to channel k % 4
  log_sink log;
  broker_options o = options_for(cfg, log);
  o.channels = channels;
  o.channel_capacity = 64;   // small: publishers wait on full channels
  o.subscriber_backlog = 16; // small: channels wait on subscribers
  o.max_frame = 1024;
  broker b(o);
  net::io_context io;

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
    subs.back()->subscribe({a, c, a}); // a named twice: delivered once
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
    check(closed_after(io, b.subscriber_port(),
                       encode(control_channel, subscription({1})) + encode(1, "more")),
          name + ": a frame after the subscription closed");
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
  check(log.has("after its subscription"), name + ": frame after the subscription logged");
  check(b.connections_refused() == 4, name + ": exactly the 4 bad frames were refused");
  check(b.subscribers_dropped() == 0, name + ": no subscriber was disconnected");
  check(!log.has("defect"), name + ": no outbox overflowed");
}

// Small socket buffers on both sides, so that a subscriber that does not keep up is felt
// after a few frames.
void small_window(subscriber_client& client, const std::vector<std::uint16_t>& channels) {
  client.socket().set_option(net::socket_base::receive_buffer_size(4096));
  client.subscribe(channels);
}

void flood_scenario(const config& cfg) {
  const std::string name = name_of(cfg) + " (flood)";
  constexpr std::uint32_t frames = 20000; // 20 MiB
  log_sink log;
  broker_options o = one_channel_options(cfg, log);
  broker b(o);
  net::io_context io;
  subscriber_client fast(io, b.subscriber_port());
  fast.subscribe({0});
  subscriber_client slow(io, b.subscriber_port());
  slow.subscribe({0}); // (a small receive buffer too would crawl on zero-window probes)
  ordered_reader fast_reader(fast, frames, o.max_frame);
  // 20,000 frames, a 2 ms pause every 16: at least 2.5 s, far slower than the publisher.
  ordered_reader slow_reader(slow, frames, o.max_frame, std::chrono::microseconds(2000));
  const auto t0 = clock_type::now();
  {
    publisher_client p(io, b.publisher_port());
    flood(p, 0, 0, frames, 1024);
  }
  check(eventually([&] { return fast_reader.next() == frames; }, std::chrono::seconds(120)),
        name + ": the fast subscriber got every frame (" + std::to_string(fast_reader.next()) +
            " of " + std::to_string(frames) + ")");
  check(eventually([&] { return slow_reader.next() == frames; }, std::chrono::seconds(120)),
        name + ": the slow subscriber got every frame (" + std::to_string(slow_reader.next()) +
            " of " + std::to_string(frames) + ")");
  check(clock_type::now() - t0 >= std::chrono::seconds(2),
        name + ": the slow reader set the pace (it cannot read all in less than 2.5 s)");
  b.stop();
  check(fast_reader.wrong() == 0, name + ": the fast subscriber got them in order, once each");
  check(slow_reader.wrong() == 0, name + ": the slow subscriber got them in order, once each");
  check(b.subscribers_dropped() == 0, name + ": nobody was disconnected");
  check(!log.has("defect"), name + ": no outbox overflowed");
}

void stall(const config& cfg) {
  const std::string name = name_of(cfg) + " (stall)";
  constexpr std::uint32_t frames = 32768; // 32 MiB
  log_sink log;
  broker_options o = one_channel_options(cfg, log);
  o.stall_timeout = std::chrono::milliseconds(1000);
  broker b(o);
  net::io_context io;
  subscriber_client silent(io, b.subscriber_port());
  small_window(silent, {0});
  subscriber_client fast(io, b.subscriber_port());
  fast.subscribe({0});
  ordered_reader reader(fast, frames, o.max_frame);
  const long before = rss_kib();
  std::atomic<long> peak{before};
  std::atomic<bool> sampling{true};
  std::thread sampler([&] {
    while (sampling.load()) {
      const long now = rss_kib();
      if (now > peak.load()) {
        peak = now;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  });
  const auto t0 = clock_type::now();
  {
    publisher_client p(io, b.publisher_port());
    flood(p, 0, 0, frames, 1024);
  }
  check(eventually([&] { return reader.next() == frames; }, std::chrono::seconds(120)),
        name + ": the fast subscriber got every frame (" + std::to_string(reader.next()) + " of " +
            std::to_string(frames) + ")");
  const auto took = clock_type::now() - t0;
  sampling = false;
  sampler.join();
  b.stop();
  check(reader.wrong() == 0, name + ": the fast subscriber got them in order, once each");
  check(b.subscribers_dropped() == 1, name + ": the silent subscriber was disconnected (" +
                                          std::to_string(b.subscribers_dropped()) + ")");
  check(log.count("stalled") == 1, name + ": the disconnection was logged once");
  check(took >= std::chrono::milliseconds(900),
        name + ": not before the stall window (everything flowed past the silent one)");
  const long grew = peak.load() - before;
  if (!sanitized) { // sanitizers keep freed memory in quarantine
    check(grew < 16 * 1024, name + ": RSS grew by " + std::to_string(grew / 1024) +
                                " MiB while 32 MiB flowed (at most 16)");
  }
  std::printf("%s: RSS +%ld KiB, %.2f s\n", name.c_str(), grew,
              std::chrono::duration<double>(took).count());
}

void halfclose(const config& cfg) {
  const std::string name = name_of(cfg) + " (half-close)";
  constexpr std::uint32_t frames = 100;
  log_sink log;
  broker_options o = options_for(cfg, log);
  o.channels = 1;
  broker b(o);
  net::io_context io;
  subscriber_client s(io, b.subscriber_port());
  s.subscribe({0});
  s.socket().shutdown(tcp::socket::shutdown_send);
  ordered_reader reader(s, frames, o.max_frame);
  {
    publisher_client p(io, b.publisher_port());
    flood(p, 0, 0, frames, 100);
  }
  check(eventually([&] { return reader.next() == frames; }, std::chrono::seconds(20)),
        name + ": the half-closed subscriber got " + std::to_string(reader.next()) + " of " +
            std::to_string(frames));
  b.stop();
  check(reader.wrong() == 0, name + ": in order, once each");
}

void idle(const config& cfg) {
  const std::string name = name_of(cfg) + " (1,500 idle)";
  constexpr int idle_subscribers = 1500;
  constexpr std::uint32_t frames = 2000;
  rlimit r{};
  ::getrlimit(RLIMIT_NOFILE, &r);
  if (r.rlim_cur < 3200 && r.rlim_max >= 3200) {
    r.rlim_cur = 3200;
    ::setrlimit(RLIMIT_NOFILE, &r);
  }
  ::getrlimit(RLIMIT_NOFILE, &r);
  if (r.rlim_cur < 3200) {
    check(false, name + ": needs 3,200 descriptors (both ends of 1,500 connections), has " +
                     std::to_string(r.rlim_cur));
    return;
  }
  log_sink log;
  broker_options o = options_for(cfg, log);
  o.channels = 2;
  broker b(o);
  net::io_context io;
  subscriber_client live(io, b.subscriber_port());
  live.subscribe({0});
  ordered_reader reader(live, frames, o.max_frame);
  std::this_thread::sleep_for(std::chrono::milliseconds(100)); // the broker's threads settle
  const int threads_before = threads_now();
  std::vector<std::unique_ptr<subscriber_client>> idle;
  for (int i = 0; i < idle_subscribers; ++i) {
    idle.emplace_back(new subscriber_client(io, b.subscriber_port()));
    idle.back()->subscribe({static_cast<std::uint16_t>(i % 2)});
  }
  check(b.connections() >= idle_subscribers + 1,
        name + ": the broker holds " + std::to_string(b.connections()) + " connections");
  const int threads_with = threads_now();
  check(threads_with == threads_before, name + ": threads before " +
                                            std::to_string(threads_before) + ", with 1,500 idle " +
                                            std::to_string(threads_with));
  {
    publisher_client p(io, b.publisher_port());
    flood(p, 0, 0, frames, 64); // channel 0: the live one and 750 idle ones (who never read)
  }
  check(eventually([&] { return reader.next() == frames; }, std::chrono::seconds(30)),
        name + ": the live subscriber got " + std::to_string(reader.next()) + " of " +
            std::to_string(frames));
  check(reader.wrong() == 0, name + ": in order, once each");
  idle.clear(); // closed: the broker's sessions end at once, no accept needed
  check(eventually([&] { return b.connections() <= 2; }, std::chrono::seconds(20)),
        name + ": ended connections are gone (" + std::to_string(b.connections()) + " left)");
  std::printf("%s: %d threads in the test process before and with 1,500 subscribers\n",
              name.c_str(), threads_with);
  b.stop();
}

// The child of the nofile scenario (forked; the only thread there): a broker limited to
// `descriptors` that prints its ports and serves until SIGTERM.
int serve(queue_kind kind, rlim_t descriptors) {
  rlimit r{};
  ::getrlimit(RLIMIT_NOFILE, &r);
  r.rlim_cur = descriptors;
  if (::setrlimit(RLIMIT_NOFILE, &r) != 0) {
    std::perror("setrlimit");
    return EXIT_FAILURE;
  }
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  broker_options o;
  o.kind = kind;
  o.threads = 2;
  o.channels = 1;
  broker b(o);
  std::printf("%u %u\n", b.publisher_port(), b.subscriber_port());
  std::fflush(stdout);
  timespec limit{};
  limit.tv_sec = 120;
  while (sigtimedwait(&signals, nullptr, &limit) < 0 && errno == EINTR) {
  }
  const std::uint64_t failed = b.accept_failures();
  b.stop();
  std::printf("accept failures %llu\n", static_cast<unsigned long long>(failed));
  std::fflush(stdout);
  return EXIT_SUCCESS;
}

// A broker child of the nofile scenario: forked while the test process has one thread (qemu-
// user's fork fails in a process with threads; and under qemu the binary cannot be exec'd).
struct broker_child {
  pid_t pid = -1;
  FILE* from = nullptr; // the child's stdout
};

broker_child start_child(queue_kind kind) {
  broker_child c;
  int out[2];
  if (::pipe(out) != 0) {
    return c;
  }
  std::fflush(stdout);
  c.pid = ::fork();
  if (c.pid == 0) {
    ::dup2(out[1], 1);
    ::close(out[0]);
    ::close(out[1]);
    std::_Exit(serve(kind, 64));
  }
  ::close(out[1]);
  c.from = ::fdopen(out[0], "r");
  return c;
}

void nofile(const config& cfg, broker_child& child) {
  const std::string name = name_of(cfg) + " (64 descriptors)";
  unsigned pub = 0;
  unsigned sub = 0;
  if (child.pid < 0 || child.from == nullptr || std::fscanf(child.from, "%u %u", &pub, &sub) != 2) {
    check(false, name + ": the broker child did not start");
    return;
  }
  FILE* from = child.from;
  net::io_context io;
  {
    std::vector<std::unique_ptr<tcp::socket>> many;
    for (int i = 0; i < 200; ++i) { // past the limit: the kernel queues what is not accepted
      many.emplace_back(new tcp::socket(io));
      connect_loopback(*many.back(), static_cast<unsigned short>(i % 2 == 0 ? pub : sub));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
  } // all 200 close
  std::uint32_t got = 0;
  {
    subscriber_client s(io, static_cast<unsigned short>(sub));
    s.subscribe({0});
    ordered_reader reader(s, 100, 1 << 16);
    publisher_client p(io, static_cast<unsigned short>(pub));
    flood(p, 0, 0, 100, 100);
    eventually([&] { return reader.next() == 100; }, std::chrono::seconds(20));
    got = reader.next();
    check(reader.wrong() == 0 || got < 100, name + ": in order, once each");
  }
  check(got == 100,
        name + ": a new pair was served after the storm (" + std::to_string(got) + " of 100)");
  int status = 0;
  check(::waitpid(child.pid, &status, WNOHANG) == 0, name + ": the broker is alive");
  ::kill(child.pid, SIGTERM);
  unsigned long long failed = 0;
  check(std::fscanf(from, " accept failures %llu", &failed) == 1 && failed > 0,
        name + ": the broker met the limit (" + std::to_string(failed) + " failed accepts)");
  std::fclose(from);
  child.from = nullptr;
  ::waitpid(child.pid, &status, 0);
  check(WIFEXITED(status) && WEXITSTATUS(status) == 0, name + ": the broker exited cleanly");
}

void stop_under_load(const config& cfg) {
  const std::string name = name_of(cfg) + " (stop under load)";
  log_sink log;
  broker_options o = options_for(cfg, log);
  o.channels = 2;
  o.channel_capacity = 2;
  o.subscriber_backlog = 2;
  o.max_frame = 4096;
  o.stall_timeout = std::chrono::seconds(60);
  std::unique_ptr<broker> b(new broker(o));
  net::io_context io;
  subscriber_client silent(io, b->subscriber_port());
  silent.subscribe({0, 1});
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
  b.reset(); // the destructor stops
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

const config pool_configs[] = {{queue_kind::mutex_deque, runtime_kind::pool},
                               {queue_kind::queue, runtime_kind::pool},
                               {queue_kind::bounded_queue, runtime_kind::pool}};

void run_scenario(const std::string& scenario, const config& c, broker_child& child) {
  if (scenario == "traffic") {
    traffic(c);
    traffic({c.kind, runtime_kind::io_context});
  } else if (scenario == "flood") {
    flood_scenario(c);
  } else if (scenario == "stall") {
    stall(c);
  } else if (scenario == "halfclose") {
    halfclose(c);
  } else if (scenario == "idle") {
    idle(c);
  } else if (scenario == "nofile") {
    if (sanitized) { // their runtime needs descriptors of its own for some checks (a pipe)
      std::printf("%s (64 descriptors): not run under sanitizers\n", name_of(c).c_str());
    } else {
      nofile(c, child);
    }
  } else if (scenario == "stop") {
    stop_under_load(c);
    stop_under_load({c.kind, runtime_kind::io_context});
  }
}

} // namespace

int main(int argc, char** argv) {
  const std::string scenario = argc > 1 ? argv[1] : "";
  const char* const scenarios[] = {"traffic", "flood",  "stall", "halfclose",
                                   "idle",    "nofile", "stop"};
  if (std::find(std::begin(scenarios), std::end(scenarios), scenario) == std::end(scenarios)) {
    std::fprintf(stderr, "usage: pubsub_test traffic|flood|stall|halfclose|idle|nofile|stop\n");
    return 2;
  }
  // The nofile scenario's brokers, started before any thread is.
  std::vector<broker_child> children(sizeof pool_configs / sizeof pool_configs[0]);
  if (scenario == "nofile" && !sanitized) {
    for (std::size_t i = 0; i < children.size(); ++i) {
      children[i] = start_child(pool_configs[i].kind);
    }
  }
  watchdog dog("pubsub_test " + scenario, std::chrono::seconds(240));
  for (std::size_t i = 0; i < children.size(); ++i) {
    const config& c = pool_configs[i];
    try {
      run_scenario(scenario, c, children[i]);
    } catch (const std::exception& e) {
      check(false, scenario + " " + name_of(c.kind) + ": " + e.what());
    }
    std::printf("%s %s: %s\n", scenario.c_str(), name_of(c.kind), failures == 0 ? "ok" : "FAILED");
    std::fflush(stdout);
  }
  for (broker_child& c : children) { // those a failed check left serving
    if (c.pid > 0 && c.from != nullptr) {
      ::kill(c.pid, SIGTERM);
      std::fclose(c.from);
      ::waitpid(c.pid, nullptr, 0);
    }
  }
  return failures == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
