// SPDX-License-Identifier: BSL-1.0
// async::threadpool when the system says no: a thread that cannot start (the test seam
// ASYNC_TEST_FAULTS makes std::thread's constructor fail as it does when the system has no
// thread left) and memory that runs out (this binary replaces operator new, so that the calling
// thread's next allocation can be made to throw std::bad_alloc). Nothing may be lost, leaked,
// left unjoined or counted as pending for ever.
#include <async/threadpool.h>

#include "test_support.h"

#include "async_catch.h"

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <future>
#include <mutex>
#include <new>
#include <system_error>
#include <thread>
#include <vector>

using async::threadpool;
using namespace std::chrono_literals;

// ThreadSanitizer's runtime (linked statically by clang) defines operator new itself: there the
// out-of-memory cases are left out (they are about exception safety, not races; the native and
// AddressSanitizer builds run them).
#if !ASYNC_TSAN
#define ASYNC_TEST_REPLACES_NEW 1

namespace {

// The calling thread's allocations that succeed before one fails (-1: none fails).
thread_local int allocations_before_failure = -1;
thread_local bool fail_next_allocation = false;
// The calling thread's allocations that succeed before every later one fails, memory gone for
// good (-1: never).
thread_local int allocations_before_running_out = -1;

void* allocate(std::size_t n) {
  if (allocations_before_running_out == 0) {
    throw std::bad_alloc();
  }
  if (allocations_before_running_out > 0) {
    --allocations_before_running_out;
  }
  if (fail_next_allocation || allocations_before_failure == 0) {
    fail_next_allocation = false;
    allocations_before_failure = -1;
    throw std::bad_alloc();
  }
  if (allocations_before_failure > 0) {
    --allocations_before_failure;
  }
  if (void* p = std::malloc(n != 0 ? n : 1)) {
    return p;
  }
  throw std::bad_alloc();
}

} // namespace

void* operator new(std::size_t n) { return allocate(n); }
void* operator new[](std::size_t n) { return allocate(n); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }

// Under AddressSanitizer, allocations made inside libstdc++ go through ASan's operator new and
// this binary's operator delete frees them with free(): a mismatch only in ASan's bookkeeping.
// The check is off for this binary alone (ASAN_OPTIONS from the environment still apply).
#if defined(__SANITIZE_ADDRESS__)
#define ASYNC_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ASYNC_TEST_ASAN 1
#endif
#endif
#if ASYNC_TEST_ASAN
extern "C" const char* __asan_default_options() { return "alloc_dealloc_mismatch=0"; }
#endif
#endif

TEST_CASE("a pool whose constructor cannot start every thread throws and leaves none behind",
          "[threadpool][faults]") {
  // The threads that had started were left in the pool, and their std::thread objects were
  // destroyed unjoined: std::terminate.
  for (int started = 0; started < 4; ++started) {
    async::detail::thread_starts_left() = started;
    CHECK_THROWS_AS(threadpool(4), std::system_error);
    async::detail::thread_starts_left() = -1;
  }
  threadpool pool(2); // and the next pool starts as usual
  CHECK(pool.post([] { return 7; }).get() == 7);
}

TEST_CASE("configurepool that cannot start every thread throws; size() counts the workers",
          "[threadpool][faults]") {
  // size() kept its old value, although the threads that had started did run.
  threadpool pool(1);
  async::detail::thread_starts_left() = 2;
  CHECK_THROWS_AS(pool.configurepool(5), std::system_error);
  async::detail::thread_starts_left() = -1;
  CHECK(pool.size() == 3);
  CHECK(async_test::eventually_equal([&] { return pool.idlesize(); }, 3));
  std::vector<std::future<int>> results;
  for (int k = 0; k < 20; ++k) {
    results.push_back(pool.post([k] { return k; }));
  }
  for (int k = 0; k < 20; ++k) {
    CHECK(results[static_cast<std::size_t>(k)].get() == k);
  }
  pool.configurepool(4);
  CHECK(pool.size() == 4);
}

TEST_CASE("a destructor that cannot start a worker for the handler's captures still runs what "
          "they post",
          "[threadpool][faults]") {
  // The destructor starts one worker while the exception handler is destroyed (its captures may
  // wait for what they post); when that thread cannot start, what they post runs afterwards.
  std::atomic<int> ran{0};
  {
    threadpool pool(1);
    pool.set_exception_handler(
        [c = async_test::posts_when_dropped<threadpool>(&pool, &ran)](std::exception_ptr) {});
    async::detail::thread_starts_left() = 0; // every later start fails
  }
  async::detail::thread_starts_left() = -1;
  CHECK(ran.load() == 1);
}

