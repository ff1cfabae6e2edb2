// SPDX-License-Identifier: BSL-1.0
// Producers and consumers against async::queue with single, bulk and blocking calls mixed;
// every run verifies exactly-once delivery and per-producer FIFO (tests/support/stress.h).
// The same runs go through a queue with 4-slot segments and 16-bit tags, where segment changes,
// node reuse and tag wrap-around happen all the time.
#include <async/queue.h>

#include "stress.h"
#include "trait_presets.h"

#include "async_catch.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <thread>
#include <vector>

using async::queue;
using async_test::got;
using async_test::stress_shape;

namespace {

using tiny_traits = async_test::tiny_24bit_tags;
using side_by_side_traits = async_test::side_by_side<async::traits>;
using tiny_side_by_side_traits = async_test::side_by_side<tiny_traits>;

enum class style { single, bulk, mixed, blocking };

const char* name_of(style s) {
  switch (s) {
  case style::single:
    return "single";
  case style::bulk:
    return "bulk";
  case style::mixed:
    return "mixed";
  case style::blocking:
    return "blocking";
  }
  return "?";
}

// 4-slot segments in a storage of 32 nodes: producers run it full all the time. Room for what
// consumers that race each other can take past the tail (at most 4 consumers of 16 tickets),
// and for the segments that they and the producers hold.
using full_storage_traits = async_test::few_nodes<32>;

// `backlog`: producers wait while the queue holds more than this (0: never). Keeps queues with
// a small node storage from running out when producers outrun consumers. `retry_full`: a call
// refused with std::length_error (the storage is full; nothing of the call went in) is made
// again until it goes in, and the refusals are counted in `full`.
template <typename Queue>
void run(Queue& q, const stress_shape& shape, style how, std::size_t backlog,
         bool retry_full = false, std::atomic<std::size_t>* full = nullptr) {
  // Padded rather than over-aligned: C++14's std::vector ignores over-alignment.
  struct producer_state {
    std::vector<std::uint64_t> batch;
    char pad[128] = {};
  };
  struct consumer_state {
    std::vector<std::uint64_t> batch;
    std::size_t next = 0;
    char pad[128] = {};
  };
  std::vector<producer_state> producers(shape.producers);
  std::vector<consumer_state> consumers(shape.consumers);
  std::atomic<std::size_t> refused{0};

  // A producer refused for 30 s in a row gives up (its elements count as refused): the queue is
  // wedged, and the test fails instead of hanging.
  std::atomic<bool> wedged{false};
  auto put = [&](auto call) -> decltype(call()) {
    std::chrono::steady_clock::time_point since{};
    for (;;) {
      try {
        return call();
      } catch (const std::length_error&) {
        if (!retry_full) {
          throw;
        }
        full->fetch_add(1, std::memory_order_relaxed);
        const auto now = std::chrono::steady_clock::now();
        if (since == std::chrono::steady_clock::time_point{}) {
          since = now;
        } else if (now - since > std::chrono::seconds(30)) {
          wedged.store(true);
          return {};
        }
        std::this_thread::yield();
      }
    }
  };
  auto produce = [&](std::size_t p, std::uint64_t item) {
    if (backlog != 0) {
      while (q.size_approx() > backlog) {
        std::this_thread::yield();
      }
    }
    const bool last = (item & 0xffffffffu) + 1 == shape.per_producer;
    const bool use_bulk = how == style::bulk || (how == style::mixed && (item >> 3) % 2 == 0);
    auto& b = producers[p].batch;
    if (use_bulk) {
      b.push_back(item);
      // Batch sizes 1..16, varying, so bulk rounds start anywhere in a segment.
      if (b.size() >= 1 + (item % 16) || last) {
        if (put([&] { return q.bulk_enqueue(b.begin(), b.size()); }) != b.size()) {
          refused.fetch_add(1);
        }
        b.clear();
      }
      return;
    }
    if (!b.empty()) { // keep order: what is batched goes first
      if (put([&] { return q.bulk_enqueue(b.begin(), b.size()); }) != b.size()) {
        refused.fetch_add(1);
      }
      b.clear();
    }
    if (!put([&] { return q.enqueue(item); })) {
      refused.fetch_add(1);
    }
  };
  auto consume = [&](std::size_t c, std::uint64_t& out) {
    auto& st = consumers[c];
    if (st.next < st.batch.size()) {
      out = st.batch[st.next++];
      return got::item;
    }
    const bool use_bulk = how == style::bulk || (how == style::mixed && c % 2 == 0);
    if (use_bulk) {
      st.batch.clear();
      st.next = 0;
      if (q.bulk_dequeue(std::back_inserter(st.batch), 1 + c % 16) == 0) {
        return q.is_closed() && q.was_empty() ? got::finished : got::empty;
      }
      out = st.batch[st.next++];
      return got::item;
    }
    if (how == style::blocking || (how == style::mixed && c % 4 == 1)) {
      return q.blocking_dequeue(out) ? got::item : got::finished;
    }
    if (how == style::mixed && c % 4 == 3) {
      if (q.dequeue_for(out, std::chrono::milliseconds(1))) {
        return got::item;
      }
      return q.is_closed() ? got::finished : got::empty;
    }
    return q.dequeue(out) ? got::item : got::empty;
  };
  const auto report = async_test::run_stress(shape, produce, consume, [&] { q.close(); });
  INFO(name_of(how) << " " << shape.producers << "p" << shape.consumers << "c");
  CHECK_FALSE(wedged.load()); // a producer was refused for want of room for 30 s in a row
  async_test::check_report(shape, report);
  CHECK(refused.load() == 0);
  std::uint64_t left = 0;
  CHECK_FALSE(q.dequeue(left));
}

const stress_shape shapes[] = {
    {1, 1, 0}, {4, 4, 0}, {1, 4, 0}, {4, 1, 0}, {8, 8, 0}, {16, 16, 0},
};

} // namespace

