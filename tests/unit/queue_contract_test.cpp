// SPDX-License-Identifier: BSL-1.0
// The contract both queues promise, written once and run over each of them: FIFO and exactly
// once, emplacement, move-only and copy-only elements, lifetimes, throwing constructors, the
// original library's traits, close(), blocking and timed calls, idle cost. What only one of
// them has (bulk calls, node storage, capacities and holes) is in queue_test.cpp and
// bounded_queue_test.cpp.
#include <async/bounded_queue.h>
#include <async/queue.h>

#include "test_support.h"
#include "trait_presets.h"

#include "async_catch.h"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

using async_test::copy_only;
using async_test::throws_on;
using async_test::tracked;
using namespace std::chrono_literals;

namespace {

// How each queue is made and fed. `put` is the call that may wait for room (the unbounded
// queue never needs to); everything else has the same name in both.
struct unbounded_kind {
  static const char* name() { return "queue"; }
  using base_traits = async::traits;
  template <typename T, typename Traits = base_traits>
  using queue_type = async::queue<T, Traits>;

  template <typename T, typename Traits = base_traits>
  static std::unique_ptr<queue_type<T, Traits>> make(std::size_t /*capacity*/) {
    return std::unique_ptr<queue_type<T, Traits>>(new queue_type<T, Traits>());
  }
  template <typename Q, typename... Args>
  static bool put(Q& q, Args&&... args) {
    return q.enqueue(std::forward<Args>(args)...);
  }
};

struct bounded_kind {
  static const char* name() { return "bounded_queue"; }
  using base_traits = async::bounded_traits;
  template <typename T, typename Traits = base_traits>
  using queue_type = async::bounded_queue<T, Traits>;

  template <typename T, typename Traits = base_traits>
  static std::unique_ptr<queue_type<T, Traits>> make(std::size_t capacity) {
    return std::unique_ptr<queue_type<T, Traits>>(new queue_type<T, Traits>(capacity));
  }
  template <typename Q, typename... Args>
  static bool put(Q& q, Args&&... args) {
    return q.blocking_enqueue(std::forward<Args>(args)...);
  }
};

using async_test::checked;
using async_test::no_spin;

// The traits struct of the original library, as its users wrote it: must still compile.
struct original_traits {
  static constexpr bool NOEXCEPT_CHECK = false;
  static constexpr std::size_t CachelineSize = 64;
  static constexpr std::size_t CachelineAlignment = 16;
  using sequence_type = std::uint64_t;
};

// Counts copies and moves, to see which one enqueue used.
struct counting {
  static int& copies() {
    static int n = 0;
    return n;
  }
  static int& moves() {
    static int n = 0;
    return n;
  }
  counting() = default;
  explicit counting(int a, std::string b) : value(a), text(std::move(b)) {}
  counting(const counting& o) : value(o.value), text(o.text) { ++copies(); }
  counting(counting&& o) noexcept : value(o.value), text(std::move(o.text)) { ++moves(); }
  counting& operator=(const counting&) = default;
  counting& operator=(counting&&) noexcept = default;
  int value = 0;
  std::string text;
};

} // namespace

TEMPLATE_TEST_CASE("contract: FIFO and exactly once, single thread, lap after lap", "[contract]",
                   unbounded_kind, bounded_kind) {
  for (std::size_t capacity : {1u, 2u, 3u, 5u, 64u, 1000u}) {
    INFO(TestType::name() << ", batches of " << capacity);
    auto q = TestType::template make<std::uint64_t>(capacity);
    std::uint64_t sent = 0;
    std::uint64_t next = 0;
    std::uint64_t out = 0;
    for (int lap = 0; lap < 7; ++lap) {
      for (std::size_t k = 0; k < capacity; ++k) {
        REQUIRE(TestType::put(*q, sent++));
      }
      for (std::size_t k = 0; k < capacity; ++k) {
        REQUIRE(q->dequeue(out));
        REQUIRE(out == next++);
      }
      CHECK_FALSE(q->dequeue(out));
    }
    CHECK(q->size_approx() == 0);
  }
}