#if ASYNC_TEST_REPLACES_NEW

TEST_CASE("a post that runs out of memory leaves nothing pending", "[threadpool][faults]") {
  // The task was counted as pending before it was queued; when queueing threw, it stayed
  // counted: wait_idle never returned, and neither did the destructor.
  std::atomic<int> ran{0};
  int accepted = 0;
  int refused = 0;
  {
    threadpool pool(0); // paused: the queue grows, and needs a new block now and then
    // Posts with the calling thread's next allocation failing, until `until` were refused.
    auto post_failing = [&](int until) {
      for (int k = 0; k < 200 && refused < until; ++k) {
        fail_next_allocation = true;
        try {
          pool.execute([&ran] { ran.fetch_add(1); });
          ++accepted;
        } catch (const std::bad_alloc&) {
          ++refused;
        }
        fail_next_allocation = false;
      }
    };
    post_failing(3);
    // From a task: its second and later posts go to its worker's local queue.
    pool.configurepool(1);
    pool.post([&] { post_failing(6); }).get();
    CHECK(refused >= 4);
    CHECK(pool.wait_idle_for(10s));
  }
  CHECK(ran.load() == accepted);
}

TEST_CASE("a post whose memory runs out for good throws bad_alloc and ends nothing",
          "[threadpool][faults]") {
  // When the queue could not grow, post's task (its promise) was destroyed while the future was
  // still held: the broken promise allocated its future_error inside the promise's destructor,
  // and with no memory left that ended the program (std::terminate).
  std::atomic<int> ran{0};
  int refused = 0;
  std::vector<std::future<int>> accepted;
  accepted.reserve(1000);
  {
    threadpool pool(0); // paused: the queue grows now and then, and that needs memory
    for (int i = 0; i < 200; ++i) {
      for (int k = 0; k < 4; ++k) {
        allocations_before_running_out = k;
        try {
          std::future<int> f = pool.post([&ran, i] {
            ran.fetch_add(1);
            return i;
          });
          allocations_before_running_out = -1;
          accepted.push_back(std::move(f));
        } catch (const std::bad_alloc&) {
          allocations_before_running_out = -1;
          ++refused;
        }
      }
    }
    CHECK(refused > 0);
    pool.configurepool(1);
    for (auto& f : accepted) {
      CHECK(f.get() >= 0);
    }
    CHECK(pool.wait_idle_for(10s));
  }
  CHECK(ran.load() == static_cast<int>(accepted.size()));
}

TEST_CASE("cancel_pending that runs out of memory cancels nothing and breaks nothing",
          "[threadpool][faults]") {
  // The tasks moved out before an allocation failed stayed in the queue, empty: a worker later
  // called an empty task (a crash).
  int refused = 0;
  for (int fail_at = 0; fail_at < 10; ++fail_at) {
    std::atomic<int> ran{0};
    threadpool pool(0);
    for (int k = 0; k < 100; ++k) {
      pool.execute([&ran] { ran.fetch_add(1); });
    }
    allocations_before_failure = fail_at;
    std::size_t cancelled = 0;
    bool threw = false;
    try {
      cancelled = pool.cancel_pending();
    } catch (const std::bad_alloc&) {
      threw = true;
      ++refused;
    }
    allocations_before_failure = -1;
    pool.configurepool(2);
    CHECK(pool.wait_idle_for(10s));
    INFO("allocation " << fail_at << " fails");
    CHECK(static_cast<std::size_t>(ran.load()) + cancelled == 100);
    if (threw) {
      CHECK(ran.load() == 100); // nothing was cancelled
    }
  }
  CHECK(refused > 0);
}

TEST_CASE("configurepool that runs out of memory while shrinking loses no worker",
          "[threadpool][faults]") {
  // The worker was told to retire before it was listed among the retirees; listing it threw,
  // so it left while still counted: size() stayed 1 with no thread behind it, a post never ran
  // and the destructor waited for ever.
  threadpool pool(1);
  pool.post([] {}).get();
  fail_next_allocation = true;
  CHECK_THROWS_AS(pool.configurepool(0), std::bad_alloc);
  fail_next_allocation = false;
  CHECK(pool.size() == 1);
  auto f = pool.post([] { return 7; });
  REQUIRE(f.wait_for(10s) == std::future_status::ready);
  CHECK(f.get() == 7);
  pool.configurepool(0); // and it still shrinks
  CHECK(pool.size() == 0);
}

