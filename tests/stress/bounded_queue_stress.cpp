// SPDX-License-Identifier: BSL-1.0
// Producers and consumers against async::bounded_queue with try, blocking, timed and mixed
// calls; every run verifies exactly-once delivery and per-producer FIFO (tests/support/stress.h).
#include <async/bounded_queue.h>

#include "stress.h"
#include "trait_presets.h"

#include "async_catch.h"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <initializer_list>
#include <limits>
#include <thread>
#include <vector>

using async::bounded_queue;
using async_test::got;
using async_test::stress_shape;

namespace {

using no_spin_traits = async_test::no_spin<async::bounded_traits>;

enum class style { blocking, try_calls, mixed };

template <typename Queue>
void run(Queue& q, const stress_shape& shape, style how) {
  // Catch2 assertions are not thread-safe: worker threads count, the test thread checks.
  std::atomic<std::size_t> refused{0};
  auto produce = [&](std::size_t p, std::uint64_t item) {
    if (how == style::blocking || (how == style::mixed && (item + p) % 3 == 0)) {
      if (!q.blocking_enqueue(item)) {
        refused.fetch_add(1); // the queue is open: must never happen
      }
      return;
    }
    if (how == style::mixed && item % 3 == 1) {
      while (!q.enqueue_for(item, std::chrono::milliseconds(1))) {
      }
      return;
    }
    while (!q.enqueue(item)) {
      std::this_thread::yield();
    }
  };
  auto consume = [&](std::size_t c, std::uint64_t& out) {
    if (how == style::blocking || (how == style::mixed && c % 3 == 0)) {
      return q.blocking_dequeue(out) ? got::item : got::finished;
    }
    if (how == style::mixed && c % 3 == 1) {
      if (q.dequeue_for(out, std::chrono::milliseconds(1))) {
        return got::item;
      }
      return q.is_closed() ? got::finished : got::empty;
    }
    if (q.dequeue(out)) {
      return got::item;
    }
    return q.is_closed() ? got::finished : got::empty;
  };
  auto all_produced = [&] {
    if (how != style::try_calls) {
      q.close();
    }
  };
  const auto report = async_test::run_stress(shape, produce, consume, all_produced);
  CHECK(refused == 0);
  async_test::check_report(shape, report);
}

const stress_shape shapes[] = {{1, 1, 0}, {2, 2, 0}, {4, 4, 0}, {1, 4, 0}, {4, 1, 0}};

stress_shape sized(stress_shape s, std::size_t total) {
  s.per_producer = async_test::scaled(total) / s.producers;
  return s;
}

// `run` with calls of style `how` and `total` elements (scaled) on a fresh queue of each
// capacity in `caps`, for every shape.
template <typename Traits>
void run_every_shape(std::initializer_list<std::size_t> caps, std::size_t total, style how) {
  for (std::size_t cap : caps) {
    for (const auto& shape : shapes) {
      INFO("capacity " << cap);
      bounded_queue<std::uint64_t, Traits> q(cap);
      run(q, sized(shape, total), how);
    }
  }
}

} // namespace

TEST_CASE("blocking calls: exactly once, per-producer FIFO", "[bounded_queue][stress]") {
  run_every_shape<async::bounded_traits>({1, 3, 1024}, 100000, style::blocking);
}

TEST_CASE("blocking calls that always park", "[bounded_queue][stress]") {
  run_every_shape<no_spin_traits>({1, 2, 64}, 20000, style::blocking);
}

TEST_CASE("blocking calls that always park, slots handed over by exchange",
          "[bounded_queue][stress]") {
  const async_test::exchange_hand_overs by_exchange; // the protocol where membarrier is missing
  run_every_shape<no_spin_traits>({1, 2, 64}, 20000, style::blocking);
}

TEST_CASE("try calls: exactly once, per-producer FIFO", "[bounded_queue][stress]") {
  run_every_shape<async::bounded_traits>({1, 3, 1024}, 200000, style::try_calls);
}

TEST_CASE("try, timed and blocking calls mixed on one queue", "[bounded_queue][stress]") {
  run_every_shape<async::bounded_traits>({2, 1000}, 100000, style::mixed);
}

TEST_CASE("tickets side by side (SPREAD_TICKETS = false): mixed calls and calls that park",
          "[bounded_queue][stress]") {
  run_every_shape<async_test::side_by_side<async::bounded_traits>>({3, 1000}, 100000, style::mixed);
  run_every_shape<async_test::side_by_side<no_spin_traits>>({2, 64}, 20000, style::blocking);
}

TEST_CASE("tickets wrap around 2^64 under concurrency", "[bounded_queue][stress]") {
  for (std::size_t cap : {1u, 8u, 64u}) {
    INFO("capacity " << cap);
    for (const auto& shape : {stress_shape{2, 2, 0}, stress_shape{1, 1, 0}}) {
      const std::uint64_t start = std::numeric_limits<std::uint64_t>::max() - 5000;
      bounded_queue<std::uint64_t> q(cap, async::detail::first_ticket{start});
      run(q, sized(shape, 20000), style::blocking);
      bounded_queue<std::uint64_t> r(cap, async::detail::first_ticket{start});
      run(r, sized(shape, 20000), style::try_calls);
    }
  }
}

// close() against callers that are going to sleep at that very moment, round after round:
// every blocked consumer (empty queue) and producer (full queue) must return false. The
// wake-up used to be lost when a second waiter's sleeper bit went in after close() had cleared
// the first one's (an ABA on the turn word): the first waiter then slept for good.
template <typename Traits>
void close_wakes_everyone(std::size_t capacity, std::size_t rounds) {
  const std::size_t waiters = 4;
  for (std::size_t round = 0; round < rounds; ++round) {
    bounded_queue<int, Traits> q(capacity);
    const bool full = round % 2 == 1; // odd rounds: producers blocked on a full queue
    if (full) {
      for (std::size_t k = 0; k < capacity; ++k) {
        REQUIRE(q.enqueue(0));
      }
    }
    std::atomic<std::size_t> returned{0};
    std::atomic<std::size_t> wrong{0};
    std::vector<std::thread> threads;
    for (std::size_t w = 0; w < waiters; ++w) {
      threads.emplace_back([&] {
        int out = 0;
        const bool ok = full ? q.blocking_enqueue(1) : q.blocking_dequeue(out);
        if (ok) {
          wrong.fetch_add(1);
        }
        returned.fetch_add(1);
      });
    }
    // Let the waiters reach the point of parking, with a different delay every round.
    std::this_thread::sleep_for(std::chrono::microseconds(round % 7 * 50));
    q.close();
    const bool all = async_test::eventually_equal([&] { return returned.load(); }, waiters,
                                                  std::chrono::milliseconds(10000));
    if (!all) {
      std::fprintf(stderr,
                   "FAILED: round %zu (%s, capacity %zu): %zu of %zu waiters returned "
                   "after close()\n",
                   round, full ? "full" : "empty", capacity, returned.load(), waiters);
      std::abort(); // the waiters still use q: nothing can be unwound
    }
    for (auto& t : threads) {
      t.join();
    }
    REQUIRE(wrong.load() == 0);
  }
}

TEST_CASE("close wakes every blocked caller, round after round", "[bounded_queue][stress]") {
  const std::size_t rounds = async_test::scaled(400, 40);
  for (std::size_t capacity : {1, 2, 3}) {
    close_wakes_everyone<async::bounded_traits>(capacity, rounds);
    close_wakes_everyone<no_spin_traits>(capacity, rounds);
  }
}
