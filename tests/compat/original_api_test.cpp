// SPDX-License-Identifier: BSL-1.0
// A program written against the public API of the original library (d36u9/async v1.1.0) the way
// its users wrote theirs: the headers are included by their bare names ("queue.h", with the
// header folder on the include path, as the original's own tests did), nothing else of this
// project is used. It is built with only the include path changed. One TEST_CASE per row of
// MIGRATION.md, named after the row: where this library behaves as the original did, the case
// shows the original's behaviour; where it differs on purpose, the case shows the new behaviour.
// The rows whose difference is a compile error are the compat.fail.* tests (tests/compat/fail/).
#include "bounded_queue.h"
#include "queue.h"
#include "threadpool.h"

#include "async_catch.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <future>
#include <iterator>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

namespace {

struct checked_traits : async::traits {
  static constexpr bool NOEXCEPT_CHECK = true;
};

struct checked_bounded_traits : async::bounded_traits {
  static constexpr bool NOEXCEPT_CHECK = true;
};

// Built from an int it throws; from a string it does not (the original's tests used the same
// kind of type to show NOEXCEPT_CHECK).
struct picky {
  picky() = default;
  explicit picky(int i) : value(i) {
    if (i < 0) {
      throw std::runtime_error("picky: negative");
    }
  }
  picky(const picky&) = default;
  picky& operator=(const picky&) = default;
  int value = 0;
};

// Copyable, with its move constructor deleted.
struct copy_only {
  copy_only() = default;
  explicit copy_only(int v) : value(v) {}
  copy_only(const copy_only& other) noexcept : value(other.value) {}
  copy_only& operator=(const copy_only& other) noexcept {
    value = other.value;
    return *this;
  }
  copy_only(copy_only&&) = delete;
  int value = 0;
};

// Its move assignment throws.
struct throws_on_assign {
  throws_on_assign() = default;
  explicit throws_on_assign(int v) : value(v) {}
  throws_on_assign(const throws_on_assign&) = default;
  throws_on_assign& operator=(const throws_on_assign& other) {
    if (other.value < 0) {
      throw std::runtime_error("throws_on_assign");
    }
    value = other.value;
    return *this;
  }
  int value = 0;
};

// Room for 4 nodes of 2 elements.
struct tiny_storage : async::traits {
  static constexpr std::size_t SEGMENT_SIZE = 2;
  static constexpr std::size_t NODE_LEVEL1 = 1;
  static constexpr std::size_t NODE_LEVEL2 = 1;
  static constexpr std::size_t NODE_LEVEL3 = 4;
};

struct sixty_four_bit_tickets : async::bounded_traits {
  using sequence_type = std::uint64_t;
};

// No copy, no move constructor; a move assignment (the original's tests had such a type).
struct assign_only {
  assign_only() = default;
  assign_only(const assign_only&) = delete;
  assign_only& operator=(assign_only&&) noexcept { return *this; }
};

struct holds_a_pool {
  async::threadpool pool;
  int other;
};

std::size_t pool_size(const async::threadpool& pool) { return pool.size(); }
bool is_empty(const async::queue<int>& q) { return q.was_empty(); }

int add(int a, int b) { return a + b; }
void increment(int& x) { ++x; }

template <typename Q, typename = void>
struct has_tag_mask : std::false_type {};
template <typename Q>
struct has_tag_mask<Q, decltype(void(Q::TagMask))> : std::true_type {};

} // namespace

TEST_CASE("M1 include path: the original's header names and calls compile and run") {
  async::queue<int> q;
  q.enqueue(1);
  int v = 0;
  CHECK(q.dequeue(v));
  CHECK(v == 1);
  async::bounded_queue<int> b(8);
  b.blocking_enqueue(2);
  b.blocking_dequeue(v);
  CHECK(v == 2);
  async::threadpool tp(2);
  CHECK(tp.post(add, 20, 22).get() == 42);
}

TEST_CASE("M2 copy-only elements: queue and bounded_queue take them, as the original did") {
  async::queue<copy_only> q;
  copy_only c(7);
  for (int i = 0; i < 10; ++i) {
    q.enqueue(c);
  }
  copy_only out;
  CHECK(q.dequeue(out));
  CHECK(out.value == 7);
  async::bounded_queue<copy_only> b(4);
  CHECK(b.enqueue(c));
  CHECK(b.dequeue(out));
}