TEST_CASE("a retiring worker that runs out of memory handing its next task over runs it",
          "[threadpool][faults]") {
  // Putting the task of its next slot back into its queue needed memory; the bad_alloc escaped
  // the worker's thread: std::terminate.
  threadpool pool(1);
  std::future<int> second;
  pool.post([&] {
        second = pool.post([] { return 2; }); // its first post: waits in the next slot
        pool.configurepool(0);                // this worker retires after this task
        fail_next_allocation = true;          // on the worker's thread
      })
      .get();
  REQUIRE(second.wait_for(10s) == std::future_status::ready); // it ran before leaving
  CHECK(second.get() == 2);
  CHECK(pool.wait_idle_for(10s));
}

TEST_CASE("a retiring worker that runs out of memory handing its queue over loses nothing",
          "[threadpool][faults]") {
  // Moving its queued tasks behind the outside posts needed memory; the bad_alloc escaped the
  // worker's thread: std::terminate.
  std::atomic<int> ran{0};
  std::atomic<bool> busy{false};
  std::atomic<bool> posted{false};
  threadpool pool(1);
  pool.execute([&] {
    busy = true;
    for (int k = 0; k < 10; ++k) { // the first waits in the next slot, nine are queued locally
      pool.execute([&ran] { ran.fetch_add(1); });
    }
    pool.configurepool(0); // retires after this task
    while (!posted.load()) {
      std::this_thread::yield();
    }
    fail_next_allocation = true; // the worker's next allocation: the hand-over's
  });
  while (!busy.load()) {
    std::this_thread::yield();
  }
  pool.execute([&ran] { ran.fetch_add(1); }); // to the pool's queue, not empty at the hand-over
  posted = true;
  std::this_thread::sleep_for(50ms);
  pool.configurepool(1);
  CHECK(pool.wait_idle_for(10s));
  CHECK(ran.load() == 11);
}

TEST_CASE("a worker that runs out of memory taking a batch of outside posts leaves them queued",
          "[threadpool][faults]") {
  // With outside posts queued deeper than two batches and every other worker busy, a worker
  // moves a batch of them into its own queue; when that queue cannot grow, the tasks must stay
  // in the pool's queue (a bad_alloc escaping the worker's thread is std::terminate).
  threadpool pool(1);
  std::atomic<bool> started{false};
  std::atomic<bool> release{false};
  constexpr int n = 100;
  std::mutex m;
  std::vector<int> order;
  order.reserve(n); // the tasks below allocate nothing on the worker
  pool.execute([&] {
    started = true;
    while (!release.load()) {
      std::this_thread::yield();
    }
    fail_next_allocation = true; // the worker's next allocation: room for the batch
  });
  while (!started.load()) {
    std::this_thread::yield();
  }
  for (int k = 0; k < n; ++k) {
    pool.execute([&m, &order, k] {
      std::lock_guard<std::mutex> lock(m);
      order.push_back(k);
    });
  }
  release = true;
  REQUIRE(pool.wait_idle_for(10s));
  std::atomic<bool> left_set{true};
  pool.execute([&left_set] {
    left_set = fail_next_allocation; // false: an allocation of the worker took the failure
    fail_next_allocation = false;
  });
  REQUIRE(pool.wait_idle_for(10s));
  CHECK_FALSE(left_set.load());
  std::lock_guard<std::mutex> lock(m);
  REQUIRE(order.size() == std::size_t(n)); // each ran once, in post order (one worker)
  for (int k = 0; k < n; ++k) {
    CHECK(order[static_cast<std::size_t>(k)] == k);
  }
}

TEST_CASE("joining retirees without memory neither throws nor destroys a running thread",
          "[threadpool][faults]") {
  // join_retired moved retirees one by one into a list that grew: when growing threw, the
  // moved ones were destroyed unjoined: std::terminate.
  for (int before = 0; before < 3; ++before) {
    threadpool pool(3);
    pool.configurepool(0);
    std::this_thread::sleep_for(100ms); // the retirees have finished: joinable at once
    allocations_before_failure = before;
    CHECK_NOTHROW(pool.configurepool(0)); // joins what it can; the rest is joined later
    allocations_before_failure = -1;
    pool.configurepool(1);
    CHECK(pool.post([] { return 1; }).get() == 1);
  }
}

TEST_CASE("a pool destroyed while memory runs out still ends cleanly", "[threadpool][faults]") {
  // Retiring the workers in the destructor listed them one by one: the bad_alloc escaped the
  // destructor (noexcept): std::terminate.
  std::atomic<int> ran{0};
  for (int before = 0; before < 4; ++before) {
    {
      threadpool pool(2);
      pool.execute([&ran] { ran.fetch_add(1); });
      CHECK(pool.wait_idle_for(10s));
      allocations_before_failure = before;
    }
    allocations_before_failure = -1;
  }
  CHECK(ran.load() == 4);
}

#endif
