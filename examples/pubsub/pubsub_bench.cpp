// SPDX-License-Identifier: BSL-1.0
// The pub/sub broker's throughput and latency over 127.0.0.1, by channel queue kind and by event
// loop: async::asio_context over async::threadpool (ours) against Asio's own io_context run by
// as many threads (the usual design), the same broker code on both.
//
// One run: a broker with 2 channels; S subscribers, each of both channels, read by one client
// thread (an io_context of its own, asynchronous reads); 2 publishers, each to its channel,
// send frames that carry their send time and sequence number. Two tables:
//   - full speed: frames delivered per second (every subscriber's copy counts; first send to
//     last receipt);
//   - paced (--rate deliveries per second in all): the p50 / p99 of send-to-receipt latency of
//     a broker that keeps up.
// Every run is bounded (20 s) and fails the program if a frame is missing, comes twice or out
// of order. The configurations run in alternating order, round by round; the tables show
// medians over rounds and, per queue kind, the median (min-max) of the per-round ratio of ours
// to io_context.
//
//   pubsub_bench [--rounds=R] [--deliveries=N] [--subscribers=1,100,1000] [--payloads=64,1024]
//                [--rate=R] [--threads=T] [--quick] [--help]
#include "broker.h"

#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace {

using namespace pubsub;
using clock_type = std::chrono::steady_clock;

std::uint64_t now_ns() {
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(clock_type::now().time_since_epoch())
          .count());
}

struct result {
  double deliveries_per_second = 0;
  double p50_us = 0;
  double p99_us = 0;
  bool complete = false;
};

// S subscriber connections read by one thread: counts frames, checks each publisher's order,
// keeps every latency.
class subscribers {
public:
  subscribers(unsigned short port, int count, std::uint64_t expected_each)
      : expected_each_(expected_each) {
    for (int i = 0; i < count; ++i) {
      links_.emplace_back(new link(io_));
      tcp::socket& s = links_.back()->socket;
      s.connect(tcp::endpoint(net::ip::address_v4::loopback(), port));
      s.set_option(tcp::no_delay(true));
      net::write(s, net::buffer(encode(control_channel, subscription({0, 1}))));
      unsigned char answer[header_size];
      net::read(s, net::buffer(answer));
    }
    latencies_.reserve(static_cast<std::size_t>(expected_each) * links_.size());
    for (auto& l : links_) {
      read(*l);
    }
    thread_ = std::thread([this] { io_.run(); });
  }
  ~subscribers() { stop(); }
  void stop() {
    io_.stop();
    if (thread_.joinable()) {
      thread_.join();
    }
  }
  bool done() const { return finished_.load() == links_.size(); }
  std::uint64_t last_receipt() const { return last_.load(); }
  bool wrong() const { return wrong_.load(); }
  // After stop().
  std::vector<std::uint64_t>& latencies() { return latencies_; }

private:
  struct link {
    explicit link(net::io_context& io) : socket(io) {}
    tcp::socket socket;
    std::vector<unsigned char> buffer = std::vector<unsigned char>(1 << 16);
    std::size_t begin = 0;
    std::size_t end = 0;
    std::uint64_t count = 0;
    std::uint32_t next[2] = {0, 0};
  };

  void read(link& l) {
    l.socket.async_read_some(net::buffer(l.buffer.data() + l.end, l.buffer.size() - l.end),
                             [this, &l](error_code ec, std::size_t n) {
                               if (ec) {
                                 return;
                               }
                               l.end += n;
                               parse(l);
                             });
  }

  void parse(link& l) {
    const std::uint64_t t = now_ns();
    while (l.end - l.begin >= 4) {
      const std::uint32_t length = get_u32(&l.buffer[l.begin]);
      if (l.end - l.begin < 4 + std::size_t(length)) {
        break;
      }
      const unsigned char* p = &l.buffer[l.begin + 4];
      const std::uint16_t channel = get_u16(p);
      if (channel != control_channel) {
        std::uint64_t sent = 0;
        for (int i = 0; i < 8; ++i) {
          sent = (sent << 8) | p[2 + i];
        }
        const std::uint32_t seq = get_u32(p + 10);
        if (channel > 1 || seq != l.next[channel]) {
          wrong_ = true;
        } else {
          ++l.next[channel];
        }
        latencies_.push_back(t - sent);
        if (++l.count == expected_each_) {
          finished_.fetch_add(1);
          std::uint64_t prev = last_.load();
          while (prev < t && !last_.compare_exchange_weak(prev, t)) {
          }
        }
      }
      l.begin += 4 + std::size_t(length);
    }
    std::copy(l.buffer.begin() + static_cast<std::ptrdiff_t>(l.begin),
              l.buffer.begin() + static_cast<std::ptrdiff_t>(l.end), l.buffer.begin());
    l.end -= l.begin;
    l.begin = 0;
    read(l);
  }