TEMPLATE_TEST_CASE("contract: enqueue constructs in place, copies lvalues and moves rvalues",
                   "[contract]", unbounded_kind, bounded_kind) {
  auto q = TestType::template make<counting>(8);
  counting::copies() = 0;
  counting::moves() = 0;
  REQUIRE(q->enqueue(7, std::string("seven"))); // emplacement: no copy, no move
  CHECK(counting::copies() == 0);
  CHECK(counting::moves() == 0);
  counting c(8, "eight");
  REQUIRE(q->enqueue(c));
  CHECK(counting::copies() == 1);
  CHECK(c.text == "eight");
  REQUIRE(TestType::put(*q, std::move(c)));
  CHECK(counting::copies() == 1);
  CHECK(counting::moves() == 1);
  counting out;
  REQUIRE(q->dequeue(out));
  CHECK((out.value == 7 && out.text == "seven"));
  REQUIRE(q->blocking_dequeue(out));
  CHECK((out.value == 8 && out.text == "eight"));
  REQUIRE(q->dequeue_for(out, 1s));
  CHECK((out.value == 8 && out.text == "eight"));
  CHECK_FALSE(q->dequeue(out));
}

TEMPLATE_TEST_CASE("contract: move-only elements go through", "[contract]", unbounded_kind,
                   bounded_kind) {
  auto q = TestType::template make<std::unique_ptr<int>>(64);
  for (int i = 0; i < 40; ++i) {
    REQUIRE(q->enqueue(new int(i)));
  }
  auto p = std::unique_ptr<int>(new int(40));
  REQUIRE(TestType::put(*q, std::move(p)));
  CHECK(p == nullptr);
  std::unique_ptr<int> out;
  for (int i = 0; i <= 40; ++i) {
    REQUIRE(q->dequeue(out));
    REQUIRE(out);
    REQUIRE(*out == i);
  }
}

TEMPLATE_TEST_CASE("contract: copy-only elements (moves deleted) go through", "[contract]",
                   unbounded_kind, bounded_kind) {
  auto q = TestType::template make<copy_only>(3);
  const copy_only a(1);
  REQUIRE(q->enqueue(a));
  REQUIRE(TestType::put(*q, a));
  REQUIRE(q->enqueue(3)); // emplaced
  copy_only out;
  REQUIRE(q->dequeue(out));
  CHECK(out.value == 1);
  REQUIRE(q->blocking_dequeue(out));
  CHECK(out.value == 1);
  REQUIRE(q->dequeue_for(out, 1ms));
  CHECK(out.value == 3);
  CHECK_FALSE(q->dequeue(out));
}

TEMPLATE_TEST_CASE("contract: every element is destroyed once, also those left inside",
                   "[contract]", unbounded_kind, bounded_kind) {
  tracked::reset();
  {
    auto q = TestType::template make<tracked>(600);
    tracked out;
    for (int lap = 0; lap < 3; ++lap) { // laps: slots and nodes are reused
      for (int i = 0; i < 500; ++i) {
        REQUIRE(TestType::put(*q, i));
      }
      for (int i = 0; i < 490; ++i) {
        REQUIRE(q->dequeue(out));
      }
    }
    CHECK(tracked::alive() == 1 + 30); // `out` and the 30 still queued
  }                                    // ~queue destroys the 30 still inside
  CHECK(tracked::alive() == 0);
  CHECK(tracked::constructed() == tracked::destroyed());
}

TEMPLATE_TEST_CASE("contract: a throwing constructor loses nothing else", "[contract]",
                   unbounded_kind, bounded_kind) {
  throws_on::alive() = 0;
  SECTION("NOEXCEPT_CHECK: the call returns false") {
    using traits = checked<typename TestType::base_traits>;
    auto q = TestType::template make<throws_on, traits>(8);
    CHECK(q->enqueue(1));
    CHECK_FALSE(q->enqueue(-1));
    CHECK(TestType::put(*q, 2));
    CHECK_FALSE(TestType::put(*q, -2));
    CHECK(q->enqueue(3));
    throws_on out(0);
    std::vector<int> got;
    while (q->dequeue(out)) {
      got.push_back(out.value);
    }
    CHECK(got == std::vector<int>{1, 2, 3});
  }
  SECTION("default: the exception propagates, the queue stays usable") {
    auto q = TestType::template make<throws_on>(8);
    CHECK(q->enqueue(1));
    CHECK_THROWS_AS(q->enqueue(-1), std::runtime_error);
    CHECK_THROWS_AS(TestType::put(*q, -1), std::runtime_error);
    CHECK(TestType::put(*q, 2));
    throws_on out(0);
    CHECK(q->blocking_dequeue(out)); // passes the holes
    CHECK(out.value == 1);
    CHECK(q->blocking_dequeue(out));
    CHECK(out.value == 2);
    CHECK_FALSE(q->dequeue(out));
  }
  CHECK(throws_on::alive() == 0);
}

