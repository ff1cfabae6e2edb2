// SPDX-License-Identifier: BSL-1.0
// async::threadpool: std::async-compatible post(), execute() and its handler, resizing with the
// real thread count proved by a rendezvous, destruction, paused pools, chains, idle cost.
#include <async/threadpool.h>

#include "test_support.h"

#include "async_catch.h"

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

using async::threadpool;
using namespace std::chrono_literals;

namespace {

int add(int a, int b) { return a + b; }

struct counter_object {
  int base = 40;
  int plus(int x) const { return base + x; }
  int value = 7;
};

struct functor {
  int operator()(int x) const { return x * 2; }
};

// A virtual member function: called through the object's most derived override, whether the
// object comes by value, reference_wrapper, pointer or smart pointer.
struct shape_base {
  virtual ~shape_base() = default;
  virtual int sides(int extra) const { return extra; }
};
struct square : shape_base {
  int sides(int extra) const override { return 4 + extra; }
};

// Runs `tasks` tasks that each hold their worker until `expected` tasks run at the same time
// (or a deadline passes), and reports how many ran at once at most and on how many distinct
// threads. With `expected` = the pool size, a pool that really has that many threads reaches
// the rendezvous; one with fewer cannot.
struct rendezvous_result {
  int max_concurrent;
  std::size_t distinct_threads;
};

rendezvous_result rendezvous(threadpool& pool, int tasks, int expected) {
  std::mutex m;
  std::set<std::thread::id> ids;
  std::atomic<int> running{0};
  std::atomic<int> max_running{0};
  std::vector<std::future<void>> done;
  for (int i = 0; i < tasks; ++i) {
    done.push_back(pool.post([&] {
      const int now = running.fetch_add(1) + 1;
      int seen = max_running.load();
      while (now > seen && !max_running.compare_exchange_weak(seen, now)) {
      }
      {
        std::lock_guard<std::mutex> lock(m);
        ids.insert(std::this_thread::get_id());
      }
      const auto end = std::chrono::steady_clock::now() + 2s;
      while (max_running.load() < expected && std::chrono::steady_clock::now() < end) {
        std::this_thread::sleep_for(1ms);
      }
      std::this_thread::sleep_for(20ms); // keep the slot so nobody runs two of these
      running.fetch_sub(1);
    }));
  }
  for (auto& f : done) {
    f.get();
  }
  return {max_running.load(), ids.size()};
}

} // namespace

TEST_CASE("a negative size is rejected", "[threadpool]") {
  CHECK_THROWS_AS(threadpool(-1), std::invalid_argument);
}

TEST_CASE("post accepts every kind of callable, like std::async", "[threadpool]") {
  threadpool pool(2);
  counter_object obj;
  auto shared = std::make_shared<counter_object>();
  std::unique_ptr<counter_object> owned(new counter_object);

  auto free_fn = pool.post(add, 2, 3);
  auto fn_ptr = pool.post(&add, 4, 5);
  auto lambda = pool.post([](std::string s) { return s + "!"; }, std::string("hi"));
  auto fun = pool.post(functor{}, 21);
  auto bound = pool.post(std::bind(add, 1, std::placeholders::_1), 10);
  auto member_by_ptr = pool.post(&counter_object::plus, &obj, 1);
  auto member_by_ref = pool.post(&counter_object::plus, std::ref(obj), 2);
  auto member_by_value = pool.post(&counter_object::plus, obj, 3);
  auto member_by_shared = pool.post(&counter_object::plus, shared, 4);
  auto member_by_unique = pool.post(&counter_object::plus, std::move(owned), 5);
  auto data_member = pool.post(&counter_object::value, &obj);
  auto std_function = pool.post(std::function<int()>([] { return 99; }));

  static_assert(std::is_same<decltype(free_fn), std::future<int>>::value, "R as std::async");
  static_assert(std::is_same<decltype(lambda), std::future<std::string>>::value, "");
  static_assert(std::is_same<decltype(data_member),
                             decltype(std::async(&counter_object::value, &obj))>::value,
                "a data member gives what std::async gives");

  CHECK(free_fn.get() == 5);
  CHECK(fn_ptr.get() == 9);
  CHECK(lambda.get() == "hi!");
  CHECK(fun.get() == 42);
  CHECK(bound.get() == 11);
  CHECK(member_by_ptr.get() == 41);
  CHECK(member_by_ref.get() == 42);
  CHECK(member_by_value.get() == 43);
  CHECK(member_by_shared.get() == 44);
  CHECK(member_by_unique.get() == 45);
  CHECK(data_member.get() == 7);
  CHECK(std_function.get() == 99);
}

TEST_CASE("post calls a virtual member function through the object's override", "[threadpool]") {
  threadpool pool(2);
  const square sq;
  const shape_base& as_base = sq;
  auto by_value = pool.post(&shape_base::sides, sq, 1); // a copy of the square: its override
  auto by_ref = pool.post(&shape_base::sides, std::cref(as_base), 2);
  auto by_ptr = pool.post(&shape_base::sides, &as_base, 3);
  auto by_shared = pool.post(&shape_base::sides, std::shared_ptr<shape_base>(new square), 4);
  const shape_base plain;
  auto not_overridden = pool.post(&shape_base::sides, std::cref(plain), 5);
  CHECK(by_value.get() == 5);
  CHECK(by_ref.get() == 6);
  CHECK(by_ptr.get() == 7);
  CHECK(by_shared.get() == 8);
  CHECK(not_overridden.get() == 5);
}

TEST_CASE("arguments are decay-copied or moved; std::ref passes a reference", "[threadpool]") {
  threadpool pool(2);
  SECTION("move-only arguments and results") {
    auto f = pool.post([](std::unique_ptr<int> p) { return std::unique_ptr<int>(new int(*p + 1)); },
                       std::unique_ptr<int>(new int(41)));
    std::unique_ptr<int> r = f.get();
    CHECK(*r == 42);
  }
  SECTION("std::ref") {
    int x = 0;
    pool.post([](int& r) { r = 5; }, std::ref(x)).get();
    CHECK(x == 5);
  }
  SECTION("a copy, not the caller's object") {
    std::string s = "original";
    // Like std::async, the copy is passed as an rvalue: a `std::string&` parameter would not
    // compile (use std::ref for that).
    auto f = pool.post([](std::string copy) { return copy += " changed"; }, s);
    CHECK(f.get() == "original changed");
    CHECK(s == "original");
  }
  SECTION("a move-only callable") {
    std::unique_ptr<int> p(new int(3));
    auto f = pool.post([q = std::move(p)] { return *q; });
    CHECK(f.get() == 3);
  }
  SECTION("a large callable (heap-stored task)") {
    std::array<char, 500> big{};
    big[499] = 'z';
    auto f = pool.post([big] { return big[499]; });
    CHECK(f.get() == 'z');
  }
}

TEST_CASE("an exception thrown by a task reaches future::get", "[threadpool]") {
  threadpool pool(1);
  auto f = pool.post([]() -> int { throw std::runtime_error("task failed"); });
  CHECK_THROWS_WITH(f.get(), "task failed");
  auto v = pool.post([] { throw std::logic_error("void task failed"); });
  CHECK_THROWS_AS(v.get(), std::logic_error);
  CHECK(pool.post([] { return 1; }).get() == 1); // the worker survived
}