  const std::uint64_t expected_each_;
  net::io_context io_;
  std::vector<std::unique_ptr<link>> links_;
  std::vector<std::uint64_t> latencies_;
  std::atomic<std::size_t> finished_{0};
  std::atomic<std::uint64_t> last_{0};
  std::atomic<bool> wrong_{false};
  std::thread thread_;
};

// rate: deliveries per second in all (paced), or 0 (full speed).
result run(queue_kind kind, runtime_kind runtime, unsigned threads, int subscriber_count,
           std::size_t payload, std::uint64_t deliveries, double rate) {
  constexpr int publishers = 2;
  broker_options o;
  o.kind = kind;
  o.runtime = runtime;
  o.threads = threads;
  o.channels = 2;
  o.max_frame = 4096;
  o.log = [](const std::string&) {};
  broker b(o);
  const std::uint32_t per_publisher = static_cast<std::uint32_t>((std::max)(
      std::uint64_t(16), deliveries / static_cast<std::uint64_t>(subscriber_count * publishers)));
  subscribers subs(b.subscriber_port(), subscriber_count,
                   static_cast<std::uint64_t>(per_publisher) * publishers);
  const auto deadline = clock_type::now() + std::chrono::seconds(20);
  const std::uint64_t start = now_ns();
  std::vector<std::thread> pubs;
  for (int p = 0; p < publishers; ++p) {
    pubs.emplace_back([&, p] {
      net::io_context io;
      tcp::socket s(io);
      s.connect(tcp::endpoint(net::ip::address_v4::loopback(), b.publisher_port()));
      s.set_option(tcp::no_delay(true));
      std::string body((std::max)(payload, std::size_t(12)), 'p');
      std::string chunk;
      // Paced: frame k of this publisher leaves at begin + k / (its share of the rate).
      const double per_second = rate / static_cast<double>(subscriber_count * publishers);
      const auto begin = clock_type::now();
      for (std::uint32_t k = 0; k < per_publisher && clock_type::now() < deadline; ++k) {
        if (rate > 0) {
          std::this_thread::sleep_until(
              begin + std::chrono::duration_cast<clock_type::duration>(
                          std::chrono::duration<double>(static_cast<double>(k) / per_second)));
        }
        std::uint64_t t = now_ns();
        for (int i = 7; i >= 0; --i) {
          body[static_cast<std::size_t>(i)] = static_cast<char>(t & 0xFF);
          t >>= 8;
        }
        for (int i = 0; i < 4; ++i) {
          body[static_cast<std::size_t>(8 + i)] = static_cast<char>((k >> (24 - 8 * i)) & 0xFF);
        }
        chunk += encode(static_cast<std::uint16_t>(p), body);
        if (rate > 0 || chunk.size() >= 16 * 1024 || k + 1 == per_publisher) {
          error_code ec;
          net::write(s, net::buffer(chunk), ec);
          chunk.clear();
          if (ec) {
            return;
          }
        }
      }
    });
  }
  for (auto& t : pubs) {
    t.join();
  }
  while (!subs.done() && clock_type::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  result r;
  r.complete = subs.done() && !subs.wrong();
  const std::uint64_t last = subs.last_receipt();
  subs.stop();
  b.stop();
  auto& all = subs.latencies();
  if (all.empty()) {
    return r;
  }
  std::sort(all.begin(), all.end());
  r.p50_us = static_cast<double>(all[all.size() / 2]) / 1000.0;
  r.p99_us = static_cast<double>(all[all.size() * 99 / 100]) / 1000.0;
  r.deliveries_per_second =
      last > start ? static_cast<double>(all.size()) * 1e9 / static_cast<double>(last - start) : 0;
  return r;
}

std::vector<unsigned long> list_of(const std::string& text) {
  std::vector<unsigned long> out;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');) {
    out.push_back(std::stoul(item));
  }
  return out;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

std::string per_second_text(double per_second) {
  char text[32];
  if (per_second >= 1e6) {
    std::snprintf(text, sizeof text, "%.2f M", per_second / 1e6);
  } else {
    std::snprintf(text, sizeof text, "%.0f k", per_second / 1e3);
  }
  return text;
}

int usage(int status) {
  std::fputs(
      "usage: pubsub_bench [--rounds=R] [--deliveries=N] [--subscribers=LIST] [--payloads=LIST]\n"
      "                    [--rate=R] [--threads=T] [--quick] [--help]\n"
      "  --rounds=R          rounds of every configuration, alternating order (default 3)\n"
      "  --deliveries=N      frames delivered per run, all subscribers together (default 400000)\n"
      "  --subscribers=LIST  subscriber counts (default 1,100,1000)\n"
      "  --payloads=LIST     payload sizes in bytes, at least 12 (default 64,1024)\n"
      "  --rate=R            the paced runs' deliveries per second, all subscribers together\n"
      "                      (default 100000; each paced run lasts at most 1 s)\n"
      "  --threads=T         the broker's threads on both event loops (default: the hardware's,\n"
      "                      at least 2)\n"
      "  --quick             1 round, 2,000 deliveries, 1 and 20 subscribers, 64 B (a smoke run)\n",
      status == 0 ? stdout : stderr);
  return status;
}

} // namespace