TEMPLATE_TEST_CASE("contract: a traits struct written for the original library compiles",
                   "[contract]", unbounded_kind, bounded_kind) {
  STATIC_REQUIRE(original_traits::CachelineAlignment == 16); // accepted, and unused here
  auto q = TestType::template make<int, original_traits>(8);
  REQUIRE(q->enqueue(3));
  int out = 0;
  REQUIRE(q->dequeue(out));
  CHECK(out == 3);
}

TEMPLATE_TEST_CASE("contract: close refuses producers, consumers drain, then false", "[contract]",
                   unbounded_kind, bounded_kind) {
  auto q = TestType::template make<int>(300);
  for (int i = 0; i < 300; ++i) {
    REQUIRE(q->enqueue(i));
  }
  CHECK_FALSE(q->is_closed());
  q->close();
  q->close(); // idempotent
  CHECK(q->is_closed());
  CHECK_FALSE(q->enqueue(1000));
  CHECK_FALSE(TestType::put(*q, 1000));
  int out = -1;
  for (int i = 0; i < 300; ++i) {
    REQUIRE(q->blocking_dequeue(out));
    REQUIRE(out == i);
  }
  CHECK_FALSE(q->blocking_dequeue(out));
  CHECK_FALSE(q->dequeue_for(out, 1s));
  CHECK_FALSE(q->dequeue(out));
  CHECK(q->size_approx() == 0);
}

TEMPLATE_TEST_CASE("contract: close wakes every consumer blocked on an empty queue", "[contract]",
                   unbounded_kind, bounded_kind) {
  auto q = TestType::template make<int, no_spin<typename TestType::base_traits>>(4);
  std::atomic<int> returned{0};
  std::atomic<int> got_item{0};
  std::vector<std::thread> consumers;
  for (int c = 0; c < 3; ++c) {
    consumers.emplace_back([&] {
      int out = 0;
      while (q->blocking_dequeue(out)) {
        got_item.fetch_add(1);
      }
      returned.fetch_add(1);
    });
  }
  std::this_thread::sleep_for(50ms);
  REQUIRE(TestType::put(*q, 1));
  REQUIRE(TestType::put(*q, 2));
  CHECK(async_test::eventually_equal([&] { return got_item.load(); }, 2));
  CHECK(returned.load() == 0);
  q->close();
  for (auto& t : consumers) {
    t.join();
  }
  CHECK(returned.load() == 3);
}

TEMPLATE_TEST_CASE("contract: blocking and timed dequeue wait for a producer, or time out",
                   "[contract]", unbounded_kind, bounded_kind) {
  auto q = TestType::template make<int>(4);
  int out = 0;
  const auto t0 = std::chrono::steady_clock::now();
  CHECK_FALSE(q->dequeue_for(out, 30ms));
  CHECK(std::chrono::steady_clock::now() - t0 >= 30ms);
  std::thread producer([&] {
    std::this_thread::sleep_for(20ms);
    TestType::put(*q, 42);
    std::this_thread::sleep_for(20ms);
    TestType::put(*q, 43);
  });
  REQUIRE(q->blocking_dequeue(out));
  CHECK(out == 42);
  REQUIRE(q->dequeue_for(out, 10s));
  CHECK(out == 43);
  producer.join();
}

namespace {

// A "forever" timeout must wait until served: deadline_after used to add it to now() and
// overflow into the past, so such calls gave up at once.
template <typename Kind, typename Duration>
void check_waits_forever(Duration forever) {
  auto q = Kind::template make<int>(1);
  std::atomic<bool> returned{false};
  bool got = false;
  int out = 0;
  std::thread consumer([&] {
    got = q->dequeue_for(out, forever);
    returned = true;
  });
  std::this_thread::sleep_for(30ms);
  CHECK_FALSE(returned.load());
  REQUIRE(q->enqueue(7));
  consumer.join();
  CHECK(got);
  CHECK(out == 7);
}

} // namespace

TEMPLATE_TEST_CASE("contract: dequeue_for with duration::max() of any unit waits until served",
                   "[contract]", unbounded_kind, bounded_kind) {
  check_waits_forever<TestType>(std::chrono::nanoseconds::max());
  check_waits_forever<TestType>(std::chrono::milliseconds::max());
  check_waits_forever<TestType>(std::chrono::seconds::max());
  check_waits_forever<TestType>(std::chrono::hours::max());
  check_waits_forever<TestType>(std::chrono::duration<double>::max());
  check_waits_forever<TestType>(std::chrono::duration<double, std::ratio<3600>>(1e300));
  check_waits_forever<TestType>(std::chrono::steady_clock::duration::max());
}

