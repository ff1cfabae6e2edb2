// SPDX-License-Identifier: BSL-1.0
// Name lookup and overload resolution around the public calls, where a user's own names meet
// ours: helper functions of the library's must not be found by argument-dependent lookup in the
// namespace of a user's element type or callable (a call left unqualified was hijacked, or
// ambiguous with std::invoke in C++17), post() must stay usable in SFINAE checks, and
// bulk_dequeue must move an rvalue iterator rather than copy it. Built as C++20 where the
// compiler has it (std::invoke and friends are then visible through namespace std).
#include <async/bounded_queue.h>
#include <async/queue.h>
#include <async/threadpool.h>

#include "async_catch.h"
#include "test_support.h"

#include <chrono>
#include <cstddef>
#include <functional>
#include <future>
#include <iterator>
#include <stdexcept>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

namespace user {

// An element whose namespace declares functions with the names of the library's helpers. If
// the library called one of them unqualified, these would win (they are better matches) and
// add 1000.
struct element {
  int v = 0;
  element() = default;
  explicit element(int x) : v(x) {}
  int get() const { return v; }
};

inline void assign_relocated(element& to, element& from, std::true_type) { to.v = from.v + 1000; }
inline void assign_relocated(element& to, element& from, std::false_type) { to.v = from.v + 1000; }
inline element* construct_relocated(void* where, element& from) {
  element* e = ::new (where) element(from.v + 1000);
  return e;
}
inline int invoke_member(int (element::*)() const, element&& e) { return e.v + 1000; }

// Slow to build: its producer is still constructing when a consumer with a tiny spin budget
// gives up on the slot, so the element is relocated to a later slot.
struct slow {
  int v = 0;
  slow() = default;
  explicit slow(int x) : v(x) { std::this_thread::sleep_for(std::chrono::milliseconds(30)); }
  slow(const slow&) = default;
  slow& operator=(const slow&) = default;
};
inline slow* construct_relocated(void* where, slow& from) {
  slow* e = ::new (where) slow();
  e->v = from.v + 1000;
  return e;
}
inline int invoke(int (element::*)() const, element&& e) { return e.v + 1000; }

// A generic one: any unqualified call with an element argument becomes ambiguous.
template <typename To, typename From, typename Tag>
void assign_relocated(To&, From&, Tag) = delete;

// An output iterator that counts its copies (bulk_dequeue must move an rvalue).
struct counting_sink : async_test::output_iterator_types {
  std::vector<int>* out;
  int* copies;
  counting_sink(std::vector<int>* o, int* c) : out(o), copies(c) {}
  counting_sink(const counting_sink& other) : out(other.out), copies(other.copies) { ++*copies; }
  counting_sink(counting_sink&& other) noexcept : out(other.out), copies(other.copies) {}
  counting_sink& operator=(const counting_sink&) = default;
  counting_sink& operator=(counting_sink&&) = default;
  counting_sink& operator*() { return *this; }
  counting_sink& operator++() { return *this; }
  counting_sink& operator++(int) { return *this; }
  counting_sink& operator=(int v) {
    out->push_back(v);
    return *this;
  }
};

// Move-only output iterator.
struct move_only_sink : async_test::output_iterator_types {
  std::vector<int>* out;
  explicit move_only_sink(std::vector<int>* o) : out(o) {}
  move_only_sink(const move_only_sink&) = delete;
  move_only_sink(move_only_sink&&) noexcept = default;
  move_only_sink& operator*() { return *this; }
  move_only_sink& operator++() { return *this; }
  move_only_sink& operator=(int v) {
    out->push_back(v);
    return *this;
  }
};

} // namespace user

namespace {

struct impatient : async::traits {
  static constexpr unsigned SPIN_BUDGET = 1;
};

template <typename Pool, typename F, typename = void>
struct can_post_with_two_ints : std::false_type {};
template <typename Pool, typename F>
struct can_post_with_two_ints<Pool, F,
                              decltype(void(std::declval<Pool&>().post(std::declval<F>(), 1, 2)))>
    : std::true_type {};

int one_arg(int x) { return x; }
int two_args(int x, int y) { return x + y; }

} // namespace

TEST_CASE("lookup: the queues' helpers are not found in the element's namespace") {
  async::queue<user::element> q;
  q.enqueue(5);
  user::element e;
  REQUIRE(q.dequeue(e));
  CHECK(e.v == 5);
  std::vector<user::element> out;
  q.enqueue(6);
  REQUIRE(q.bulk_dequeue(std::back_inserter(out), 4) == 1);
  CHECK(out.at(0).v == 6);

  async::bounded_queue<user::element> b(2);
  REQUIRE(b.enqueue(7));
  REQUIRE(b.dequeue(e));
  CHECK(e.v == 7);
}

TEST_CASE("lookup: a relocated element is moved by the library's own helper") {
  async::queue<user::slow, impatient> q;
  user::slow got;
  bool received = false;
  std::thread consumer([&] {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!received && std::chrono::steady_clock::now() < until) {
      received = q.dequeue(got);
    }
  });
  // The consumer polls while the element is built (30 ms), takes its ticket and skips the slot:
  // the producer then relocates the element.
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  q.enqueue(5);
  consumer.join();
  REQUIRE(received);
  CHECK(got.v == 5);
}

TEST_CASE("lookup: post's call is not found in the callable's or arguments' namespace") {
  async::threadpool pool(1);
  CHECK(pool.post(&user::element::get, user::element(7)).get() == 7);
  CHECK(pool.post([](const std::string& s) { return s.size(); }, std::string("abc")).get() == 3);
  int x = 1;
  pool.post([](int& r) { ++r; }, std::ref(x)).get();
  CHECK(x == 2);
}

TEST_CASE("lookup: post stays usable in SFINAE checks for calls f cannot take") {
  CHECK(can_post_with_two_ints<async::threadpool, int (*)(int, int)>::value);
  CHECK_FALSE(can_post_with_two_ints<async::threadpool, int (*)(int)>::value);
  async::threadpool pool(1);
  CHECK(pool.post(two_args, 1, 2).get() == 3);
  CHECK(pool.post(one_arg, 4).get() == 4);
}

TEST_CASE("bulk_dequeue moves an rvalue iterator and takes a move-only one") {
  async::queue<int> q;
  for (int i = 0; i < 4; ++i) {
    q.enqueue(i);
  }
  std::vector<int> got;
  int copies = 0;
  CHECK(q.bulk_dequeue(user::counting_sink(&got, &copies), 2) == 2);
  CHECK(copies == 0);
  user::counting_sink kept(&got, &copies);
  CHECK(q.bulk_dequeue(kept, 1) == 1); // an lvalue: used in place, not copied
  CHECK(copies == 0);
  user::move_only_sink sink(&got);
  CHECK(q.bulk_dequeue(std::move(sink), 1) == 1);
  CHECK(got == std::vector<int>{0, 1, 2, 3});
}