TEST_CASE("queue stress: exactly once and per-producer FIFO, every shape and style",
          "[queue][stress]") {
  for (style how : {style::single, style::bulk, style::mixed, style::blocking}) {
    for (stress_shape shape : shapes) {
      shape.per_producer = async_test::scaled(1600000 / shape.producers, 2000);
      queue<std::uint64_t> q;
      run(q, shape, how, 0);
    }
  }
}

TEST_CASE("queue stress: tiny segments and 24-bit tags (reuse and tag wrap)", "[queue][stress]") {
  for (style how : {style::single, style::bulk, style::mixed}) {
    for (stress_shape shape : shapes) {
      shape.per_producer = async_test::scaled(800000 / shape.producers, 2000);
      // Segment numbers (and the free list's tag) start just below 2^24, so every tag wraps
      // early in the run.
      queue<std::uint64_t, tiny_traits> q(0, async::detail::first_ticket{((1u << 24) - 8) * 4});
      run(q, shape, how, 20000);
      WARN(name_of(how) << " " << shape.producers << "p" << shape.consumers
                        << "c: " << q.nodes_allocated() << " nodes");
    }
  }
}

TEST_CASE("queue stress: tickets side by side (SPREAD_TICKETS = false), default and tiny segments",
          "[queue][stress]") {
  for (style how : {style::single, style::bulk, style::mixed, style::blocking}) {
    for (stress_shape shape : shapes) {
      shape.per_producer = async_test::scaled(400000 / shape.producers, 1000);
      queue<std::uint64_t, side_by_side_traits> q;
      run(q, shape, how, 0);
    }
  }
  for (style how : {style::single, style::bulk, style::mixed}) {
    for (stress_shape shape : shapes) {
      shape.per_producer = async_test::scaled(400000 / shape.producers, 1000);
      queue<std::uint64_t, tiny_side_by_side_traits> q(
          0, async::detail::first_ticket{((1u << 24) - 8) * 4});
      run(q, shape, how, 20000);
    }
  }
}

// Producers fill a 32-node storage and are refused with std::length_error over and over; they
// call again until their elements go in, while consumers race each other past the tail (their
// tickets there can only be finished by producers, which must then not be refused: once such a
// race wedged the queue for good). Nothing is lost, duplicated or reordered, and the storage is
// really full at times (refusals counted).
TEST_CASE("queue stress: a node storage that runs full, producers refused and calling again",
          "[queue][stress]") {
  const stress_shape full_shapes[] = {{1, 1, 0}, {4, 4, 0}, {1, 4, 0}, {4, 1, 0}, {8, 2, 0}};
  std::size_t refusals = 0;
  // A thread stuck for good (a producer waiting for a node that no consumer will free) ends the
  // binary with a message rather than at ctest's timeout.
  async_test::scoped_watchdog watchdog(std::chrono::milliseconds(300000),
                                       "a run with a full node storage");
  for (style how : {style::single, style::bulk, style::mixed, style::blocking}) {
    for (stress_shape shape : full_shapes) {
      shape.per_producer = async_test::scaled(100000 / shape.producers, 1000);
      std::atomic<std::size_t> full{0};
      queue<std::uint64_t, full_storage_traits> q;
      run(q, shape, how, 0, true, &full);
      refusals += full.load();
    }
  }
  WARN(refusals << " calls refused for want of room, and made again");
  CHECK(refusals > 0);
}