TEST_CASE("execute sends escaping exceptions to the handler", "[threadpool]") {
  threadpool pool(2);
  std::promise<std::string> caught;
  pool.set_exception_handler([&](std::exception_ptr e) {
    try {
      std::rethrow_exception(e);
    } catch (const std::exception& ex) {
      caught.set_value(ex.what());
    }
  });
  std::atomic<int> ran{0};
  pool.execute([&] { ran.fetch_add(1); });
  pool.execute([] { throw std::runtime_error("fire and forget"); });
  auto f = caught.get_future();
  REQUIRE(f.wait_for(10s) == std::future_status::ready);
  CHECK(f.get() == "fire and forget");
  pool.wait_idle();
  CHECK(ran == 1);
}

TEST_CASE("the real number of threads follows every resize", "[threadpool]") {
  threadpool pool(3);
  CHECK(pool.size() == 3);
  auto r = rendezvous(pool, 6, 3);
  CHECK(r.max_concurrent == 3);
  CHECK(r.distinct_threads == 3);

  pool.configurepool(5);
  CHECK(pool.size() == 5);
  r = rendezvous(pool, 10, 5);
  CHECK(r.max_concurrent == 5);
  CHECK(r.distinct_threads == 5);

  pool.configurepool(2);
  CHECK(pool.size() == 2);
  r = rendezvous(pool, 4, 2);
  CHECK(r.max_concurrent == 2); // the retired workers run nothing any more
  CHECK(r.distinct_threads == 2);

  pool.wait_idle();
  CHECK(async_test::eventually_equal([&] { return pool.idlesize(); }, 2));
}

TEST_CASE("a burst of sleeping tasks keeps every worker busy", "[threadpool]") {
  // The original lost wake-ups: 160 sleeping tasks on 16 workers ran at most 8 at a time.
  const int workers = 4;
  threadpool pool(workers);
  std::this_thread::sleep_for(20ms); // all parked
  std::atomic<int> running{0};
  std::atomic<int> max_running{0};
  std::vector<std::future<void>> done;
  for (int i = 0; i < workers * 10; ++i) {
    done.push_back(pool.post([&] {
      const int now = running.fetch_add(1) + 1;
      int seen = max_running.load();
      while (now > seen && !max_running.compare_exchange_weak(seen, now)) {
      }
      std::this_thread::sleep_for(10ms);
      running.fetch_sub(1);
    }));
  }
  for (auto& f : done) {
    f.get();
  }
  CHECK(max_running == workers);
}

TEST_CASE("resize storms under load lose and duplicate nothing", "[threadpool]") {
  const int tasks = static_cast<int>(async_test::scaled(20000, 2000));
  std::unique_ptr<std::atomic<int>[]> runs(new std::atomic<int>[tasks]);
  for (int i = 0; i < tasks; ++i) {
    runs[i] = 0;
  }
  {
    threadpool pool(2);
    std::atomic<bool> stop{false};
    std::thread resizer([&] {
      std::size_t n = 0;
      while (!stop.load()) {
        pool.configurepool(n % 6); // 0 (paused) included
        n = n * 7 + 3;
        std::this_thread::sleep_for(200us);
      }
      pool.configurepool(3);
    });
    for (int i = 0; i < tasks; ++i) {
      if (i % 2 == 0) {
        pool.execute([&runs, i] { runs[i].fetch_add(1); });
      } else {
        pool.post([&runs, i] { runs[i].fetch_add(1); });
      }
    }
    stop = true;
    resizer.join();
    pool.wait_idle();
  }
  int wrong = 0;
  for (int i = 0; i < tasks; ++i) {
    wrong += runs[i].load() != 1;
  }
  CHECK(wrong == 0);
}

TEST_CASE("configurepool from inside a task", "[threadpool]") {
  threadpool pool(4);
  pool.post([&pool] { pool.configurepool(1); }).get(); // may retire the calling worker
  CHECK(pool.size() == 1);
  CHECK(pool.post([] { return 1; }).get() == 1);
  pool.post([&pool] { pool.configurepool(3); }).get();
  auto r = rendezvous(pool, 3, 3);
  CHECK(r.max_concurrent == 3);
}

TEST_CASE("shrinking then destroying at once is safe", "[threadpool]") {
  for (int round = 0; round < 20; ++round) {
    std::atomic<int> ran{0};
    {
      threadpool pool(4);
      for (int i = 0; i < 50; ++i) {
        pool.execute([&] { ran.fetch_add(1); });
      }
      pool.configurepool(1);
    } // joins the retired threads too (the original detached them: use-after-free)
    CHECK(ran == 50);
  }
}

TEST_CASE("destruction runs every task already posted", "[threadpool]") {
  const int tasks = 5000;
  std::vector<std::future<int>> futures;
  std::atomic<int> ran{0};
  {
    threadpool pool(2);
    for (int i = 0; i < tasks; ++i) {
      futures.push_back(pool.post([&ran, i] {
        ran.fetch_add(1);
        return i;
      }));
    }
  }
  CHECK(ran == tasks);
  int broken = 0;
  for (int i = 0; i < tasks; ++i) {
    try {
      broken += futures[static_cast<std::size_t>(i)].get() != i;
    } catch (const std::future_error&) {
      ++broken; // broken_promise
    }
  }
  CHECK(broken == 0);
}

TEST_CASE("a paused pool queues posts and runs them once resized", "[threadpool]") {
  threadpool pool(0);
  CHECK(pool.size() == 0);
  auto f = pool.post([] { return 8; });
  CHECK(f.wait_for(50ms) == std::future_status::timeout);
  pool.configurepool(2);
  CHECK(f.get() == 8);
}

TEST_CASE("one worker runs outside posts in post order (batches too)", "[threadpool]") {
  // A worker moves a share of the queued outside posts to its own queue at once (take_batch):
  // they must still run oldest first. 100 posts wait in a paused pool, then one worker starts.
  threadpool pool(0);
  std::vector<int> order;
  std::vector<std::future<void>> done;
  for (int i = 0; i < 100; ++i) {
    done.push_back(pool.post([&order, i] { order.push_back(i); })); // one worker: no race
  }
  pool.configurepool(1);
  for (auto& f : done) {
    f.get();
  }
  REQUIRE(order.size() == 100);
  for (int i = 0; i < 100; ++i) {
    CHECK(order[static_cast<std::size_t>(i)] == i);
  }
}

TEST_CASE("a batch taken by a blocked worker is run by the other worker", "[threadpool]") {
  // The first task waits for the second. A worker that takes the first task also moves a batch
  // of the next ones (the second among them) into its own queue, then blocks: the other worker
  // must find the second task there. (A batch that only its owner could run would deadlock.)
  // 2 workers, 42 posts (batches are taken from 32 queued on): whichever worker starts first
  // takes the first task and 16 more.
  for (int round = 0; round < 20; ++round) {
    threadpool pool(0);
    std::promise<void> second_ran;
    std::shared_future<void> second = second_ran.get_future().share();
    auto first = pool.post([second] { return second.wait_for(10s) == std::future_status::ready; });
    pool.execute([&second_ran] { second_ran.set_value(); });
    std::vector<std::future<void>> others;
    for (int i = 0; i < 40; ++i) {
      others.push_back(pool.post([] {}));
    }
    pool.configurepool(2);
    REQUIRE(first.get());
    for (auto& f : others) {
      f.get();
    }
  }
}