TEST_CASE("M3 getNodeCount: exists, counts nodes of SEGMENT_SIZE elements") {
  async::queue<int> q;
  const std::uint64_t before = q.getNodeCount();
  CHECK(before >= 1);
  for (int i = 0; i < 3; ++i) {
    q.enqueue(i);
  }
  // The original added a node per element (3 more); here three elements share one node.
  CHECK(q.getNodeCount() == before);
  CHECK(q.getNodeCount() == q.nodes_allocated());
}

TEST_CASE("M4 cacheline_size, seq_t and sequence_type keep their names") {
  CHECK(+async::queue<int>::cacheline_size == +async::traits::CachelineSize);
  CHECK(+async::bounded_queue<int>::cacheline_size == +async::bounded_traits::CachelineSize);
  const std::size_t& line = async::queue<int>::cacheline_size; // odr-use: needs a definition
  CHECK(line >= 16);
  CHECK(std::is_same<async::bounded_queue<int>::seq_t, std::uint64_t>::value);
  CHECK(std::is_same<async::bounded_traits::sequence_type, std::uint64_t>::value);
  async::bounded_queue<int, sixty_four_bit_tickets> b(2);
  CHECK(b.enqueue(1));
}

TEST_CASE("M5 the original's bit layout is gone: TagMask and friends, traits bit members") {
  // Setting Tagbits, L1bits, L2bits, L3bits or Basebits is a compile error (compat.fail.*).
  CHECK_FALSE(has_tag_mask<async::queue<int>>::value);
}

TEST_CASE("M6 defaultpoolsize: kept, at least 1") {
  CHECK(async::threadpool::defaultpoolsize() >= 1);
  CHECK(async::threadpool::defaultpoolsize() == async::threadpool::default_size());
}

TEST_CASE("M7 constructors callable as the original's were (not explicit)") {
  // An int converts implicitly: a temporary pool (or queue) binds to a const reference.
  CHECK(pool_size(2) == 2);
  CHECK(is_empty(1000));
  holds_a_pool s{}; // copy-list-initializes the pool from {}: needs a non-explicit constructor
  CHECK(s.pool.size() == static_cast<std::size_t>(async::threadpool::defaultpoolsize()));
#if __cplusplus >= 201703L
  CHECK(std::is_convertible<int, async::threadpool>::value);
  CHECK(std::is_convertible<std::size_t, async::queue<int>>::value);
  async::threadpool tp = 2; // C++17: no move constructor needed (it was deleted in both)
  async::queue<int> q = 1000;
  CHECK(tp.size() == 2);
  CHECK(q.enqueue(1));
#endif
}

TEST_CASE("M8 idlesize returns int") {
  async::threadpool tp(2);
  CHECK(std::is_same<decltype(tp.idlesize()), int>::value);
  const int n = 2;
  while (tp.idlesize() < n) { // compiles under -Werror=sign-compare
    std::this_thread::yield();
  }
  CHECK(tp.idlesize() == 2);
}

TEST_CASE("M9 post takes its arguments like std::async: std::ref for a reference parameter") {
  async::threadpool tp(1);
  int x = 1;
  tp.post(increment, std::ref(x)).get(); // post(increment, x) does not compile (compat.fail)
  CHECK(x == 2);
  // Arguments are copied when post is called, not when the task runs.
  std::string s = "before";
  auto f = tp.post([](const std::string& copy) { return copy; }, s);
  s = "after";
  CHECK(f.get() == "before");
  // A move-only argument works (std::bind's call wrapper could not pass it on).
  auto p = tp.post([](std::unique_ptr<int> v) { return *v; }, std::unique_ptr<int>(new int(5)));
  CHECK(p.get() == 5);
}

TEST_CASE("M10 enqueue and the blocking calls return whether they did it") {
  async::queue<int> q;
  CHECK(std::is_same<decltype(q.enqueue(1)), bool>::value);
  int a[] = {1, 2, 3};
  CHECK(q.bulk_enqueue(std::begin(a), 3) == 3);
  q.close();
  CHECK_FALSE(q.enqueue(4)); // closed
  async::bounded_queue<int> b(2);
  CHECK(b.blocking_enqueue(1));
  int v = 0;
  CHECK(b.blocking_dequeue(v));
  b.close();
  CHECK_FALSE(b.blocking_enqueue(2));
  CHECK_FALSE(b.blocking_dequeue(v)); // closed and drained: returns instead of waiting
}

TEST_CASE("M11 utility.h and C++11 are gone") {
  // Including "utility.h" or compiling as C++11 is a compile error (compat.fail.*); the
  // standard library has what utility.h offered.
  CHECK(__cplusplus >= 201402L);
}

