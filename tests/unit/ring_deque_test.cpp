// SPDX-License-Identifier: BSL-1.0
// The pool's queue of tasks: detail::ring_deque against std::deque as a model (both ends,
// wrapping, growing while wrapped, dropping, swapping), element lifetimes, reserve, and the
// buffer given back once the ring runs empty from a large size.
#include <async/detail/pool/ring_deque.h>
#include <async/detail/pool/task.h>

#include "test_support.h"

#include "async_catch.h"

#include <cstddef>
#include <deque>
#include <random>
#include <utility>

using async::detail::ring_deque;
using async_test::tracked;

namespace {

// The ring holds exactly the model's values, front to back.
bool same(ring_deque<tracked>& ring, const std::deque<int>& model) {
  if (ring.size() != model.size() || ring.empty() != model.empty()) {
    return false;
  }
  for (std::size_t i = 0; i < model.size(); ++i) {
    if (ring[i].value != model[i]) {
      return false;
    }
  }
  return true;
}

} // namespace

TEST_CASE("ring_deque behaves as a deque at both ends, wrapped and growing", "[ring_deque]") {
  tracked::reset();
  {
    std::mt19937 rng(12345);
    ring_deque<tracked> ring;
    ring_deque<tracked> other;
    std::deque<int> model;
    std::deque<int> other_model;
    int next = 0;
    std::size_t mismatches = 0;
    for (int step = 0; step < 200000; ++step) {
      // Phases that grow and phases that shrink, so the ring wraps at many sizes and also
      // runs empty from above keep_capacity.
      const bool growing = (step / 5000) % 2 == 0;
      const unsigned op = rng() % 100;
      if (op < (growing ? 35u : 15u)) {
        tracked t(next);
        ring.push_back(std::move(t));
        model.push_back(next++);
      } else if (op < (growing ? 60u : 30u)) {
        tracked t(next);
        ring.push_front(std::move(t));
        model.push_front(next++);
      } else if (op < 75u) {
        if (!model.empty()) {
          mismatches += ring.front().value == model.front() ? 0 : 1;
          ring.pop_front();
          model.pop_front();
        }
      } else if (op < 90u) {
        if (!model.empty()) {
          mismatches += ring.back().value == model.back() ? 0 : 1;
          ring.pop_back();
          model.pop_back();
        }
      } else if (op < 97u) {
        const std::size_t n = model.empty() ? 0 : rng() % (model.size() + 1);
        ring.drop_front(n);
        model.erase(model.begin(), model.begin() + static_cast<std::ptrdiff_t>(n));
      } else if (op < 99u) {
        ring.swap(other);
        model.swap(other_model);
      } else {
        ring.clear();
        model.clear();
      }
      mismatches += same(ring, model) ? 0 : 1;
      mismatches +=
          tracked::alive() == static_cast<long>(model.size() + other_model.size()) ? 0 : 1;
      if (mismatches != 0) {
        INFO("step " << step);
        REQUIRE(mismatches == 0);
      }
    }
    CHECK(same(other, other_model));
  }
  CHECK(tracked::alive() == 0); // the destructor destroyed what was left, once each
}

TEST_CASE("ring_deque: capacity, reserve and the buffer given back", "[ring_deque]") {
  tracked::reset();
  {
    ring_deque<tracked> ring;
    CHECK(ring.capacity() == 0); // nothing allocated until the first push
    ring.reserve(100);
    const std::size_t reserved = ring.capacity();
    CHECK(reserved >= 100);
    for (int i = 0; i < 100; ++i) {
      tracked t(i);
      ring.push_front(std::move(t)); // wraps at once: the front starts at the buffer's end
    }
    CHECK(ring.capacity() == reserved); // no growth within the reservation
    CHECK(ring.front().value == 99);
    CHECK(ring.back().value == 0);
    ring.clear();
    CHECK(ring.capacity() == reserved); // small: kept for the next tasks

    const std::size_t big = ring_deque<tracked>::keep_capacity * 4;
    for (std::size_t i = 0; i < big; ++i) {
      tracked t(static_cast<int>(i));
      ring.push_back(std::move(t));
    }
    CHECK(ring.capacity() > ring_deque<tracked>::keep_capacity);
    for (std::size_t i = 0; i + 1 < big; ++i) {
      ring.pop_front();
    }
    CHECK(ring.capacity() > ring_deque<tracked>::keep_capacity); // one left: kept
    ring.pop_back();
    CHECK(ring.capacity() == 0); // empty from a large size: given back
    CHECK(tracked::alive() == 0);
    tracked t(7);
    ring.push_back(std::move(t)); // and usable again
    CHECK(ring.size() == 1);
    CHECK(ring.front().value == 7);
  }
  CHECK(tracked::alive() == 0);
}

TEST_CASE("ring_deque holds the pool's tasks: each runs once, none leaks", "[ring_deque]") {
  using async::detail::task;
  int runs = 0;
  {
    ring_deque<task> ring;
    for (int i = 0; i < 50; ++i) {
      ring.push_back(task([&runs] { ++runs; }));
      ring.push_front(task([&runs] { runs += 100; }));
    }
    while (!ring.empty()) {
      task t(std::move(ring.front()));
      ring.pop_front();
      t();
    }
  }
  CHECK(runs == 50 * 101);
}

TEST_CASE("a task moved from an empty task, or onto itself, stays what it was", "[ring_deque]") {
  using async::detail::task;
  int runs = 0;
  task empty;
  task moved(std::move(empty)); // from an empty task: empty
  CHECK_FALSE(moved);
  task t([&runs] { ++runs; });
  task& alias = t;
  t = std::move(alias); // onto itself: still holds its callable
  REQUIRE(t);
  t();
  CHECK(runs == 1);
  task other([&runs] { runs += 10; });
  other = std::move(moved); // an empty task replaces a full one: the callable is dropped
  CHECK_FALSE(other);
  CHECK(runs == 1);
}
