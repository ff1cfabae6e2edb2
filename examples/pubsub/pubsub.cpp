// SPDX-License-Identifier: BSL-1.0
// The pub/sub example as a program: a broker, a publisher and a subscriber (README.md here).
//
//   pubsub broker    [--queue=mutex_deque|queue|bounded_queue] [--channels=N]
//                    [--pub-port=P] [--sub-port=S] [--backlog=B] [--seconds=T]
//                    [--threads=N] [--runtime=pool|io_context] [--capacity=C] [--stall-ms=MS]
//
// The broker serves until SIGINT or SIGTERM (or --seconds), then stops and exits 0.
//   pubsub publish   --port=P --channel=C [--count=N] [--size=BYTES]
//   pubsub subscribe --port=S --channels=C1,C2,... [--count=N]
#include "broker.h"
#include "client.h"

#include <signal.h>
#include <time.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace {

std::map<std::string, std::string> options_of(int argc, char** argv) {
  std::map<std::string, std::string> out;
  for (int i = 2; i < argc; ++i) {
    std::string a = argv[i];
    if (a.compare(0, 2, "--") != 0) {
      throw std::invalid_argument("unexpected argument '" + a + "'");
    }
    const auto eq = a.find('=');
    out[a.substr(2, eq == std::string::npos ? std::string::npos : eq - 2)] =
        eq == std::string::npos ? "" : a.substr(eq + 1);
  }
  return out;
}

unsigned long number(const std::map<std::string, std::string>& o, const std::string& key,
                     unsigned long fallback) {
  const auto it = o.find(key);
  return it == o.end() ? fallback : std::stoul(it->second);
}

int usage() {
  std::fputs("usage: pubsub broker [--queue=mutex_deque|queue|bounded_queue] [--channels=N]\n"
             "                     [--pub-port=P] [--sub-port=S] [--backlog=B] [--seconds=T]\n"
             "                     [--threads=N] [--runtime=pool|io_context] [--capacity=C]\n"
             "                     [--stall-ms=MS]\n"
             "       pubsub publish --port=P --channel=C [--count=N] [--size=BYTES]\n"
             "       pubsub subscribe --port=S --channels=C1,C2,... [--count=N]\n",
             stderr);
  return 2;
}

} // namespace

int main(int argc, char** argv) {
  using namespace pubsub;
  if (argc < 2) {
    return usage();
  }
  try {
    const std::string mode = argv[1];
    const auto o = options_of(argc, argv);
    net::io_context io;
    if (mode == "broker") {
      broker_options bo;
      bo.kind = kind_from(o.count("queue") ? o.at("queue") : "queue");
      const std::string runtime = o.count("runtime") ? o.at("runtime") : "pool";
      if (runtime != "pool" && runtime != "io_context") {
        throw std::invalid_argument("unknown runtime '" + runtime + "' (pool or io_context)");
      }
      bo.runtime = runtime == "pool" ? runtime_kind::pool : runtime_kind::io_context;
      bo.threads = static_cast<unsigned>(number(o, "threads", 0));
      bo.channels = static_cast<std::uint16_t>(number(o, "channels", 4));
      bo.publisher_port = static_cast<unsigned short>(number(o, "pub-port", 0));
      bo.subscriber_port = static_cast<unsigned short>(number(o, "sub-port", 0));
      bo.subscriber_backlog = number(o, "backlog", bo.subscriber_backlog);
      bo.channel_capacity = number(o, "capacity", bo.channel_capacity);
      bo.stall_timeout = std::chrono::milliseconds(number(o, "stall-ms", 2000));
      // SIGINT and SIGTERM stay blocked in every thread (the broker's threads inherit the
      // mask): sigtimedwait below takes them.
      sigset_t signals;
      sigemptyset(&signals);
      sigaddset(&signals, SIGINT);
      sigaddset(&signals, SIGTERM);
      pthread_sigmask(SIG_BLOCK, &signals, nullptr);
      broker b(bo);
      std::printf("broker (%s, %s, %u threads, %u channels): publishers on 127.0.0.1:%u, "
                  "subscribers on 127.0.0.1:%u\n",
                  name_of(bo.kind), name_of(bo.runtime), b.threads(),
                  static_cast<unsigned>(bo.channels), b.publisher_port(), b.subscriber_port());
      std::fflush(stdout);
      timespec limit{};
      limit.tv_sec = static_cast<time_t>(number(o, "seconds", 3600));
      while (sigtimedwait(&signals, nullptr, &limit) < 0 && errno == EINTR) {
      }
      b.stop();
      return EXIT_SUCCESS;
    }
    if (mode == "publish") {
      publisher_client p(io, static_cast<unsigned short>(number(o, "port", 0)));
      const auto channel = static_cast<std::uint16_t>(number(o, "channel", 0));
      const unsigned long count = number(o, "count", 10);
      const std::string payload(number(o, "size", 16), 'm');
      for (unsigned long i = 0; i < count; ++i) {
        p.publish(channel, payload);
      }
      std::printf("published %lu frames to channel %u\n", count, static_cast<unsigned>(channel));
      return EXIT_SUCCESS;
    }
    if (mode == "subscribe") {
      subscriber_client s(io, static_cast<unsigned short>(number(o, "port", 0)));
      std::vector<std::uint16_t> channels;
      std::stringstream list(o.count("channels") ? o.at("channels") : "0");
      for (std::string c; std::getline(list, c, ',');) {
        channels.push_back(static_cast<std::uint16_t>(std::stoul(c)));
      }
      s.subscribe(channels);
      const unsigned long count = number(o, "count", 10);
      frame f;
      unsigned long n = 0;
      while (n < count && s.receive(f)) {
        ++n;
        std::printf("channel %u: %zu bytes\n", static_cast<unsigned>(f.channel), f.payload.size());
      }
      return n == count ? EXIT_SUCCESS : EXIT_FAILURE;
    }
    return usage();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "pubsub: %s\n", e.what());
    return EXIT_FAILURE;
  }
}