TEST_CASE("a paused pool's destructor runs what is queued", "[threadpool]") {
  std::atomic<int> ran{0};
  std::future<int> f;
  {
    threadpool pool(0);
    for (int i = 0; i < 10; ++i) {
      pool.execute([&] { ran.fetch_add(1); });
    }
    f = pool.post([] { return 3; });
  }
  CHECK(ran == 10);
  CHECK(f.get() == 3);
}

TEST_CASE("tasks posted from inside tasks: deep chains", "[threadpool]") {
  threadpool pool(3);
  const int roots = 8;
  const int depth = static_cast<int>(async_test::scaled(2000, 200));
  std::atomic<int> ran{0};
  std::vector<std::promise<void>> finished(static_cast<std::size_t>(roots));
  struct chain {
    threadpool* pool;
    std::atomic<int>* ran;
    std::promise<void>* done;
    int left;
    void operator()() const {
      ran->fetch_add(1);
      if (left == 0) {
        done->set_value();
      } else {
        pool->execute(chain{pool, ran, done, left - 1});
      }
    }
  };
  for (int r = 0; r < roots; ++r) {
    pool.execute(chain{&pool, &ran, &finished[static_cast<std::size_t>(r)], depth});
  }
  for (auto& p : finished) {
    REQUIRE(p.get_future().wait_for(60s) == std::future_status::ready);
  }
  CHECK(ran == roots * (depth + 1));
}

TEST_CASE("wait_idle waits for everything, and refuses to wait for itself", "[threadpool]") {
  threadpool pool(2);
  std::atomic<int> ran{0};
  for (int i = 0; i < 100; ++i) {
    pool.execute([&] {
      std::this_thread::sleep_for(100us);
      ran.fetch_add(1);
    });
  }
  pool.wait_idle();
  CHECK(ran == 100);
  auto f = pool.post([&pool] { pool.wait_idle(); });
  CHECK_THROWS_AS(f.get(), std::logic_error);
}

TEST_CASE("an idle pool burns no CPU", "[threadpool]") {
  threadpool pool(4);
  pool.post([] {}).get();
  std::this_thread::sleep_for(50ms); // every worker parked
  const double idle = async_test::process_cpu_fraction(300ms);
  const double spinning = async_test::spinning_cpu_fraction(300ms);
  INFO("CPU per wall second: " << idle << " with 4 idle workers, " << spinning
                               << " with one thread spinning");
  CHECK(idle < 0.1 * spinning); // one spinning worker alone would match the yardstick
  CHECK(pool.idlesize() == 4);
}

namespace {

// Waits up to `limit` for `done()`; if it never comes, the pool's threads may be stuck for good
// (or the heap corrupted), so report and end the test binary: nothing can be unwound safely.
template <typename Done>
void await_or_abort(Done done, const char* what, std::chrono::milliseconds limit = 20000ms) {
  if (!async_test::eventually_equal([&] { return done(); }, true, limit)) {
    std::fprintf(stderr, "FAILED: %s did not finish in %lld ms\n", what,
                 static_cast<long long>(limit.count()));
    std::abort();
  }
}

// Runs body (which ends, as a rule, by destroying a pool) on a thread of its own and waits for
// it to return, as await_or_abort does: a hang ends the test binary with `what`.
template <typename Body>
void finishes_or_abort(Body body, const char* what) {
  std::atomic<bool> done{false};
  std::thread runner([&] {
    body();
    done = true;
  });
  await_or_abort([&] { return done.load(); }, what);
  runner.join();
}

} // namespace

TEST_CASE("resizing while tasks post tasks loses and corrupts nothing", "[threadpool]") {
  // A retiring worker used to hand its queued tasks over without the pool's lock (the lock of
  // its loop ended with the loop), racing with every submit: crashes, `free(): invalid size`,
  // lost tasks. Here an outside thread and the tasks themselves resize all the time while every
  // task posts 8 children.
  for (int rep = 0; rep < 5; ++rep) {
    threadpool pool(2);
    std::atomic<int> ran{0};
    std::atomic<bool> stop{false};
    const int roots = static_cast<int>(async_test::scaled(300, 50));
    const int total = roots * 9;
    std::thread resizer([&] {
      for (std::size_t i = 0; !stop.load(); ++i) {
        pool.configurepool(1 + i % 3);
        std::this_thread::yield();
      }
    });
    for (int r = 0; r < roots; ++r) {
      pool.execute([&pool, &ran, r] {
        for (int c = 0; c < 8; ++c) {
          pool.execute([&ran] { ran.fetch_add(1); });
        }
        if (r % 16 == 5) {
          pool.configurepool(1 + static_cast<std::size_t>(r) % 3); // from inside a task
        }
        ran.fetch_add(1);
      });
    }
    await_or_abort([&] { return ran.load() == total; }, "a resize storm with tasks posting tasks");
    stop = true;
    resizer.join();
    CHECK(ran.load() == total);
  }
}

TEST_CASE("two tasks shrinking the pool to 0 at once do not join each other", "[threadpool]") {
  // Each retiring worker used to join the other: a deadlock, every time.
  for (int rep = 0; rep < 20; ++rep) {
    std::atomic<int> done{0};
    {
      threadpool pool(2);
      std::atomic<int> arrived{0};
      for (int k = 0; k < 2; ++k) {
        pool.execute([&] {
          arrived.fetch_add(1);
          while (arrived.load() < 2) {
            std::this_thread::yield();
          }
          pool.configurepool(0);
          done.fetch_add(1);
        });
      }
      await_or_abort([&] { return done.load() == 2; }, "two in-task configurepool(0) calls");
      pool.configurepool(2); // and the pool still works
      CHECK(pool.post([] { return 7; }).get() == 7);
    }
    CHECK(done.load() == 2);
  }
}

TEST_CASE("configurepool never waits for a running task", "[threadpool]") {
  // Shrinking used to join every retiree, so it waited for their current tasks: a task waiting
  // for something its caller does after configurepool returns deadlocked.
  threadpool pool(2);
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::atomic<int> started{0};
  for (int k = 0; k < 2; ++k) {
    pool.execute([&started, released] {
      started.fetch_add(1);
      released.wait();
    });
  }
  await_or_abort([&] { return started.load() == 2; }, "two blocking tasks starting");
  std::atomic<bool> shrunk{false};
  std::thread shrinker([&] {
    pool.configurepool(0);
    shrunk = true;
  });
  await_or_abort([&] { return shrunk.load(); }, "configurepool(0) with two running tasks");
  release.set_value();
  shrinker.join();
  pool.configurepool(1);
  CHECK(pool.post([] { return 3; }).get() == 3);
}

TEST_CASE("the destructor finishes when a task shrinks the pool to 0 meanwhile", "[threadpool]") {
  // Nothing used to wake the destructor when "no worker, but queued tasks" became true.
  for (int rep = 0; rep < 10; ++rep) {
    std::atomic<int> ran{0};
    finishes_or_abort(
        [&] {
          threadpool pool(1);
          pool.execute([&] {
            std::this_thread::sleep_for(5ms); // the destructor is waiting by now
            pool.configurepool(0);
            ran.fetch_add(1);
          });
          pool.execute([&] { ran.fetch_add(1); }); // queued behind: the destructor must run it
        },
        "the destructor of a pool shrunk to 0");
    CHECK(ran.load() == 2);
  }
}