TEST_CASE("M12 an element type without copy or move constructor: bounded_queue only") {
  // queue<T> needs to move (or copy) an element whose slot a consumer skipped; such a T is a
  // compile error there (compat.fail.no_copy_no_move). bounded_queue constructs in place and
  // assigns out, as the original did.
  async::bounded_queue<assign_only> b(2);
  CHECK(b.enqueue());
  assign_only out;
  CHECK(b.dequeue(out));
}

TEST_CASE("M13 NOEXCEPT_CHECK: a failed construction is skipped, false means empty") {
  async::bounded_queue<picky, checked_bounded_traits> b(4);
  CHECK(b.enqueue(1));
  CHECK_FALSE(b.enqueue(-1)); // the constructor threw: nothing went in
  CHECK(b.enqueue(3));
  picky out;
  // The original answered true, false (the failed slot), true.
  CHECK(b.dequeue(out));
  CHECK(out.value == 1);
  CHECK(b.dequeue(out));
  CHECK(out.value == 3);
  CHECK_FALSE(b.dequeue(out));

  async::queue<picky, checked_traits> q;
  CHECK_FALSE(q.enqueue(-1));
  CHECK(q.enqueue(2));
  CHECK(q.dequeue(out));
  CHECK(out.value == 2);
  CHECK_FALSE(q.dequeue(out));
}

TEST_CASE("M14 NOEXCEPT_CHECK off: a throwing constructor throws to the caller") {
  // The original's enqueue was noexcept here: the exception ended the program.
  async::queue<picky> q;
  CHECK_THROWS_AS(q.enqueue(-1), std::runtime_error);
  CHECK(q.enqueue(1));
  picky out;
  CHECK(q.dequeue(out));
  CHECK(out.value == 1);
  async::bounded_queue<picky> b(2);
  CHECK_THROWS_AS(b.enqueue(-1), std::runtime_error);
  CHECK(b.enqueue(1));
  CHECK(b.dequeue(out));
  CHECK(out.value == 1);
}

TEST_CASE("M15 a throwing assignment in dequeue reaches the caller") {
  // The original (NOEXCEPT_CHECK on) swallowed it and reported success with `out` unchanged.
  async::queue<throws_on_assign, checked_traits> q;
  q.enqueue(-1);
  q.enqueue(2);
  throws_on_assign out(0);
  CHECK_THROWS_AS(q.dequeue(out), std::runtime_error);
  CHECK(q.dequeue(out)); // the element that threw was destroyed; the next one is intact
  CHECK(out.value == 2);
}

TEST_CASE("M16 bulk_dequeue advances an lvalue iterator, as the original did") {
  async::queue<int> q;
  for (int i = 0; i < 6; ++i) {
    q.enqueue(i);
  }
  int buffer[6] = {};
  int* p = buffer;
  CHECK(q.bulk_dequeue(p, 2) == 2);
  CHECK(p == buffer + 2);
  CHECK(q.bulk_dequeue(p, 2) == 2); // continues where the last call stopped
  CHECK(p == buffer + 4);
  std::vector<int> v;
  auto inserter = std::back_inserter(v);
  CHECK(q.bulk_dequeue(inserter, 2) == 2);
  CHECK(std::equal(buffer, buffer + 4, std::vector<int>{0, 1, 2, 3}.begin()));
  CHECK(v == std::vector<int>{4, 5});
  // An rvalue or an array (the original rejected an array) is written through a copy.
  q.enqueue(9);
  int more[2] = {};
  CHECK(q.bulk_dequeue(more, 2) == 1);
  CHECK(more[0] == 9);
}

TEST_CASE("M17 the pool's destructor runs every queued task; cancel_pending drops them") {
  std::future<int> ran;
  std::future<int> dropped;
  {
    async::threadpool tp(0); // paused: tasks wait in the queue
    ran = tp.post([] { return 1; });
  } // the original dropped it: get() threw broken_promise
  CHECK(ran.get() == 1);
  {
    async::threadpool tp(0);
    dropped = tp.post([] { return 2; });
    CHECK(tp.cancel_pending() == 1); // what the original's destructor did
  }
  CHECK_THROWS_AS(dropped.get(), std::future_error);
}

