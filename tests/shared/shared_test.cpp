// SPDX-License-Identifier: BSL-1.0
// The library's process-wide state across shared libraries built with hidden visibility: a
// consumer waiting in one library is woken by a producer in another (the condition-variable
// parking table, which every TU here uses: ASYNC_NO_FUTEX=1), and a task that calls into a
// library is still a task of its pool there. Each library had its own copy of that state
// (helper-38): the consumer slept until its timeout, the task was nobody's, and wait_idle()
// from it waited for itself instead of throwing.
#include "async_catch.h"
#include "sides.h"

#include <chrono>
#include <thread>

using namespace std::chrono_literals;

namespace {

template <typename Queue>
void woken_across_libraries(Queue& q) {
  int out = 0;
  bool got = false;
  const auto start = std::chrono::steady_clock::now();
  std::thread consumer([&] { got = side_a_dequeue(q, out, 20s); });
  std::this_thread::sleep_for(100ms); // the consumer is parked by now
  side_b_enqueue(q, 42);
  consumer.join();
  const auto waited = std::chrono::steady_clock::now() - start;
  INFO("waited " << std::chrono::duration_cast<std::chrono::milliseconds>(waited).count() << " ms");
  CHECK(got);
  CHECK(out == 42);
  CHECK(waited < 10s);
}

} // namespace

TEST_CASE("a consumer parked in one shared library is woken by a producer in another", "[shared]") {
  SECTION("bounded_queue") {
    async::bounded_queue<int> q(4);
    woken_across_libraries(q);
  }
  SECTION("queue") {
    async::queue<int> q;
    woken_across_libraries(q);
  }
}

TEST_CASE("a task is a task of its pool inside another shared library", "[shared]") {
  async::threadpool pool(2);
  CHECK(pool.post([&] { return side_a_in_pool(pool); }).get());
  CHECK(pool.post([&] { return side_a_wait_idle_throws(pool); }).get());
  CHECK_FALSE(side_a_in_pool(pool));
}