TEST_CASE("cancel_pending discards queued tasks, never a running one", "[threadpool]") {
  threadpool pool(0); // paused: everything posted stays queued
  std::vector<std::future<int>> futures;
  for (int k = 0; k < 10; ++k) {
    futures.push_back(pool.post([k] { return k; }));
  }
  auto witness = std::make_shared<int>(0);
  std::atomic<int> ran{0};
  for (int k = 0; k < 5; ++k) {
    pool.execute([witness, &ran] { ran.fetch_add(1); });
  }
  CHECK(witness.use_count() == 6);
  CHECK(pool.cancel_pending() == 15);
  CHECK(witness.use_count() == 1); // the execute() tasks were destroyed
  for (auto& f : futures) {
    try {
      f.get();
      FAIL("a cancelled post() delivered a value");
    } catch (const std::future_error& e) {
      CHECK(e.code() == std::future_errc::broken_promise);
    }
  }
  CHECK(pool.cancel_pending() == 0);
  CHECK(pool.wait_idle_for(0ms)); // nothing pending any more

  // A running task is never touched.
  pool.configurepool(1);
  std::promise<void> release;
  std::shared_future<void> go = release.get_future().share();
  std::atomic<bool> started{false};
  auto running = pool.post([go, &started] {
    started = true;
    go.wait();
    return 42;
  });
  while (!started.load()) {
    std::this_thread::yield();
  }
  auto queued = pool.post([] { return 1; });
  CHECK(pool.cancel_pending() == 1);
  release.set_value();
  CHECK(running.get() == 42);
  CHECK_THROWS_AS(queued.get(), std::future_error);
  CHECK(ran.load() == 0);
}

TEST_CASE("wait_idle_for times out, waits, and takes duration::max()", "[threadpool]") {
  threadpool pool(1);
  std::promise<void> release;
  std::shared_future<void> go = release.get_future().share();
  pool.execute([go] { go.wait(); });
  CHECK_FALSE(pool.wait_idle_for(20ms));
  CHECK_FALSE(pool.wait_idle_until(std::chrono::system_clock::now() + 10ms));
  std::thread releaser([&] {
    std::this_thread::sleep_for(20ms);
    release.set_value();
  });
  CHECK(pool.wait_idle_for(std::chrono::hours::max())); // waits, does not overflow
  releaser.join();
  CHECK(pool.wait_idle_for(std::chrono::nanoseconds::max()));
  CHECK(pool.wait_idle_for(-1s));
  std::atomic<bool> threw{false};
  pool.post([&] {
        try {
          static_cast<void>(pool.wait_idle_for(1s)); // throws: a task of this pool
        } catch (const std::logic_error&) {
          threw = true;
        }
      })
      .get();
  CHECK(threw.load());
}

TEST_CASE("wait_idle_for takes long timeouts in units that both multiply and divide",
          "[threadpool]") {
  // Converting such a unit to nanoseconds multiplied first: 10^11 NTSC frames (106 years, far
  // inside steady_clock's range) overflowed into the past and the wait gave up at once.
  using frames = std::chrono::duration<long long, std::ratio<1001, 30000>>;
  using thirds = std::chrono::duration<long long, std::ratio<1, 3>>;
  const auto century = std::chrono::hours(24 * 365 * 100);
  CHECK(async::detail::deadline_after(frames(100000000000LL)) - std::chrono::steady_clock::now() >
        century);
  CHECK(async::detail::deadline_after(thirds(20000000000LL)) - std::chrono::steady_clock::now() >
        century);
  threadpool pool(1);
  for (int k = 0; k < 2; ++k) {
    std::atomic<bool> done{false};
    pool.execute([&done] {
      std::this_thread::sleep_for(30ms);
      done = true;
    });
    const bool idle = k == 0 ? pool.wait_idle_for(frames(100000000000LL))
                             : pool.wait_idle_for(thirds(20000000000LL));
    CHECK(idle);
    CHECK(done.load()); // it waited for the task
  }
}

namespace {

// From inside a task of `pool`: posts a child that does the same `levels - 1` times, and waits
// for it at most `limit`. True when every level's child finished while its parent waited.
bool nested_wait(threadpool& pool, int levels, std::chrono::milliseconds limit) {
  if (levels == 0) {
    return true;
  }
  auto child = pool.post([&pool, levels, limit] { return nested_wait(pool, levels - 1, limit); });
  if (child.wait_for(limit) != std::future_status::ready) {
    return false;
  }
  return child.get();
}

} // namespace

TEST_CASE("a task waiting on a task it posted finishes while another worker is free",
          "[threadpool]") {
  // The first task a task posts used to wait in its worker's private next slot until the poster
  // returned: post(f).get() inside a task deadlocked although the other workers were idle.
  // W workers allow W - 1 levels of such nesting.
  for (int workers : {2, 3, 4}) {
    threadpool pool(workers);
    pool.post([] {}).get();
    std::this_thread::sleep_for(20ms); // the other workers are parked
    auto f = pool.post([&pool, workers] { return nested_wait(pool, workers - 1, 5000ms); });
    REQUIRE(f.wait_for(60s) == std::future_status::ready);
    INFO(workers << " workers, " << workers - 1 << " levels of nesting");
    CHECK(f.get());
  }
}

TEST_CASE("post(f).get() inside a task, again and again, with the others parked or spinning",
          "[threadpool]") {
  // No pause between rounds: the other worker is met spinning, parking, parked and watching.
  threadpool pool(2);
  std::atomic<int> done{0};
  const int rounds = static_cast<int>(async_test::scaled(300, 50));
  std::thread client([&] {
    for (int r = 0; r < rounds; ++r) {
      pool.post([&pool] { return pool.post([] { return 1; }).get(); }).get();
      done.fetch_add(1);
      if (r % 16 == 0) {
        std::this_thread::sleep_for(1ms); // and sometimes parked for good
      }
    }
  });
  await_or_abort([&] { return done.load() == rounds; }, "nested post(f).get() rounds", 60000ms);
  client.join();
  CHECK(done.load() == rounds);
}

// One round of k parents, each waiting on a child it posts, the k children waiting for each
// other (up to 5 s): true when all k children ran at once. The round's state lives on the
// heap: after a failure, a child that starts late must not find a dead round.
namespace {

bool children_meet(threadpool& pool, int k) {
  struct round_state {
    std::mutex m;
    std::condition_variable cv;
    int started = 0;
  };
  auto s = std::make_shared<round_state>();
  auto child = [s, k] {
    std::unique_lock<std::mutex> lock(s->m);
    ++s->started;
    s->cv.notify_all();
    return s->cv.wait_for(lock, 5s, [&] { return s->started == k; });
  };
  auto parent = [&pool, child] {
    std::this_thread::sleep_for(2ms); // the idle workers park meanwhile
    return pool.post(child).get();
  };
  std::vector<std::future<bool>> parents;
  for (int i = 0; i < k; ++i) {
    parents.push_back(pool.post(parent));
  }
  bool all = true;
  for (auto& f : parents) {
    all = f.get() && all;
  }
  return all;
}

} // namespace