int main(int argc, char** argv) {
  int rounds = 3;
  std::uint64_t deliveries = 400000;
  std::vector<unsigned long> subscriber_counts = {1, 100, 1000};
  std::vector<unsigned long> payloads = {64, 1024};
  unsigned threads = (std::max)(2u, std::thread::hardware_concurrency());
  double paced_rate = 100000;
  try {
    for (int i = 1; i < argc; ++i) {
      const std::string a = argv[i];
      const std::string value = a.find('=') == std::string::npos ? "" : a.substr(a.find('=') + 1);
      if (a == "--quick") {
        rounds = 1;
        deliveries = 2000;
        paced_rate = 20000;
        subscriber_counts = {1, 20};
        payloads = {64};
      } else if (a == "--help") {
        return usage(0);
      } else if (a.compare(0, 9, "--rounds=") == 0) {
        rounds = std::stoi(value);
      } else if (a.compare(0, 13, "--deliveries=") == 0) {
        deliveries = std::stoull(value);
      } else if (a.compare(0, 14, "--subscribers=") == 0) {
        subscriber_counts = list_of(value);
      } else if (a.compare(0, 11, "--payloads=") == 0) {
        payloads = list_of(value);
      } else if (a.compare(0, 7, "--rate=") == 0) {
        paced_rate = std::stod(value);
      } else if (a.compare(0, 10, "--threads=") == 0) {
        threads = static_cast<unsigned>(std::stoul(value));
      } else {
        return usage(2);
      }
    }
  } catch (const std::exception&) {
    return usage(2);
  }
  if (rounds < 1 || threads < 1 || !(paced_rate >= 1) || subscriber_counts.empty() ||
      payloads.empty() ||
      std::find(subscriber_counts.begin(), subscriber_counts.end(), 0ul) !=
          subscriber_counts.end()) {
    return usage(2);
  }
  // Both ends of every subscriber connection live in this process.
  const unsigned long most = *std::max_element(subscriber_counts.begin(), subscriber_counts.end());
  rlimit r{};
  ::getrlimit(RLIMIT_NOFILE, &r);
  const rlim_t want = static_cast<rlim_t>(2 * most + 64);
  if (r.rlim_cur < want) {
    r.rlim_cur = (std::min)(want, r.rlim_max);
    ::setrlimit(RLIMIT_NOFILE, &r);
    if (r.rlim_cur < want) {
      std::fprintf(stderr, "pubsub_bench: %lu subscribers need %lu descriptors; the limit is %lu\n",
                   most, static_cast<unsigned long>(want), static_cast<unsigned long>(r.rlim_cur));
      return EXIT_FAILURE;
    }
  }

  struct config {
    queue_kind kind;
    runtime_kind runtime;
  };
  std::vector<config> configs;
  for (queue_kind k : {queue_kind::mutex_deque, queue_kind::queue, queue_kind::bounded_queue}) {
    configs.push_back({k, runtime_kind::pool});
    configs.push_back({k, runtime_kind::io_context});
  }
  bool ok = true;
  // One table: every (subscribers, payload) with every configuration, `rounds` rounds.
  auto sweep = [&](double rate, std::uint64_t n) {
    if (rate > 0) {
      std::printf("\npaced: %.0f deliveries/s in all (2 publishers, every subscriber on both "
                  "channels),\n%llu deliveries per run, broker threads %u, %d rounds: latency "
                  "send to receipt,\nmedians of rounds; ours/io: of the p50s, median (min-max) "
                  "of rounds, below 1 is better\n\n",
                  rate, static_cast<unsigned long long>(n), threads, rounds);
      std::printf("| subs | payload | queue | event loop | p50 | p99 | ours/io p50 |\n"
                  "|---|---|---|---|---|---|---|\n");
    } else {
      std::printf("full speed: 2 publishers, every subscriber on both channels, %llu deliveries "
                  "per run,\nbroker threads %u, %d rounds: deliveries/s (every subscriber's "
                  "copy), medians of rounds;\nours/io: median (min-max) of rounds\n\n",
                  static_cast<unsigned long long>(n), threads, rounds);
      std::printf("| subs | payload | queue | event loop | deliveries/s | ours/io |\n"
                  "|---|---|---|---|---|---|\n");
    }
    for (unsigned long s : subscriber_counts) {
      for (unsigned long payload : payloads) {
        std::vector<std::vector<result>> by(configs.size());
        for (int round = 0; round < rounds; ++round) {
          for (std::size_t i = 0; i < configs.size(); ++i) {
            const std::size_t which = round % 2 == 0 ? i : configs.size() - 1 - i;
            const result one = run(configs[which].kind, configs[which].runtime, threads,
                                   static_cast<int>(s), payload, n, rate);
            if (!one.complete) {
              std::fprintf(stderr,
                           "pubsub_bench: %s on %s, %lu subscribers: frames missing or out "
                           "of order within 20 s\n",
                           name_of(configs[which].kind), name_of(configs[which].runtime), s);
              ok = false;
            }
            by[which].push_back(one);
          }
        }
        for (std::size_t i = 0; i < configs.size(); ++i) {
          std::vector<double> rate_of, p50, p99, ratio;
          const bool ours = configs[i].runtime == runtime_kind::pool;
          for (std::size_t k = 0; k < by[i].size(); ++k) {
            rate_of.push_back(by[i][k].deliveries_per_second);
            p50.push_back(by[i][k].p50_us);
            p99.push_back(by[i][k].p99_us);
            if (ours) {
              const result& io = by[i + 1][k];
              const double a = rate > 0 ? by[i][k].p50_us : by[i][k].deliveries_per_second;
              const double b = rate > 0 ? io.p50_us : io.deliveries_per_second;
              ratio.push_back(b > 0 ? a / b : 0);
            }
          }
          char versus[64] = "";
          if (ours) {
            std::snprintf(versus, sizeof versus, "%.2fx (%.2f-%.2f)", median(ratio),
                          *std::min_element(ratio.begin(), ratio.end()),
                          *std::max_element(ratio.begin(), ratio.end()));
          }
          const char* loop = ours ? "asio_context" : "io_context";
          if (rate > 0) {
            std::printf("| %lu | %lu B | %s | %s | %.0f us | %.0f us | %s |\n", s, payload,
                        name_of(configs[i].kind), loop, median(p50), median(p99), versus);
          } else {
            std::printf("| %lu | %lu B | %s | %s | %s | %s |\n", s, payload,
                        name_of(configs[i].kind), loop, per_second_text(median(rate_of)).c_str(),
                        versus);
          }
          std::fflush(stdout);
        }
      }
    }
  };
  sweep(0, deliveries);
  sweep(paced_rate, (std::min)(deliveries, static_cast<std::uint64_t>(paced_rate)));
  if (!ok) {
    std::fprintf(stderr, "pubsub_bench: a run did not deliver every frame\n");
  }
  return ok ? EXIT_SUCCESS : EXIT_FAILURE;
}
