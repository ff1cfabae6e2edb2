// SPDX-License-Identifier: BSL-1.0
// Producers and consumers against async::queue with single, bulk and blocking calls mixed;
// every run verifies exactly-once delivery and per-producer FIFO (tests/support/stress.h).
// The same runs go through a queue with 4-slot segments and 16-bit tags, where segment changes,
// node reuse and tag wrap-around happen all the time.
#include <async/queue.h>

#include "stress.h"

#include "async_catch.h"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>
#include <vector>

using async::queue;
using async_test::got;
using async_test::stress_shape;

namespace {

// 4-slot segments, 24-bit tags. A thread descheduled inside an operation holds back the
// recycling of the segments after its own for as long as it sleeps (see the README), and on two
// oversubscribed cores that is tens of milliseconds: the storage leaves room for that.
struct tiny_traits : async::traits {
  static constexpr std::size_t SEGMENT_SIZE = 4;
  static constexpr std::size_t NODE_LEVEL1 = 1023;
  static constexpr std::size_t NODE_LEVEL2 = 512;
  static constexpr std::size_t NODE_LEVEL3 = 2;
  static constexpr unsigned INDEX_BITS = 20;
  // 16 bits would be too few here: with 16 threads on 2 cores a thread can sleep for 100 ms
  // inside an operation, long enough for 2^16 segments to pass (the unit tests wrap 16-bit
  // tags single-threaded). 24 bits need 2^24 segments (67M elements) to pass during one stall.
  static constexpr unsigned TAG_BITS = 24;
};

// Consecutive tickets side by side in their groups instead of spread over lines.
struct side_by_side_traits : async::traits {
  static constexpr bool SPREAD_TICKETS = false;
};
struct tiny_side_by_side_traits : tiny_traits {
  static constexpr bool SPREAD_TICKETS = false;
};

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

// `backlog`: producers wait while the queue holds more than this (0: never). Keeps queues with
// a small node storage from running out when producers outrun consumers.
template <typename Queue>
void run(Queue& q, const stress_shape& shape, style how, std::size_t backlog) {
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
        if (q.bulk_enqueue(b.begin(), b.size()) != b.size()) {
          refused.fetch_add(1);
        }
        b.clear();
      }
      return;
    }
    if (!b.empty()) { // keep order: what is batched goes first
      if (q.bulk_enqueue(b.begin(), b.size()) != b.size()) {
        refused.fetch_add(1);
      }
      b.clear();
    }
    if (!q.enqueue(item)) {
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
  INFO(name_of(how));
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

TEST_CASE("queue stress: memory stays bounded under a steady load", "[queue][stress]") {
  queue<std::uint64_t> q;
  const stress_shape shape{2, 2, async_test::scaled(1000000, 20000)};
  run(q, shape, style::single, 1000);
  // The backlog is at most ~1000 elements (4 segments); a thread descheduled inside an
  // operation holds back recycling of later segments for as long as it sleeps, so allow slack.
  WARN("steady: " << q.nodes_allocated() << " nodes");
  CHECK(q.nodes_allocated() < 4000);
}