TEST_CASE("two tasks waiting on their children at once on four workers both finish",
          "[threadpool]") {
  // Each child waits until the other has started, so both must run at once: two workers are
  // free for them. The watcher that took the first child from its poster's slot used to leave
  // without handing its watch on when its look had stopped at that slot: the second child then
  // waited in its slot with every other worker asleep, for good.
  threadpool pool(4);
  const int rounds = static_cast<int>(async_test::scaled(400, 60));
  int stuck = 0;
  for (int r = 0; r < rounds && stuck == 0; ++r) {
    const bool both = children_meet(pool, 2);
    stuck += both ? 0 : 1;
    INFO("round " << r);
    CHECK(both);
  }
}

TEST_CASE("several tasks waiting on their children at once all finish", "[threadpool]") {
  // K parents each wait on one child, and the K children wait for each other: K workers must
  // be free for them at once. The watch over the next slots used to get lost when the watcher
  // was woken for nothing (a late notification: the task it was meant for had gone) and then
  // took a child from a slot on its way back, outside park(): nobody handed the watch on, and
  // the other children stayed in their slots while every other worker slept without a
  // deadline.
  const int kinds[] = {2, 3, 4};
  for (int k : kinds) {
    threadpool pool(2 * k);
    const int rounds = static_cast<int>(async_test::scaled(200, 40));
    int stuck = 0;
    for (int r = 0; r < rounds && stuck == 0; ++r) {
      const bool all = children_meet(pool, k);
      stuck += all ? 0 : 1;
      INFO(k << " parents, round " << r);
      CHECK(all);
    }
  }
}

TEST_CASE("an idle worker takes a task posted by a task that keeps running", "[threadpool]") {
  // The same slot delayed work: a subtask posted by a long task used to start only when that
  // task returned, although three workers were idle.
  for (bool with_future : {false, true}) {
    threadpool pool(4);
    pool.post([] {}).get();
    std::this_thread::sleep_for(20ms);
    std::atomic<bool> child_ran{false};
    auto parent = pool.post([&] {
      if (with_future) {
        pool.post([&] { child_ran = true; });
      } else {
        pool.execute([&] { child_ran = true; });
      }
      // Busy for up to 5 s, never blocking on a future (a long computation).
      const auto end = std::chrono::steady_clock::now() + 5s;
      while (!child_ran.load() && std::chrono::steady_clock::now() < end) {
        std::this_thread::sleep_for(100us);
      }
      return child_ran.load();
    });
    INFO((with_future ? "post()" : "execute()") << " child");
    CHECK(parent.get());
  }
}

TEST_CASE("wait_idle never returns while a task taken from a next slot still runs",
          "[threadpool]") {
  // A task's first post inherits its poster's place in the pending count; a worker that takes it
  // from the poster's slot while the poster still runs counts it again. wait_idle returning one
  // task early would show here as a count short of the total.
  threadpool pool(3);
  std::atomic<int> ran{0};
  struct link {
    threadpool* pool;
    std::atomic<int>* ran;
    int left;
    void operator()() const {
      if (left > 0) {
        pool->execute(link{pool, ran, left - 1});
      }
      if (left % 5 == 0) {
        std::this_thread::sleep_for(300us); // long enough for an idle worker to take the child
      }
      ran->fetch_add(1);
    }
  };
  const int roots = 4;
  const int depth = static_cast<int>(async_test::scaled(200, 40));
  for (int round = 0; round < 5; ++round) {
    ran = 0;
    for (int r = 0; r < roots; ++r) {
      pool.execute(link{&pool, &ran, depth});
    }
    pool.wait_idle();
    REQUIRE(ran.load() == roots * (depth + 1));
  }
}

TEST_CASE("wait_idle sees every task a worker ran from its own queue, however few",
          "[threadpool]") {
  // A worker subtracts the tasks it runs from its own queue from the pending count in batches;
  // what is left of a batch when its queue runs dry must be counted before it waits, or
  // wait_idle would wait for ever. And nothing may be counted before it ran.
  threadpool pool(1);
  for (int n : {1, 2, 31, 32, 33, 40, 64, 65}) {
    INFO(n << " tasks posted from a task");
    std::atomic<int> ran{0};
    std::atomic<bool> last_done{false};
    pool.execute([&pool, &ran, &last_done, n] {
      for (int k = 1; k < n; ++k) {
        pool.execute([&ran] { ran.fetch_add(1); });
      }
      pool.execute([&ran, &last_done] {
        std::this_thread::sleep_for(5ms); // wait_idle is waiting by now
        ran.fetch_add(1);
        last_done = true;
      });
    });
    REQUIRE(pool.wait_idle_for(10s));
    CHECK(last_done.load());
    CHECK(ran.load() == n);
  }
}

TEST_CASE("a waiting task's child is not starved by a stream of outside posts", "[threadpool]") {
  // Idle workers used to look at the next slots only when the injection queue and every local
  // queue were empty: a stream of outside posts kept a blocked parent's child waiting for as
  // long as the stream lasted.
  threadpool pool(2);
  std::atomic<bool> child_started{false};
  std::atomic<bool> stop{false};
  std::atomic<int> outstanding{0};
  std::thread feeder([&] {
    while (!stop.load()) {
      if (outstanding.load() < 64) {
        outstanding.fetch_add(1);
        pool.execute([&] {
          std::this_thread::sleep_for(20us);
          outstanding.fetch_sub(1);
        });
      } else {
        std::this_thread::yield();
      }
    }
  });
  auto parent = pool.post([&] {
    auto child = pool.post([&] { child_started = true; });
    child.wait();
  });
  const bool in_time = async_test::eventually_equal([&] { return child_started.load(); }, true,
                                                    5000ms); // the stream still flows
  stop = true;
  feeder.join();
  parent.get();
  CHECK(in_time);
}

namespace {

// A callable that posts another task to `pool` from its move constructor, on its n-th move
// (how many moves a task makes is the pool's business: each n hits another one, or none).
struct posts_when_moved {
  threadpool* pool;
  std::atomic<int>* ran;    // runs of this callable and of what its moves posted
  std::atomic<int>* posted; // posts made by its moves
  int moves_left;
  posts_when_moved(threadpool* p, std::atomic<int>* r, std::atomic<int>* n, int moves)
      : pool(p), ran(r), posted(n), moves_left(moves) {}
  posts_when_moved(const posts_when_moved&) = delete;
  posts_when_moved(posts_when_moved&& o) noexcept
      : pool(o.pool), ran(o.ran), posted(o.posted), moves_left(o.moves_left - 1) {
    if (moves_left == 0) {
      posted->fetch_add(1);
      pool->execute([r = ran] { r->fetch_add(1); });
    }
  }
  void operator()() const { ran->fetch_add(1); }
};

} // namespace

TEST_CASE("a callable whose move constructor posts from a task loses nothing", "[threadpool]") {
  // Its move into or out of the next slot used to post into that same slot: the first task
  // was overwritten (its future never became ready) or destroyed half moved (a crash).
  int hits = 0;
  for (int n = 1; n <= 8; ++n) {
    threadpool pool(2);
    std::atomic<int> ran{0};
    std::atomic<int> posted{0};
    pool.execute([&] { pool.execute(posts_when_moved(&pool, &ran, &posted, n)); });
    CHECK(pool.wait_idle_for(10s));
    INFO("posting on move " << n);
    CHECK(ran.load() == 1 + posted.load());
    hits += posted.load();
  }
  CHECK(hits >= 3); // moves into the task, into the slot and out of it, at least
}