TEST_CASE("M18 shrinking the pool joins the retired threads; size() is the new size at once") {
  std::atomic<int> done{0};
  std::vector<std::future<void>> fs;
  {
    async::threadpool tp(4);
    for (int i = 0; i < 40; ++i) {
      fs.push_back(tp.post([&done] {
        std::this_thread::sleep_for(std::chrono::microseconds(200));
        ++done;
      }));
    }
    tp.configurepool(1); // the original detached the retired threads
    CHECK(tp.size() == 1);
  } // every thread joined here; none is left running with a dangling pool
  for (auto& f : fs) {
    f.get();
  }
  CHECK(done == 40);
}

TEST_CASE("M19 bad sizes throw std::invalid_argument") {
  // The original asserted (capacity 0: a division by zero in release builds) and turned a
  // negative pool size into a huge unsigned one.
  CHECK_THROWS_AS(async::bounded_queue<int>(0), std::invalid_argument);
  CHECK_THROWS_AS(async::threadpool(-1), std::invalid_argument);
}

TEST_CASE("M20 the queue's storage is bounded by its traits; beyond it enqueue throws") {
  async::queue<int, tiny_storage> q;
  int in = 0;
  try {
    for (; in < 100; ++in) {
      q.enqueue(in);
    }
    FAIL("the storage never ran out");
  } catch (const std::length_error&) {
  }
  CHECK(in > 0);
  int out = -1;
  for (int k = 0; k < in; ++k) { // everything that went in is still there, in order
    REQUIRE(q.dequeue(out));
    CHECK(out == k);
  }
}

// M21: a program's own global namespace `detail` beside async::detail.
namespace detail {
int answer() { return 42; }
} // namespace detail

TEST_CASE("M21 a program's own namespace detail beside the library's, after using namespace") {
  using namespace async;
  // Qualified, as the row says; unqualified it is ambiguous (compat.fail.own_detail shows it).
  CHECK(::detail::answer() == 42);
  queue<int> q; // the library's names, through the using-directive
  q.enqueue(7);
  int out = 0;
  REQUIRE(q.dequeue(out));
  CHECK(out == 7);
}

// M22: from C++17 on, a try or timed call's result may not be dropped silently
// (compat.fail.nodiscard_enqueue and compat.fail.nodiscard_dequeue show the warning). What the
// row says to write instead compiles without a warning as C++14 and C++17 (this program is built
// with -Werror) and does what the original's calls did.
TEST_CASE("M22 try and timed calls: check the result, or cast it to void") {
  async::bounded_queue<int> b(1);
  CHECK(b.enqueue(1));
  static_cast<void>(b.enqueue(2)); // full: nothing goes in, and this caller does not mind
  int out = 0;
  CHECK(b.dequeue(out));
  CHECK(out == 1);
  out = 0;
  static_cast<void>(b.dequeue(out)); // empty: `out` is not written
  CHECK(out == 0);
  async::queue<int> q;
  static_cast<void>(q.dequeue(out));
  CHECK(out == 0);
  int some[2] = {0, 0};
  static_cast<void>(q.bulk_dequeue(some, 2));
  CHECK(some[0] == 0);
}

// M23: 1.1.0 ran posts in one queue, in the order they were posted from any thread. Here a
// task's first post runs right after it on the same worker; one thread's posts still start in
// the order it posted them.
TEST_CASE("M23 a task's first post runs next; one thread's posts keep their order") {
  async::threadpool tp(0); // paused: everything below queues before a worker starts
  std::mutex m;
  std::vector<int> order;
  auto note = [&m, &order](int v) {
    std::lock_guard<std::mutex> lock(m);
    order.push_back(v);
  };
  tp.post([&tp, note] {
    note(1);
    tp.post([note] { note(4); }); // 1.1.0: after 2 and 3
  });
  tp.post([note] { note(2); });
  tp.post([note] { note(3); });
  tp.configurepool(1);
  tp.wait_idle();
  CHECK(order == std::vector<int>{1, 4, 2, 3});
}

// M24: the false-sharing granule that both queues pad with (and report as cacheline_size) is
// 128 bytes on x86-64 and AArch64, where the original used 64 everywhere.
TEST_CASE("M24 cacheline_size is 128 on x86-64 and AArch64") {
#if defined(__x86_64__) || defined(__aarch64__)
  CHECK(async::queue<int>::cacheline_size == 128);
  CHECK(async::bounded_queue<int>::cacheline_size == 128);
#else
  CHECK(async::queue<int>::cacheline_size == 64);
  CHECK(async::bounded_queue<int>::cacheline_size == 64);
#endif
}
