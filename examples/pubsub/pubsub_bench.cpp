// SPDX-License-Identifier: BSL-1.0
// The pub/sub broker's throughput and latency by channel queue kind, over 127.0.0.1: 2
// publishers send N frames each (alternating between 2 channels, a send timestamp in every
// payload), 2 subscribers take both channels. Two tables: at full speed (frames delivered per
// second, first send to last receipt; the latency there is mostly waiting behind the burst),
// and paced at 10,000 frames/s per publisher (the p50 / p99 of send-to-receipt latency of a
// broker that keeps up). Payloads of 16 bytes and 1 KiB; the kinds run in alternating rounds
// (medians over rounds). Every run is bounded in count and in time (10 s); a run that does not
// deliver everything fails the program.
//
//   pubsub_bench [--rounds=R] [--frames=N] [--quick]
#include "broker.h"
#include "client.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
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
  double frames_per_second = 0;
  double p50_us = 0;
  double p99_us = 0;
  bool complete = false;
};

result run(queue_kind kind, std::size_t payload, std::uint32_t frames, double rate) {
  constexpr int publishers = 2;
  constexpr int subscribers = 2;
  broker_options o;
  o.kind = kind;
  o.channels = 2;
  o.subscriber_backlog = 1 << 16;
  o.max_frame = 4096;
  o.log = [](const std::string&) {};
  broker b(o);
  net::io_context io;
  std::vector<std::unique_ptr<subscriber_client>> subs;
  for (int s = 0; s < subscribers; ++s) {
    subs.emplace_back(new subscriber_client(io, b.subscriber_port()));
    subs.back()->subscribe({0, 1});
  }
  const std::uint64_t per_subscriber = static_cast<std::uint64_t>(publishers) * frames;
  const auto deadline = clock_type::now() + std::chrono::seconds(10);
  std::vector<std::vector<std::uint64_t>> latencies(subscribers);
  std::vector<std::thread> readers;
  std::atomic<std::uint64_t> last_receipt{0};
  std::atomic<int> finished{0};
  for (int s = 0; s < subscribers; ++s) {
    latencies[static_cast<std::size_t>(s)].reserve(per_subscriber);
    readers.emplace_back([&, s] {
      frame f;
      auto& mine = latencies[static_cast<std::size_t>(s)];
      while (mine.size() < per_subscriber && subs[static_cast<std::size_t>(s)]->receive(f)) {
        std::uint64_t sent = 0;
        for (int i = 0; i < 8; ++i) {
          sent = (sent << 8) | static_cast<unsigned char>(f.payload[static_cast<std::size_t>(i)]);
        }
        const std::uint64_t t = now_ns();
        mine.push_back(t - sent);
        if (mine.size() == per_subscriber) {
          std::uint64_t prev = last_receipt.load();
          while (prev < t && !last_receipt.compare_exchange_weak(prev, t)) {
          }
        }
      }
      finished.fetch_add(1);
    });
  }
  const std::uint64_t start = now_ns();
  std::vector<std::thread> pubs;
  for (int p = 0; p < publishers; ++p) {
    pubs.emplace_back([&] {
      publisher_client client(io, b.publisher_port());
      std::string body(payload < 8 ? 8 : payload, 'p');
      const auto begin = clock_type::now();
      for (std::uint32_t k = 0; k < frames && clock_type::now() < deadline; ++k) {
        if (rate > 0) { // paced: frame k leaves at begin + k / rate
          std::this_thread::sleep_until(
              begin + std::chrono::duration_cast<clock_type::duration>(
                          std::chrono::duration<double>(static_cast<double>(k) / rate)));
        }
        std::uint64_t t = now_ns();
        for (int i = 7; i >= 0; --i) {
          body[static_cast<std::size_t>(i)] = static_cast<char>(t & 0xFF);
          t >>= 8;
        }
        client.publish(static_cast<std::uint16_t>(k % 2), body);
      }
    });
  }
  for (auto& t : pubs) {
    t.join();
  }
  while (finished.load() < subscribers && clock_type::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  b.stop();
  for (auto& t : readers) {
    t.join();
  }
  result r;
  std::vector<std::uint64_t> all;
  r.complete = true;
  for (auto& l : latencies) {
    r.complete = r.complete && l.size() == per_subscriber;
    all.insert(all.end(), l.begin(), l.end());
  }
  if (all.empty()) {
    return r;
  }
  std::sort(all.begin(), all.end());
  r.p50_us = static_cast<double>(all[all.size() / 2]) / 1000.0;
  r.p99_us = static_cast<double>(all[all.size() * 99 / 100]) / 1000.0;
  const std::uint64_t last = last_receipt.load();
  r.frames_per_second =
      last > start ? static_cast<double>(all.size()) * 1e9 / static_cast<double>(last - start) : 0;
  return r;
}

} // namespace

int main(int argc, char** argv) {
  int rounds = 3;
  std::uint32_t frames = 50000;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--quick") {
      rounds = 1;
      frames = 300;
    } else if (a.compare(0, 9, "--rounds=") == 0) {
      rounds = std::stoi(a.substr(9));
    } else if (a.compare(0, 9, "--frames=") == 0) {
      frames = static_cast<std::uint32_t>(std::stoul(a.substr(9)));
    } else {
      std::fprintf(stderr, "usage: pubsub_bench [--rounds=R] [--frames=N] [--quick]\n");
      return 2;
    }
  }
  const queue_kind kinds[] = {queue_kind::mutex_deque, queue_kind::queue,
                              queue_kind::bounded_queue};
  bool ok = true;
  for (double rate : {0.0, 10000.0}) {
    const std::uint32_t n = rate > 0 ? std::min<std::uint32_t>(frames, 20000) : frames;
    if (rate > 0) {
      std::printf("\npaced, 2 publishers x %u frames at %.0f frames/s each, 2 subscribers, %d "
                  "rounds (medians)\n\n",
                  n, rate, rounds);
    } else {
      std::printf("pub/sub over 127.0.0.1 at full speed: 2 publishers x %u frames, 2 "
                  "subscribers, %d rounds (medians)\n\n",
                  n, rounds);
    }
    std::printf(
        "| queue | payload | frames/s | p50 latency | p99 latency |\n|---|---|---|---|---|\n");
    for (std::size_t payload : {std::size_t(16), std::size_t(1024)}) {
      std::vector<std::vector<result>> by_kind(3);
      for (int r = 0; r < rounds; ++r) {
        for (int k = 0; k < 3; ++k) {
          const int which = r % 2 == 0 ? k : 2 - k; // alternate the order round by round
          result one = run(kinds[which], payload, n, rate);
          ok = ok && one.complete;
          by_kind[static_cast<std::size_t>(which)].push_back(one);
        }
      }
      for (int k = 0; k < 3; ++k) {
        auto& v = by_kind[static_cast<std::size_t>(k)];
        auto median = [&v](double result::*field) {
          std::vector<double> x;
          for (auto& one : v) {
            x.push_back(one.*field);
          }
          std::sort(x.begin(), x.end());
          return x[x.size() / 2];
        };
        std::printf("| %s | %zu B | %.0f | %.1f us | %.1f us |\n", name_of(kinds[k]), payload,
                    median(&result::frames_per_second), median(&result::p50_us),
                    median(&result::p99_us));
      }
    }
  }
  if (!ok) {
    std::fprintf(stderr, "pubsub_bench: a run did not deliver every frame within 10 s\n");
  }
  return ok ? EXIT_SUCCESS : EXIT_FAILURE;
}