namespace {
threadpool* tls_pool = nullptr;
std::atomic<int> tls_ran{0};
std::atomic<int> tls_posted{0};
struct posts_at_thread_exit {
  bool armed = false;
  ~posts_at_thread_exit() {
    if (armed) {
      tls_pool->execute([] { tls_ran.fetch_add(1); });
      tls_posted.fetch_add(1);
    }
  }
};
thread_local posts_at_thread_exit at_exit;
} // namespace

TEST_CASE("a worker's thread_local destructor may post to the pool", "[threadpool]") {
  // A retired worker's thread still counted as a worker of the pool while its thread-locals
  // were destroyed: their posts went to its dead local queue and never ran.
  tls_ran = 0;
  tls_posted = 0;
  threadpool pool(2);
  tls_pool = &pool;
  for (int i = 0; i < 20; ++i) {
    pool.execute([] {
      at_exit.armed = true;
      std::this_thread::sleep_for(1ms);
    });
  }
  pool.wait_idle();
  pool.configurepool(0); // both workers retire; their threads exit
  await_or_abort([] { return tls_posted.load() == 2; }, "two worker threads exiting");
  pool.configurepool(1);
  const bool idle = pool.wait_idle_for(5s);
  CHECK(idle);
  CHECK(tls_ran.load() == 2);
  if (!idle) {
    std::fprintf(stderr, "FAILED: tasks posted at thread exit never ran\n");
    std::abort(); // the destructor would wait for them for ever
  }
}

TEST_CASE("a paused pool's destructor runs a child its blocked parent waits for", "[threadpool]") {
  // Paused with a parent blocked on its next-slot child, the destructor ran only the injection
  // queue: it waited for the parent, which waited for the child, for good.
  for (int rep = 0; rep < 5; ++rep) {
    std::atomic<bool> child_ran{false};
    finishes_or_abort(
        [&] {
          threadpool pool(2);
          std::atomic<bool> in{false};
          pool.execute([&] {
            in = true;
            std::this_thread::sleep_for(20ms); // the pool is paused meanwhile
            pool.post([&] { child_ran = true; }).get();
          });
          while (!in.load()) {
            std::this_thread::yield();
          }
          pool.configurepool(0);
        },
        "the destructor of a paused pool with a blocked parent");
    CHECK(child_ran.load());
  }
}

namespace {

// A copy-only capture (rule of three, no move constructor) whose destructor posts a task, live
// object or moved-from copy alike: a move of the task destroys the source copy, and the pool
// used to move tasks under its own locks, so that post deadlocked on the lock it held.
threadpool* notify_pool = nullptr;
std::atomic<int> notified{0};
struct notify_on_destroy {
  notify_on_destroy() = default;
  notify_on_destroy(const notify_on_destroy&) = default; // noexcept: it used to be stored inline
  notify_on_destroy& operator=(const notify_on_destroy&) = default;
  ~notify_on_destroy() {
    notify_pool->execute([] { notified.fetch_add(1); });
  }
};

} // namespace

TEST_CASE("a capture whose destructor posts, moved-from copies included, deadlocks nothing",
          "[threadpool]") {
  for (int mode = 0; mode < 3; ++mode) {
    INFO("mode " << mode);
    finishes_or_abort(
        [&] {
          threadpool pool(2);
          notify_pool = &pool;
          notify_on_destroy n;
          if (mode == 0) {
            pool.execute([n] {}); // from outside: the injection queue
          } else if (mode == 1) {
            pool.post([] {
                  notify_on_destroy m;
                  notify_pool->execute([] {});  // the first post: the next slot
                  notify_pool->execute([m] {}); // the second: the worker's local queue
                })
                .get();
          } else {
            pool.post([n](int x) { return x; }, 1).get(); // a post's bound call
          }
          pool.wait_idle();
        },
        "a pool whose task captures post when destroyed");
  }
}

TEST_CASE("post(f).get() returns after f's copies are destroyed, as std::async's does",
          "[threadpool]") {
  // std::async's thread completes (its copies of f and of the arguments destroyed) before
  // get() returns; the pool used to make the result ready first and destroy the captures
  // afterwards, so a capture referring to the caller's stack outlived it.
  struct slow_to_die {
    std::atomic<int>* dead;
    bool live = true;
    explicit slow_to_die(std::atomic<int>* d) : dead(d) {}
    slow_to_die(slow_to_die&& o) noexcept : dead(o.dead) { o.live = false; }
    slow_to_die(const slow_to_die& o) : dead(o.dead) {}
    ~slow_to_die() {
      if (live) {
        std::this_thread::sleep_for(20ms);
        dead->fetch_add(1);
      }
    }
  };
  threadpool pool(2);
  for (int rep = 0; rep < 3; ++rep) {
    std::atomic<int> dead{0};
    slow_to_die arg(&dead);
    slow_to_die capture(&dead);
    const int v =
        pool.post([c = std::move(capture)](const slow_to_die&) { return 5; }, std::move(arg)).get();
    CHECK(v == 5);
    CHECK(dead.load() == 2); // the lambda's copy and the argument's copy, both gone
    std::atomic<int> thrown_dead{0};
    slow_to_die c2(&thrown_dead);
    auto f = pool.post([c = std::move(c2)]() -> int { throw std::runtime_error("x"); });
    CHECK_THROWS_AS(f.get(), std::runtime_error);
    CHECK(thrown_dead.load() == 1);
  }
}

TEST_CASE("wait_idle_until takes any time point, from min() to max(), of any clock",
          "[threadpool]") {
  // until - Clock::now() overflowed in the common unit: max() of a coarse time point gave up
  // at once, and min() waited for as long as the pool was busy.
  threadpool pool(1);
  std::atomic<bool> release{false};
  pool.execute([&] {
    while (!release.load()) {
      std::this_thread::sleep_for(1ms);
    }
  });
  std::thread releaser([&] {
    std::this_thread::sleep_for(1s);
    release = true;
  });
  const auto t0 = std::chrono::steady_clock::now();
  CHECK_FALSE(pool.wait_idle_until(std::chrono::steady_clock::time_point::min()));
  CHECK_FALSE(pool.wait_idle_until(std::chrono::system_clock::time_point::min()));
  CHECK_FALSE(pool.wait_idle_until(
      std::chrono::time_point<std::chrono::steady_clock, std::chrono::hours>::min()));
  CHECK(std::chrono::steady_clock::now() - t0 < 500ms); // looked, did not wait
  CHECK(pool.wait_idle_until(
      std::chrono::time_point<std::chrono::steady_clock, std::chrono::hours>::max()));
  releaser.join();
  pool.execute([] { std::this_thread::sleep_for(30ms); });
  CHECK(pool.wait_idle_until(
      std::chrono::time_point<std::chrono::system_clock, std::chrono::seconds>::max()));
  pool.execute([] { std::this_thread::sleep_for(30ms); });
  CHECK(pool.wait_idle_until(std::chrono::system_clock::time_point::max()));
  CHECK(pool.wait_idle_until(std::chrono::steady_clock::now() + 10s));
}