TEST_CASE("queue stress: memory stays bounded under a steady load", "[queue][stress]") {
  queue<std::uint64_t> q;
  const stress_shape shape{2, 2, async_test::scaled(1000000, 20000)};
  run(q, shape, style::single, 1000);
  // The backlog is at most ~1000 elements (4 segments); a thread descheduled inside an
  // operation holds back recycling of later segments for as long as it sleeps, so allow slack.
  WARN("steady: " << q.nodes_allocated() << " nodes");
  CHECK(q.nodes_allocated() < 4000);
}

namespace {

// Two 2-slot nodes: consumers that race each other past the tail soon hold tickets in
// segments that the storage has no room for.
template <bool Spread>
struct two_node_traits : async_test::few_nodes<2, 2> {
  static constexpr bool SPREAD_TICKETS = Spread;
};

// One round: a producer enqueues a few elements (calling again when refused for want of a
// node) and closes the queue, while four consumers poll it with dequeue and bulk_dequeue, then
// wait with blocking_dequeue or dequeue_for until it says closed and drained. Every consumer
// returns; every element arrives once, in order.
template <bool Spread>
void close_past_the_storage_round(int elements) {
  queue<int, two_node_traits<Spread>> q;
  std::vector<std::vector<int>> got(4);
  std::atomic<bool> closed{false};
  std::vector<std::thread> consumers;
  for (std::size_t c = 0; c < got.size(); ++c) {
    consumers.emplace_back([&, c] {
      int v = 0;
      int buf[3] = {};
      while (!closed.load()) {
        if (c % 2 == 0) {
          if (q.dequeue(v)) {
            got[c].push_back(v);
          }
        } else {
          const std::size_t n = q.bulk_dequeue(buf, 3);
          got[c].insert(got[c].end(), buf, buf + n);
        }
      }
      if (c < 2) {
        while (q.blocking_dequeue(v)) {
          got[c].push_back(v);
        }
      } else {
        while (q.dequeue_for(v, std::chrono::hours(1))) {
          got[c].push_back(v);
        }
      }
    });
  }
  int sent = 0;
  while (sent < elements) {
    try {
      if (q.enqueue(sent)) {
        ++sent;
      }
    } catch (const std::length_error&) {
      std::this_thread::yield(); // every node in use: nothing went in, call again
    }
  }
  q.close();
  closed.store(true);
  for (auto& t : consumers) {
    t.join();
  }
  std::vector<int> all;
  for (const auto& g : got) {
    CHECK(std::is_sorted(g.begin(), g.end()));
    all.insert(all.end(), g.begin(), g.end());
  }
  std::sort(all.begin(), all.end());
  std::vector<int> want(static_cast<std::size_t>(elements));
  for (int k = 0; k < elements; ++k) {
    want[static_cast<std::size_t>(k)] = k;
  }
  CHECK(all == want);
}

} // namespace

// Consumers that raced past the tail by more segments than the storage holds wait inside their
// call for producers to come for those tickets; once the queue is closed none come, and such a
// call waited forever (found by an attacking helper on 2026-11-26). Now a consumer gives up a
// ticket past the closed end that has no node. The watchdog ends a hang with a message.
TEST_CASE("queue stress: a two-node storage closed while consumers race past its end",
          "[queue][stress]") {
  async_test::scoped_watchdog watchdog(std::chrono::milliseconds(120000),
                                       "a round closing a two-node storage");
  const std::size_t rounds = async_test::scaled(400, 40);
  for (std::size_t r = 0; r < rounds; ++r) {
    close_past_the_storage_round<true>(static_cast<int>(r % 8));
    close_past_the_storage_round<false>(static_cast<int>(r % 8));
  }
}
