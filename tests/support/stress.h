// SPDX-License-Identifier: BSL-1.0
// One verifying producer/consumer stress loop for every queue and every calling style.
//
// Producer p sends items (p << 32 | k) for k = 0..n-1. Each consumer checks that the k of every
// producer strictly increases in what it receives (per-producer FIFO), and every item is ticked
// in a table that must end with each entry exactly 1 (nothing lost, nothing duplicated).
#ifndef ASYNC_TESTS_SUPPORT_STRESS_H
#define ASYNC_TESTS_SUPPORT_STRESS_H

#include "test_support.h"

#include "async_catch.h"

#include <cstdio>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace async_test {

enum class got { item, empty, finished };

struct stress_shape {
  std::size_t producers;
  std::size_t consumers;
  std::size_t per_producer;
};

struct stress_report {
  std::size_t received = 0;
  std::size_t fifo_violations = 0;
  std::size_t lost = 0;
  std::size_t duplicated = 0;
  // The first of each kind of failure, in words ("producer 3's item 1207 ..."), for the report.
  std::string first_fifo_violation;
  std::string first_lost;
  std::string first_duplicated;
};

inline std::string describe_item(std::size_t producer, std::int64_t k) {
  return "producer " + std::to_string(producer) + "'s item " + std::to_string(k);
}

/// produce(p, item): must enqueue `item` (retrying itself if it uses try calls).
/// consume(c, out): got::item with `out` set, got::empty (try again), or got::finished.
/// all_produced(): called once every producer has returned (e.g. to close the queue).
template <typename Produce, typename Consume, typename AllProduced>
stress_report run_stress(const stress_shape& shape, Produce produce, Consume consume,
                         AllProduced all_produced) {
  const std::size_t total = shape.producers * shape.per_producer;
  std::unique_ptr<std::atomic<std::uint8_t>[]> seen(new std::atomic<std::uint8_t>[total]);
  for (std::size_t i = 0; i < total; ++i) {
    seen[i].store(0, std::memory_order_relaxed);
  }
  std::atomic<std::size_t> received{0};
  std::atomic<std::size_t> fifo_violations{0};
  std::mutex first_mutex;
  std::string first_fifo_violation;
  auto note_violation = [&](const std::string& what) {
    if (fifo_violations.fetch_add(1) == 0) {
      std::lock_guard<std::mutex> lock(first_mutex);
      first_fifo_violation = what;
    }
  };
  start_barrier barrier(shape.producers + shape.consumers);

  std::vector<std::thread> producers;
  for (std::size_t p = 0; p < shape.producers; ++p) {
    producers.emplace_back([&, p] {
      barrier.arrive_and_wait();
      for (std::size_t k = 0; k < shape.per_producer; ++k) {
        produce(p, (static_cast<std::uint64_t>(p) << 32) | k);
      }
    });
  }
  std::vector<std::thread> consumers;
  for (std::size_t c = 0; c < shape.consumers; ++c) {
    consumers.emplace_back([&, c] {
      std::vector<std::int64_t> last(shape.producers, -1);
      barrier.arrive_and_wait();
      while (received.load(std::memory_order_relaxed) < total) {
        std::uint64_t item = 0;
        const got r = consume(c, item);
        if (r == got::finished) {
          break;
        }
        if (r == got::empty) {
          std::this_thread::yield();
          continue;
        }
        const auto p = static_cast<std::size_t>(item >> 32);
        const auto k = static_cast<std::int64_t>(item & 0xffffffffu);
        if (p >= shape.producers || k >= static_cast<std::int64_t>(shape.per_producer)) {
          // Garbage: counted as a violation (and as received, so that the run still ends).
          note_violation("consumer " + std::to_string(c) + " received garbage " +
                         std::to_string(item));
          received.fetch_add(1);
          continue;
        }
        if (k <= last[p]) {
          note_violation("consumer " + std::to_string(c) + " received " + describe_item(p, k) +
                         " after its item " + std::to_string(last[p]));
        }
        last[p] = k;
        seen[p * shape.per_producer + static_cast<std::size_t>(k)].fetch_add(1);
        received.fetch_add(1, std::memory_order_relaxed);
      }
    });
  }
  for (auto& t : producers) {
    t.join();
  }
  all_produced();
  for (auto& t : consumers) {
    t.join();
  }

  stress_report r;
  r.received = received.load();
  r.fifo_violations = fifo_violations.load();
  r.first_fifo_violation = first_fifo_violation;
  for (std::size_t i = 0; i < total; ++i) {
    const auto n = seen[i].load();
    const std::size_t p = i / shape.per_producer;
    const auto k = static_cast<std::int64_t>(i % shape.per_producer);
    if (n == 0) {
      if (r.lost++ == 0) {
        r.first_lost = describe_item(p, k);
      }
    } else if (n > 1) {
      if (r.duplicated == 0) {
        r.first_duplicated = describe_item(p, k) + " (received " + std::to_string(n) + " times)";
      }
      r.duplicated += n - 1;
    }
  }
  return r;
}

inline void check_report(const stress_shape& shape, const stress_report& r) {
  INFO(shape.producers << "p" << shape.consumers << "c x " << shape.per_producer);
  INFO(
      "first out of order: " << (r.first_fifo_violation.empty() ? "none" : r.first_fifo_violation));
  INFO("first lost: " << (r.first_lost.empty() ? "none" : r.first_lost));
  INFO("first duplicated: " << (r.first_duplicated.empty() ? "none" : r.first_duplicated));
  CHECK(r.fifo_violations == 0);
  CHECK(r.lost == 0);
  CHECK(r.duplicated == 0);
  CHECK(r.received == shape.producers * shape.per_producer);
}

} // namespace async_test

#endif // ASYNC_TESTS_SUPPORT_STRESS_H