TEST_CASE("a task that a paused pool's destructor runs is a task of the pool", "[threadpool]") {
  // The destructor ran such tasks as a stranger: wait_idle() from one of them did not throw
  // std::logic_error, it waited for itself for good.
  std::future<void> waited;
  finishes_or_abort(
      [&] {
        threadpool pool(0);
        waited = pool.post([&pool] { pool.wait_idle(); });
      },
      "the destructor of a paused pool");
  CHECK_THROWS_AS(waited.get(), std::logic_error);
}

namespace {
threadpool* resize_pool = nullptr;
std::atomic<int> resize_posts{0};
std::atomic<int> resizes_entered{0};
std::atomic<int> resizes_returned{0};
struct resizes_at_thread_exit {
  int mode = 0; // 1: post a task that grows the pool; 2: shrink the pool directly
  ~resizes_at_thread_exit() {
    if (mode == 1) {
      resize_posts.fetch_add(1);
      resize_pool->execute([] { resize_pool->configurepool(2); });
    } else if (mode == 2) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50)); // both retirees are exiting
      resizes_entered.fetch_add(1);
      resize_pool->configurepool(0);
      resizes_returned.fetch_add(1);
    }
  }
};
thread_local resizes_at_thread_exit resize_at_exit;
} // namespace

TEST_CASE("the destructor joins workers that tasks start while it ends", "[threadpool]") {
  // A worker's thread_local destructor posted a task that grew the pool after the destructor
  // had joined every thread; the new workers were never joined (std::terminate).
  for (int rep = 0; rep < 3; ++rep) {
    resize_posts = 0;
    finishes_or_abort(
        [&] {
          threadpool pool(1);
          resize_pool = &pool;
          pool.post([] { resize_at_exit.mode = 1; }).get();
        },
        "a destructor whose workers grow the pool");
    CHECK(resize_posts.load() >= 1);
  }
}

TEST_CASE("two retiring workers that resize the pool at thread exit never join each other",
          "[threadpool]") {
  // Retirees counted as finished before their thread_local destructors ran; two such
  // destructors calling configurepool joined each other for good (and the destructor of the
  // pool returned without having joined them).
  for (int rep = 0; rep < 3; ++rep) {
    resizes_entered = 0;
    resizes_returned = 0;
    {
      threadpool pool(2);
      resize_pool = &pool;
      std::atomic<int> armed{0};
      for (int k = 0; k < 2; ++k) {
        pool.execute([&] {
          resize_at_exit.mode = 2;
          armed.fetch_add(1);
          while (armed.load() < 2) {
            std::this_thread::yield(); // one task on each worker
          }
        });
      }
      pool.wait_idle();
      pool.configurepool(0); // both retire; exiting, each calls configurepool
      await_or_abort([] { return resizes_entered.load() == 2; }, "two retirees exiting");
    }
    await_or_abort([] { return resizes_returned.load() == 2; },
                   "two configurepool calls from exiting retirees");
  }
}

TEST_CASE("replacing the exception handler destroys the old one outside the pool's lock",
          "[threadpool]") {
  std::atomic<int> ran{0};
  finishes_or_abort(
      [&] {
        threadpool pool(1);
        pool.set_exception_handler(
            [c = async_test::posts_when_dropped<threadpool>(&pool, &ran)](std::exception_ptr) {});
        pool.set_exception_handler(nullptr); // drops the first handler and its capture
        pool.wait_idle();
      },
      "replacing a handler whose capture posts");
  CHECK(ran.load() == 1);
}

namespace {

// Counts its lives; a live one whose destructor runs off the calling thread sleeps first, so
// that a destruction after the future is ready is late enough to be seen.
std::thread::id caller_thread;
struct counted_result {
  static std::atomic<int>& alive() {
    static std::atomic<int> n{0};
    return n;
  }
  counted_result() { alive().fetch_add(1); }
  counted_result(const counted_result&) { alive().fetch_add(1); } // copy-only (C++98 style)
  counted_result& operator=(const counted_result&) = default;
  ~counted_result() {
    if (std::this_thread::get_id() != caller_thread) {
      std::this_thread::sleep_for(2ms);
    }
    alive().fetch_sub(1);
  }
};

struct counted_error {
  static std::atomic<int>& alive() {
    static std::atomic<int> n{0};
    return n;
  }
  counted_error() { alive().fetch_add(1); }
  counted_error(const counted_error&) { alive().fetch_add(1); }
  ~counted_error() { alive().fetch_sub(1); }
};

} // namespace

TEST_CASE("post(f).get(): no copy of the result or the exception is left on the worker",
          "[threadpool]") {
  // The call kept its own copy of the result (set_value from a local) and set the exception
  // from inside its catch block: both were destroyed on the worker after the future was ready,
  // so after get() the caller could see them die (or have freed what they refer to).
  caller_thread = std::this_thread::get_id();
  threadpool pool(2);
  int late_results = 0;
  for (int k = 0; k < 20; ++k) {
    {
      std::future<counted_result> f = pool.post([] { return counted_result(); });
      const counted_result r = f.get();
      // `r` here, and at most the copy in the shared state, which the worker may still hold
      // (a std::promise's state is released by whichever side lets go last).
      late_results += counted_result::alive().load() > 2 ? 1 : 0;
    }
    std::this_thread::sleep_for(1ms);
    while (counted_result::alive().load() != 0) { // the shared state, released late
      std::this_thread::yield();
    }
  }
  CHECK(late_results == 0);
  // The exception object lives in the shared state alone: once the caller has handled it and
  // dropped the future, what is left may be released by the worker (as with std::promise).
  for (int k = 0; k < 200; ++k) {
    while (counted_error::alive().load() != 0) { // the previous round's state, released late
      std::this_thread::yield();
    }
    auto f = pool.post([] { throw counted_error(); });
    try {
      f.get();
    } catch (const counted_error&) {
      CHECK(counted_error::alive().load() == 1);
    }
  }
}

namespace {
threadpool* exiting_pool = nullptr;
struct waits_at_thread_exit {
  int mode = 0; // 1: post(f).get(); 2: grow, post a task that shrinks and waits for a child
  ~waits_at_thread_exit() {
    if (mode == 1) {
      exiting_pool->post([] {}).get();
    } else if (mode == 2) {
      // Grow first, so that a worker runs the parent; the parent then shrinks the pool to 0
      // while it runs, and waits for its child, which only the destructor can run.
      exiting_pool->configurepool(1);
      auto parent = exiting_pool->post([] {
        exiting_pool->configurepool(0);
        exiting_pool->post([] {}).get();
      });
      parent.get();
    }
  }
};
thread_local waits_at_thread_exit wait_at_exit;
} // namespace

TEST_CASE("the destructor runs what exiting workers' thread_local destructors wait for",
          "[threadpool]") {
  // The destructor retired the workers and blocked in join(); a worker's thread_local
  // destructor that waited for a task of the pool waited for good: nobody ran the queue.
  for (int mode = 1; mode <= 2; ++mode) {
    INFO("mode " << mode);
    finishes_or_abort(
        [&] {
          threadpool pool(2);
          exiting_pool = &pool;
          pool.post([mode] { wait_at_exit.mode = mode; }).get();
        },
        "a destructor whose exiting worker waits");
  }
}