TEMPLATE_TEST_CASE("contract: zero and negative timeouts do not wait", "[contract]", unbounded_kind,
                   bounded_kind) {
  auto q = TestType::template make<int>(1);
  int out = 0;
  CHECK_FALSE(q->dequeue_for(out, 0ms));
  CHECK_FALSE(q->dequeue_for(out, -5s));
  CHECK_FALSE(q->dequeue_for(out, std::chrono::hours::min()));
  REQUIRE(q->enqueue(1));
  CHECK(q->dequeue_for(out, 0ms));
  CHECK(out == 1);
}

TEMPLATE_TEST_CASE("contract: a consumer blocked on an empty queue burns no CPU", "[contract]",
                   unbounded_kind, bounded_kind) {
  auto q = TestType::template make<int>(16);
  std::thread consumer([&] {
    int out = 0;
    while (q->blocking_dequeue(out)) {
    }
  });
  std::this_thread::sleep_for(50ms); // past the spin phase: parked
  const double idle = async_test::process_cpu_fraction(300ms);
  const double spinning = async_test::spinning_cpu_fraction(300ms);
  q->close();
  consumer.join();
  INFO("CPU per wall second: " << idle << " with the consumer parked, " << spinning
                               << " with one thread spinning");
  CHECK(idle < 0.1 * spinning);
}

TEMPLATE_TEST_CASE("contract: a consumer in a timed wait on an empty queue burns no CPU",
                   "[contract]", unbounded_kind, bounded_kind) {
  // The futex call read a 64-bit time_t's timespec as a zero timeout on 32-bit targets built
  // with _TIME_BITS=64 (Debian's armhf since trixie, musl): each timed wait spun through the
  // kernel instead of sleeping (helper-38; test_queue_contract_time64 is this file built so).
  auto q = TestType::template make<int>(16);
  bool got = true;
  std::thread consumer([&] {
    int out = 0;
    got = q->dequeue_for(out, 900ms);
  });
  std::this_thread::sleep_for(50ms); // past the spin phase: parked
  const double idle = async_test::process_cpu_fraction(300ms);
  const double spinning = async_test::spinning_cpu_fraction(300ms);
  consumer.join();
  INFO("CPU per wall second: " << idle << " with the consumer in dequeue_for, " << spinning
                               << " with one thread spinning");
  CHECK_FALSE(got);
  CHECK(idle < 0.1 * spinning);
}

#if ASYNC_HAS_FUTEX && ASYNC_FUTEX_TIME64_FIRST
TEMPLATE_TEST_CASE("contract: on a kernel without SYS_futex_time64, waiters still sleep and wake",
                   "[contract]", unbounded_kind, bounded_kind) {
  // 32-bit targets try the 64-bit-time futex call first and fall back to the old one when the
  // kernel answers ENOSYS; this takes the fallback as if it had.
  async::detail::futex_time64_missing() = true;
  const auto restore =
      async::detail::at_scope_exit([] { async::detail::futex_time64_missing() = false; });
  auto q = TestType::template make<int>(16);
  int out = 0;
  bool got = true;
  std::thread consumer([&] { got = q->dequeue_for(out, 900ms); });
  std::this_thread::sleep_for(50ms);
  const double idle = async_test::process_cpu_fraction(300ms);
  const double spinning = async_test::spinning_cpu_fraction(300ms);
  consumer.join();
  INFO("CPU per wall second: " << idle << " in dequeue_for, " << spinning << " spinning");
  CHECK_FALSE(got);
  CHECK(idle < 0.1 * spinning);
  std::thread blocked([&] { got = q->blocking_dequeue(out); });
  std::this_thread::sleep_for(50ms); // parked by now
  REQUIRE(q->enqueue(5));
  blocked.join();
  CHECK(got);
  CHECK(out == 5);
}
#endif

TEMPLATE_TEST_CASE("contract: ping-pong through two queues with blocking calls", "[contract]",
                   unbounded_kind, bounded_kind) {
  using traits = no_spin<typename TestType::base_traits>;
  auto there = TestType::template make<int, traits>(1);
  auto back = TestType::template make<int, traits>(1);
  const int rounds = static_cast<int>(async_test::scaled(20000, 2000));
  std::thread echo([&] {
    int v = 0;
    while (there->blocking_dequeue(v)) {
      TestType::put(*back, v + 1);
    }
  });
  int v = 0;
  for (int i = 0; i < rounds; ++i) {
    REQUIRE(TestType::put(*there, v));
    REQUIRE(back->blocking_dequeue(v));
  }
  there->close();
  echo.join();
  CHECK(v == rounds);
}