TEST_CASE("the exception handler is destroyed while the pool still runs and joins",
          "[threadpool]") {
  // The handler was destroyed with the pool's members, after the last join: what its captures'
  // destructors posted was lost (or broke its future), and a thread they started stayed
  // unjoined (std::terminate). Then it was destroyed after the workers had left: a capture
  // that waited for what it posted (mode 3) waited for ever (helper-39).
  for (int mode = 0; mode < 4; ++mode) {
    INFO("mode " << mode);
    std::atomic<int> ran{0};
    finishes_or_abort(
        [&] {
          threadpool pool(1);
          struct on_drop {
            threadpool* pool;
            std::atomic<int>* ran;
            int mode;
            bool live = true;
            on_drop(threadpool* p, std::atomic<int>* r, int m) : pool(p), ran(r), mode(m) {}
            on_drop(const on_drop& o) : pool(o.pool), ran(o.ran), mode(o.mode) {}
            on_drop(on_drop&& o) noexcept : pool(o.pool), ran(o.ran), mode(o.mode) {
              o.live = false;
            }
            ~on_drop() {
              if (!live) {
                return;
              }
              if (mode == 0) {
                pool->execute([r = ran] { r->fetch_add(1); });
              } else if (mode == 1) {
                pool->configurepool(2);
                pool->execute([r = ran] { r->fetch_add(1); });
              } else if (mode == 2) {
                pool->post([r = ran] { r->fetch_add(1); });
              } else {
                pool->post([r = ran] { r->fetch_add(1); }).get();
              }
            }
          };
          pool.set_exception_handler([c = on_drop(&pool, &ran, mode)](std::exception_ptr) {});
        },
        "a destructor whose handler posts when dropped");
    CHECK(ran.load() == 1);
  }
}

namespace {

// A worker's thread_local whose destructor, armed by a task, gives the pool a task that throws.
threadpool* exiting_pool_with_handler = nullptr;
struct throws_at_exit {
  bool armed = false;
  ~throws_at_exit() {
    if (armed) {
      exiting_pool_with_handler->execute([] { throw std::runtime_error("posted at exit"); });
    }
  }
};
thread_local throws_at_exit throws_at_exit_of_this_thread;

} // namespace

TEST_CASE("tasks that workers' thread_local destructors post still reach the exception handler",
          "[threadpool]") {
  // A destructor that dropped the handler before the workers left sent them to the default
  // handler, std::terminate (helper-40, reviewing the previous version of this order).
  std::atomic<int> caught{0};
  finishes_or_abort(
      [&] {
        threadpool pool(1);
        exiting_pool_with_handler = &pool;
        pool.set_exception_handler([&caught](std::exception_ptr) { caught.fetch_add(1); });
        pool.post([] { throws_at_exit_of_this_thread.armed = true; }).get();
      },
      "a destructor whose retiring worker posts a throwing task");
  CHECK(caught.load() == 1);
}

TEST_CASE("wait_idle from a task of this pool that another pool's destructor interrupts throws",
          "[threadpool]") {
  // A's task destroys a paused pool B, whose destructor runs B's task on A's worker; that task
  // called A.wait_idle(), which saw B as the current pool and waited for itself for good.
  threadpool a(2);
  std::atomic<bool> threw{false};
  std::atomic<bool> done{false};
  a.execute([&] {
    {
      threadpool b(0);
      b.execute([&] {
        try {
          static_cast<void>(a.wait_idle_for(std::chrono::seconds(2))); // throws: a task of A
        } catch (const std::logic_error&) {
          threw = true;
        }
      });
    }
    done = true;
  });
  await_or_abort([&] { return done.load(); }, "a task of A waiting for A inside B's destructor");
  CHECK(threw.load());
}

TEST_CASE("a callable with a data member named like the quiet-move trait compiles",
          "[threadpool]") {
  struct odd {
    bool moved_from_is_quiet = false; // a user's name, not the library's trait
    bool async_moved_from_is_quiet = false;
    int operator()() const { return 3; }
  };
  threadpool pool(1);
  CHECK(pool.post(odd{}).get() == 3);
}

#if defined(__unix__)
TEST_CASE("destroying the pool from one of its own tasks ends the program with a message",
          "[threadpool]") {
  // It used to hang for good: the destructor waited for the task that was running it.
  const async_test::child_outcome child = async_test::run_in_child([] {
    auto* pool = new threadpool(1);
    pool->execute([pool] { delete pool; });
    std::this_thread::sleep_for(120s); // outlasts the limit: a hang is killed there
  });
  INFO("the child wrote: " << child.output);
  CHECK(child.aborted());
  CHECK(child.output.find("destroyed from one of its own tasks") != std::string::npos);
}
#endif

namespace {

// A callable, and an argument, aligned beyond what operator new guarantees: the pool keeps them
// on the heap, where before C++17 a new-expression ignores their alignment (helper-37 found
// 3,978 of 4,000 such callables misplaced in a C++14 build).
struct alignas(64) wide_callable {
  std::atomic<int>* misplaced;
  int operator()() const {
    if (reinterpret_cast<std::uintptr_t>(this) % 64 != 0) {
      misplaced->fetch_add(1);
    }
    return 7;
  }
};

struct alignas(64) wide_argument {
  int value = 5;
};

// An over-aligned callable whose move throws while armed, counting its lives: post() and
// execute() copy it (that works), then move the copy into the task's aligned heap block.
struct alignas(64) wide_throwing_move {
  static std::atomic<int> alive;
  bool armed = false;
  wide_throwing_move() { ++alive; }
  wide_throwing_move(const wide_throwing_move& other) : armed(other.armed) { ++alive; }
  wide_throwing_move(wide_throwing_move&& other) : armed(other.armed) {
    if (armed) {
      throw std::runtime_error("move");
    }
    ++alive;
  }
  ~wide_throwing_move() { --alive; }
  int operator()() const { return 1; }
};
std::atomic<int> wide_throwing_move::alive{0};

} // namespace

TEST_CASE("callables and arguments aligned beyond operator new's guarantee are placed aligned",
          "[threadpool]") {
  threadpool pool(2);
  std::atomic<int> misplaced{0};
  std::vector<std::future<int>> results;
  for (int i = 0; i < 200; ++i) {
    results.push_back(pool.post(wide_callable{&misplaced}));
    results.push_back(pool.post(
        [&misplaced](const wide_argument& a) {
          if (reinterpret_cast<std::uintptr_t>(&a) % 64 != 0) {
            misplaced.fetch_add(1);
          }
          return a.value;
        },
        wide_argument{}));
    pool.execute(wide_callable{&misplaced});
  }
  int sum = 0;
  for (auto& f : results) {
    sum += f.get();
  }
  pool.wait_idle();
  CHECK(sum == 200 * (7 + 5));
  CHECK(misplaced.load() == 0);

  // Its construction on the aligned heap throws: post and execute throw, nothing is queued,
  // and every copy made is destroyed (ASan: the aligned block is freed).
  {
    wide_throwing_move f;
    f.armed = true;
    CHECK_THROWS_AS(pool.post(f), std::runtime_error);
    CHECK_THROWS_AS(pool.execute(f), std::runtime_error);
    f.armed = false;
    CHECK(pool.post(f).get() == 1);
  }
  pool.wait_idle();
  CHECK(wide_throwing_move::alive.load() == 0);
}
