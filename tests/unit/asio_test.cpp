// SPDX-License-Identifier: BSL-1.0
// async/asio.h: the pool as an Asio execution context. Built against Boost.Asio and, with
// ASYNC_ASIO_STANDALONE, against standalone Asio; as C++20 also co_spawn.
#include <async/asio.h>

#if defined(ASYNC_ASIO_STANDALONE)
#include <asio.hpp>
namespace net = ::asio;
#else
#include <boost/asio.hpp>
namespace net = ::boost::asio;
#endif

#include "async_catch.h"
#include "test_support.h"

#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

using async::asio_context;
using async::threadpool;
using namespace std::chrono_literals;

namespace {

// Waits (bounded) until pred() holds; false on timeout.
template <typename Pred>
bool eventually(Pred pred, std::chrono::seconds limit = std::chrono::seconds(20)) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (!pred()) {
    if (std::chrono::steady_clock::now() > end) {
      return false;
    }
    std::this_thread::sleep_for(1ms);
  }
  return true;
}

} // namespace

TEST_CASE("the executor satisfies Asio's executor requirements", "[asio]") {
  threadpool pool(2);
  asio_context context(pool);
  using executor = asio_context::executor_type;
  STATIC_REQUIRE(net::execution::is_executor<executor>::value);
  STATIC_REQUIRE(net::can_require<executor, net::execution::blocking_t::never_t>::value);
  STATIC_REQUIRE(net::can_query<executor, net::execution::context_t>::value);
  executor ex = context.get_executor();
  CHECK(&net::query(ex, net::execution::context) == &context);
  CHECK(net::query(ex, net::execution::blocking) == net::execution::blocking.possibly);
  const auto never = net::require(ex, net::execution::blocking.never);
  CHECK(net::query(never, net::execution::blocking) == net::execution::blocking.never);
  CHECK(never != ex);
  CHECK(net::require(never, net::execution::blocking.possibly) == ex);
  const auto cont = net::prefer(ex, net::execution::relationship.continuation);
  CHECK(net::query(cont, net::execution::relationship) ==
        net::execution::relationship.continuation);
  CHECK(net::query(ex, net::execution::relationship) == net::execution::relationship.fork);
  CHECK(net::query(ex, net::execution::outstanding_work) ==
        net::execution::outstanding_work.untracked);
  const auto tracked = net::require(ex, net::execution::outstanding_work.tracked);
  CHECK(net::query(tracked, net::execution::outstanding_work) ==
        net::execution::outstanding_work.tracked);
  asio_context other(pool); // same properties, another context: not equal
  CHECK(other.get_executor() != ex);
  executor copy = never;
  const executor& same = copy;
  copy = same; // self-assignment keeps it
  CHECK(copy == never);
  net::any_io_executor any = ex; // the type-erased executor Asio's own I/O objects use
  CHECK(&net::query(any, net::execution::context) == &context);
}

#if !defined(BOOST_ASIO_NO_TS_EXECUTORS) && !defined(ASIO_NO_TS_EXECUTORS)
TEST_CASE("the executor also meets the Networking TS's requirements (net::executor)", "[asio]") {
  // Asio's older executor model (the polymorphic net::executor; the default of every I/O
  // object in a program built with BOOST_ASIO_USE_TS_EXECUTOR_AS_DEFAULT): it did not compile
  // (no on_work_started, on_work_finished, dispatch, post, defer; helper-38).
  threadpool pool(2);
  asio_context context(pool);
  net::executor ex = context.get_executor();
  CHECK(&ex.context() == &context);
  {
    auto guard = net::make_work_guard(ex); // on_work_started
    CHECK(context.outstanding_work() == 1);
  } // on_work_finished
  CHECK(context.outstanding_work() == 0);
  std::atomic<int> ran{0};
  std::promise<bool> inline_run;
  net::post(ex, [&] {
    ran.fetch_add(1);
    bool inside = false;
    net::dispatch(ex, [&] { inside = true; }); // on the pool: runs before dispatch returns
    inline_run.set_value(inside);
  });
  net::defer(ex, [&] { ran.fetch_add(1); });
  auto strand = net::make_strand(ex);
  for (int i = 0; i < 100; ++i) {
    net::post(strand, [&] { ran.fetch_add(1); });
  }
  CHECK(inline_run.get_future().get());
  context.join(); // also waits for the work that the strand tracks while it has handlers
  CHECK(context.outstanding_work() == 0);
  CHECK(ran.load() == 102);
}
#endif

TEST_CASE("post and defer queue on the pool; dispatch runs at once only on the pool", "[asio]") {
  threadpool pool(1); // one worker: what a handler posts cannot run before it returns
  asio_context context(pool);
  auto ex = context.get_executor();
  const std::thread::id caller = std::this_thread::get_id();

  std::promise<bool> on_pool;
  net::post(ex, [&] { on_pool.set_value(pool.running_in_this_thread()); });
  CHECK(on_pool.get_future().get());

  // From outside the pool dispatch cannot run inline: it queues.
  std::promise<std::thread::id> where;
  net::dispatch(ex, [&] { where.set_value(std::this_thread::get_id()); });
  CHECK(where.get_future().get() != caller);

  // From a task of the pool: dispatch runs before it returns, post and defer after.
  std::promise<void> checked;
  std::atomic<int> later{0};
  net::post(ex, [&] {
    bool inline_ran = false;
    net::dispatch(ex, [&] { inline_ran = true; });
    bool posted_ran = false;
    net::post(ex, [&later] { later.fetch_add(1); });
    net::defer(ex, [&later] { later.fetch_add(1); });
    posted_ran = later.load() != 0;
    CHECK(inline_ran);
    CHECK_FALSE(posted_ran);
    checked.set_value();
  });
  checked.get_future().get();
  context.join();
  CHECK(later.load() == 2);
}

TEST_CASE("strand handlers never overlap and keep each poster's order", "[asio]") {
  threadpool pool(4);
  asio_context context(pool);
  auto ex = context.get_executor();
  constexpr int strands = 8;
  constexpr int posters = 4;
  constexpr int per_poster = 2000;
  struct strand_state {
    net::strand<asio_context::executor_type> strand;
    std::atomic<int> inside{0};
    int overlaps = 0;                  // written only inside the strand: TSan checks it
    std::vector<int> last_of_poster{}; // the last sequence number seen from each poster
    int order_violations = 0;
    long runs = 0;
    explicit strand_state(asio_context::executor_type e)
        : strand(net::make_strand(e)), last_of_poster(posters, -1) {}
  };
  std::vector<std::unique_ptr<strand_state>> states;
  for (int i = 0; i < strands; ++i) {
    states.emplace_back(new strand_state(ex));
  }
  std::vector<std::thread> threads;
  for (int p = 0; p < posters; ++p) {
    threads.emplace_back([&, p] {
      for (int k = 0; k < per_poster; ++k) {
        strand_state& s = *states[static_cast<std::size_t>((k + p) % strands)];
        net::post(s.strand, [&s, p, k] {
          if (s.inside.fetch_add(1) != 0) {
            ++s.overlaps;
          }
          if (k <= s.last_of_poster[static_cast<std::size_t>(p)]) {
            ++s.order_violations;
          }
          s.last_of_poster[static_cast<std::size_t>(p)] = k;
          ++s.runs;
          std::this_thread::yield(); // widen the window for an overlap
          s.inside.fetch_sub(1);
        });
      }
    });
  }
  for (auto& t : threads) {
    t.join();
  }
  context.join();
  long runs = 0;
  for (auto& s : states) {
    CHECK(s->overlaps == 0);
    CHECK(s->order_violations == 0);
    runs += s->runs;
  }
  CHECK(runs == static_cast<long>(posters) * per_poster);
}

TEST_CASE("join waits for a function dispatched inline from another context's handler", "[asio]") {
  threadpool pool(2);
  asio_context a(pool);
  std::unique_ptr<asio_context> b(new asio_context(pool));
  std::atomic<bool> started{false};
  std::atomic<bool> finished{false};
  net::post(a.get_executor(), [&] {
    // A task of the pool, not of b: b's dispatch runs inline here, and b must count it.
    net::dispatch(b->get_executor(), [&] {
      started = true;
      std::this_thread::sleep_for(50ms);
      finished = true;
    });
  });
  CHECK(eventually([&] { return started.load(); }));
  b->join();
  CHECK(finished.load());
  b.reset();
  a.join();
}

TEST_CASE("a handler posted to a strand from inside it runs after it, on the strand", "[asio]") {
  threadpool pool(3);
  asio_context context(pool);
  auto strand = net::make_strand(context.get_executor());
  std::vector<int> order; // only touched on the strand
  std::promise<void> done;
  net::post(strand, [&] {
    order.push_back(1);
    net::post(strand, [&] {
      order.push_back(3);
      done.set_value();
    });
    net::dispatch(strand, [&] { order.push_back(2); }); // inside the strand: at once
  });
  done.get_future().get();
  context.join();
  CHECK(order == std::vector<int>{1, 2, 3});
}

TEST_CASE("use_future and bind_executor", "[asio]") {
  threadpool pool(2);
  asio_context context(pool);
  auto ex = context.get_executor();

  std::future<int> answer = net::post(ex, net::use_future([] { return 42; }));
  CHECK(answer.get() == 42);
  std::future<int> failed =
      net::post(ex, net::use_future([]() -> int { throw std::runtime_error("no"); }));
  CHECK_THROWS_AS(failed.get(), std::runtime_error);

  // A timer of an io_context completes on the pool through bind_executor.
  net::io_context io;
  net::steady_timer timer(io, 1ms);
  std::promise<bool> on_pool;
  timer.async_wait(net::bind_executor(
      ex, [&](const auto& /*error*/) { on_pool.set_value(pool.running_in_this_thread()); }));
  io.run();
  CHECK(on_pool.get_future().get());
  context.join();
}

TEST_CASE("outstanding work: join waits for every work guard", "[asio]") {
  using executor = asio_context::executor_type;
  threadpool pool(1);
  asio_context context(pool);
  auto guard = net::make_work_guard(context.get_executor());
  CHECK(context.outstanding_work() == 1);
  std::unique_ptr<executor> tracked(
      new executor(net::prefer(context.get_executor(), net::execution::outstanding_work.tracked)));
  CHECK(context.outstanding_work() == 2);
  std::unique_ptr<executor> copy(new executor(*tracked)); // a copy of a tracked one tracks too
  CHECK(context.outstanding_work() == 3);
  std::atomic<bool> joined{false};
  std::thread joiner([&] {
    context.join();
    joined = true;
  });
  std::this_thread::sleep_for(20ms);
  CHECK_FALSE(joined.load());
  guard.reset();
  std::this_thread::sleep_for(20ms);
  CHECK_FALSE(joined.load()); // `tracked` and `copy` still track
  CHECK(context.outstanding_work() == 2);
  {
    executor assigned = context.get_executor(); // untracked
    assigned = *tracked;                        // copy-assigned from a tracked one: tracks
    CHECK(context.outstanding_work() == 3);
    executor& alias = assigned;
    assigned = std::move(alias); // moved onto itself: keeps its count
    CHECK(context.outstanding_work() == 3);
    assigned = context.get_executor(); // an untracked one replaces it: the count is given back
    CHECK(context.outstanding_work() == 2);
  }
  {
    executor moved = std::move(*copy); // the count moves with it
    CHECK(context.outstanding_work() == 2);
    *copy = net::require(moved, net::execution::outstanding_work.untracked);
    CHECK(context.outstanding_work() == 2); // `moved` counts, `copy` no longer
  }
  CHECK(context.outstanding_work() == 1);
  std::this_thread::sleep_for(20ms);
  CHECK_FALSE(joined.load());
  tracked.reset();
  CHECK(eventually([&] { return joined.load(); }));
  joiner.join();
  CHECK(context.outstanding_work() == 0);
}

TEST_CASE("an exception from a handler reaches the pool's handler; the rest run", "[asio]") {
  threadpool pool(2);
  std::atomic<int> caught{0};
  pool.set_exception_handler([&](std::exception_ptr) { caught.fetch_add(1); });
  asio_context context(pool);
  auto ex = context.get_executor();
  auto strand = net::make_strand(ex);
  std::atomic<int> ran{0};
  for (int i = 0; i < 100; ++i) {
    net::post(ex, [&ran, i] {
      ran.fetch_add(1);
      if (i % 10 == 0) {
        throw std::runtime_error("handler");
      }
    });
  }
  net::post(strand, [] { throw std::runtime_error("strand handler"); });
  net::post(strand, [&ran] { ran.fetch_add(1); }); // the strand goes on
  context.join();
  CHECK(ran.load() == 101);
  CHECK(caught.load() == 11);
}

TEST_CASE("handlers that post handlers while the pool is resized, paused included", "[asio]") {
  threadpool pool(2);
  asio_context context(pool);
  auto ex = context.get_executor();
  auto strand = net::make_strand(ex);
  constexpr int roots = 2000;
  std::atomic<long> ran{0};
  long on_strand = 0; // strand only
  std::atomic<bool> stop{false};
  std::thread resizer([&] {
    std::size_t n = 0;
    while (!stop.load()) {
      pool.configurepool(n % 5); // 0 pauses the pool
      n = n * 7 + 3;
      std::this_thread::sleep_for(200us);
    }
    pool.configurepool(3);
  });
  for (int i = 0; i < roots; ++i) {
    net::post(ex, [&] {
      ran.fetch_add(1);
      net::post(ex, [&] { ran.fetch_add(1); });
      net::dispatch(ex, [&] { ran.fetch_add(1); });
      net::post(strand, [&] { ++on_strand; });
    });
  }
  CHECK(eventually([&] { return ran.load() == 3L * roots; }));
  stop = true;
  resizer.join();
  context.join();
  CHECK(ran.load() == 3L * roots);
  CHECK(on_strand == roots);
}

TEST_CASE("join waits for the handlers, strands' included", "[asio]") {
  threadpool pool(2);
  std::atomic<int> ran{0};
  {
    asio_context context(pool);
    auto strand = net::make_strand(context.get_executor());
    for (int i = 0; i < 50; ++i) {
      net::post(strand, [&ran] {
        std::this_thread::sleep_for(100us);
        ran.fetch_add(1);
      });
    }
    context.join(); // the destructor alone would stop the strand's queue where it is
  }
  CHECK(ran.load() == 50);
  CHECK_THROWS_AS(
      [&] {
        asio_context context(pool);
        std::promise<void> done;
        net::post(context.get_executor(), [&] {
          try {
            context.join();
          } catch (...) {
            done.set_exception(std::current_exception());
            return;
          }
          done.set_value();
        });
        done.get_future().get();
      }(),
      std::logic_error);
}

TEST_CASE("a pool task may destroy a context that has nothing left to wait for", "[asio]") {
  // The destructor ended the program whenever it ran on one of the pool's tasks, even for a
  // context never used, or joined, whose destruction waits for nothing (helper-39).
  threadpool pool(2);
  asio_context a(pool);
  auto unused = std::make_shared<asio_context>(pool);
  auto joined = std::make_shared<asio_context>(pool);
  std::atomic<int> ran{0};
  net::post(joined->get_executor(), [&ran] { ran.fetch_add(1); });
  joined->join();
  std::atomic<bool> go{false}; // set once the handler and the task hold the last references
  std::promise<void> done;
  net::post(a.get_executor(), [&go, unused]() mutable {
    while (!go.load()) {
      std::this_thread::yield();
    }
    unused.reset(); // in a handler of another context over the same pool
  });
  pool.execute([&go, &done, joined]() mutable {
    while (!go.load()) {
      std::this_thread::yield();
    }
    joined.reset(); // in a plain task of the pool
    done.set_value();
  });
  unused.reset();
  joined.reset();
  go.store(true);
  REQUIRE(done.get_future().wait_for(20s) == std::future_status::ready);
  a.join();
  CHECK(ran.load() == 1);
}

#if defined(__unix__)
TEST_CASE("destroying a context from one of its own functions ends the program", "[asio]") {
  // It would wait for that function, that is, for itself. (From a plain task of the pool, or
  // with work tracked, the destructor returns: "a plain pool task may destroy a context".)
  const async_test::child_outcome child = async_test::run_in_child([] {
    threadpool pool(2);
    auto context = std::make_shared<asio_context>(pool);
    std::atomic<bool> go{false};
    // The handler holds the last reference once `go` is set.
    net::post(context->get_executor(), [&go, c = context]() mutable {
      while (!go.load()) {
        std::this_thread::yield();
      }
      c.reset();
    });
    context.reset();
    go.store(true);
    std::this_thread::sleep_for(120s); // outlasts the limit: a hang is killed there
  });
  INFO("the child wrote: " << child.output);
  CHECK(child.aborted());
  CHECK(child.output.find("async::asio_context: destroyed from one of its own functions") !=
        std::string::npos);
}
#endif

// cancel_pending() discards the pool's own queued tasks but leaves the context's functions
// queued: a strand marks itself busy when it submits its invoker, and only the invoker's run
// clears the mark, so a strand whose invoker was discarded would never run a handler again.
TEST_CASE("cancel_pending leaves the context's functions queued; strands keep running", "[asio]") {
  // Had the strand stayed locked, its handler that tracks work would make join() and the
  // context's destructor wait forever: this ends the binary with a message instead.
  async_test::scoped_watchdog watchdog(std::chrono::milliseconds(60000),
                                       "the cancel_pending test of asio_context");
  threadpool pool(0); // paused: everything below stays queued until the resize
  asio_context context(pool);
  auto ex = context.get_executor();
  auto strand = net::make_strand(ex);
  std::vector<int> order; // strand only, then read after join()
  std::atomic<int> plain{0};
  std::atomic<int> pool_tasks{0};
  pool.execute([&] { pool_tasks.fetch_add(1); });
  net::post(strand, [&] { order.push_back(0); });
  net::post(ex, [&] { plain.fetch_add(1); });
  std::future<int> answer = net::post(ex, net::use_future([] { return 42; }));
  pool.execute([&] { pool_tasks.fetch_add(1); });
  CHECK(pool.cancel_pending() == 2); // the two execute() tasks, nothing of the context's
  for (int i = 1; i <= 10; ++i) {
    net::post(strand, [&order, i] { order.push_back(i); });
  }
  // A strand handler that tracks work (see the watchdog above).
  net::post(strand, [&order, guard = net::make_work_guard(ex)] { order.push_back(11); });
  pool.configurepool(2);
  // Again while the strand runs: whatever is queued of the context's at that moment stays.
  for (int i = 12; i <= 200; ++i) {
    net::post(strand, [&order, i] { order.push_back(i); });
    if (i % 50 == 0) {
      pool.cancel_pending();
    }
  }
  REQUIRE(answer.wait_for(20s) == std::future_status::ready);
  CHECK(answer.get() == 42);
  context.join();
  CHECK(pool_tasks.load() == 0);
  CHECK(plain.load() == 1);
  REQUIRE(order.size() == 201u);
  for (int i = 0; i <= 200; ++i) {
    CHECK(order[static_cast<std::size_t>(i)] == i);
  }
}

namespace {

using strand_type = net::strand<asio_context::executor_type>;

// A handler that records its number on its strand and posts the next one to the same strand
// from inside (so it goes to the running worker's own queue).
struct strand_link {
  strand_type* strand;
  std::vector<int>* order;
  int i;
  int last;
  void operator()() const {
    order->push_back(i);
    if (i < last) {
      net::post(*strand, strand_link{strand, order, i + 1, last});
    }
  }
};

// The same without a strand: counts, and posts the next to the context's executor.
struct plain_link {
  asio_context::executor_type ex;
  std::atomic<int>* count;
  int i;
  int last;
  void operator()() const {
    count->fetch_add(1);
    if (i < last) {
      net::post(ex, plain_link{ex, count, i + 1, last});
    }
  }
};

} // namespace

TEST_CASE("handlers that post handlers survive cancel_pending and resizing storms", "[asio]") {
  // A function of the context's discarded by a cancel would stall its chain (or lock its
  // strand) for good: the watchdog ends the binary with a message instead.
  async_test::scoped_watchdog watchdog(std::chrono::milliseconds(120000),
                                       "the cancel and resize storm of asio_context");
  constexpr int chains = 3;
  const int last = static_cast<int>(async_test::scaled(10000, 1000));
  threadpool pool(2);
  asio_context context(pool);
  auto ex = context.get_executor();
  std::vector<strand_type> strands;
  std::vector<std::vector<int>> orders(chains); // each written by its strand only
  std::atomic<int> plain[chains];
  for (int c = 0; c < chains; ++c) {
    strands.push_back(net::make_strand(ex));
    plain[c].store(0);
  }
  for (int c = 0; c < chains; ++c) {
    net::post(strands[static_cast<std::size_t>(c)],
              strand_link{&strands[static_cast<std::size_t>(c)],
                          &orders[static_cast<std::size_t>(c)], 0, last});
    net::post(ex, plain_link{ex, &plain[c], 0, last});
  }
  std::atomic<bool> stop{false};
  std::atomic<std::size_t> executed{0};
  std::atomic<std::size_t> ran{0};
  std::atomic<std::size_t> cancelled{0};
  // Two resizers racing each other (0 pauses the pool), and a canceller that also queues
  // tasks of the pool's own, which it may discard.
  auto resize = [&](std::size_t salt) {
    for (std::size_t i = 0; !stop.load(); ++i) {
      pool.configurepool((i * 7 + salt) % 4);
      std::this_thread::sleep_for(std::chrono::microseconds(100 + (i * 37 + salt) % 300));
    }
  };
  std::thread resizer1(resize, 1);
  std::thread resizer2(resize, 2);
  std::thread canceller([&] {
    while (!stop.load()) {
      for (int k = 0; k < 4; ++k) {
        pool.execute([&ran] { ran.fetch_add(1); });
        executed.fetch_add(1);
      }
      cancelled.fetch_add(pool.cancel_pending());
      std::this_thread::yield();
    }
  });
  const bool done = eventually(
      [&] {
        for (int c = 0; c < chains; ++c) {
          if (plain[c].load() != last + 1) {
            return false;
          }
        }
        return true;
      },
      std::chrono::seconds(100));
  stop = true;
  resizer1.join();
  resizer2.join();
  canceller.join();
  pool.configurepool(2);
  context.join();
  CHECK(done);
  for (int c = 0; c < chains; ++c) {
    CHECK(plain[c].load() == last + 1);
    const auto& order = orders[static_cast<std::size_t>(c)];
    REQUIRE(order.size() == static_cast<std::size_t>(last) + 1);
    for (int i = 0; i <= last; ++i) {
      if (order[static_cast<std::size_t>(i)] != i) {
        FAIL("strand " << c << ": handler " << order[static_cast<std::size_t>(i)]
                       << " ran in place " << i);
      }
    }
  }
  CHECK(pool.wait_idle_for(std::chrono::seconds(20)));
  CHECK(ran.load() + cancelled.load() == executed.load());
}

#if defined(ASYNC_TEST_CO_SPAWN)
#if !defined(ASIO_HAS_CO_AWAIT) && !defined(BOOST_ASIO_HAS_CO_AWAIT)
#error "ASYNC_TEST_CO_SPAWN: this Asio and compiler have no co_await support"
#endif
namespace {
net::awaitable<int> add_on_pool(asio_context::executor_type ex, int a, int b) {
  // Hop onto the pool, then back on the coroutine's executor.
  co_await net::post(ex, net::use_awaitable);
  co_return a + b;
}
} // namespace

TEST_CASE("co_spawn runs a coroutine on the pool", "[asio]") {
  threadpool pool(2);
  asio_context context(pool);
  auto ex = context.get_executor();
  std::promise<int> result;
  net::co_spawn(
      ex,
      [&]() -> net::awaitable<void> {
        int sum = 0;
        for (int i = 0; i < 10; ++i) {
          sum += co_await add_on_pool(ex, i, 1);
        }
        result.set_value(pool.running_in_this_thread() ? sum : -1);
      },
      net::detached);
  CHECK(result.get_future().get() == 55);
  context.join();
}
#endif

namespace {

// A handler that yields the way Asio programs do, by posting itself again, until `stop`.
template <typename Executor>
struct yielding_handler {
  Executor ex;
  std::atomic<bool>* stop;
  std::atomic<long>* runs;
  void operator()() const {
    runs->fetch_add(1, std::memory_order_relaxed);
    if (!stop->load(std::memory_order_relaxed)) {
      net::post(ex, *this);
    }
  }
};

template <typename Executor>
yielding_handler<Executor> yielder(const Executor& ex, std::atomic<bool>& stop,
                                   std::atomic<long>& runs) {
  return yielding_handler<Executor>{ex, &stop, &runs};
}

// Posts f to ex from this (outside) thread and waits for it to run: false if it has not run
// within the time a starved handler is given.
template <typename Executor>
bool runs_in_time(const Executor& ex) {
  auto ran = std::make_shared<std::promise<void>>();
  auto done = ran->get_future();
  net::post(ex, [ran] { ran->set_value(); });
  return done.wait_for(20s) == std::future_status::ready;
}

} // namespace

TEST_CASE("handlers that yield with post do not keep an outside handler waiting",
          "[asio][fairness]") {
  for (int workers : {1, 2, 4}) {
    CAPTURE(workers);
    threadpool pool(workers);
    asio_context context(pool);
    auto ex = context.get_executor();
    std::atomic<bool> stop{false};
    std::atomic<long> runs{0};
    for (int i = 0; i < workers + 1; ++i) {
      net::post(ex, yielder(ex, stop, runs));
    }
    REQUIRE(eventually([&] { return runs.load() >= 2000; }));
    bool all_ran = true;
    for (int round = 0; round < 10 && all_ran; ++round) {
      all_ran = runs_in_time(ex);
    }
    stop = true;
    context.join();
    CHECK(all_ran);
  }
}

TEST_CASE("handlers that yield on strands do not keep other handlers or strands waiting",
          "[asio][fairness]") {
  for (int workers : {1, 2}) {
    CAPTURE(workers);
    threadpool pool(workers);
    asio_context context(pool);
    auto ex = context.get_executor();
    auto busy = net::make_strand(ex);
    auto other = net::make_strand(ex);
    std::atomic<bool> stop{false};
    std::atomic<long> runs{0};
    // Two yielders on one strand, one on the other: each strand always has a handler ready.
    net::post(busy, yielder(busy, stop, runs));
    net::post(busy, yielder(busy, stop, runs));
    net::post(other, yielder(other, stop, runs));
    REQUIRE(eventually([&] { return runs.load() >= 2000; }));
    bool all_ran = true;
    for (int round = 0; round < 10 && all_ran; ++round) {
      all_ran = runs_in_time(ex) && runs_in_time(busy) && runs_in_time(other) &&
                runs_in_time(net::make_strand(ex));
    }
    stop = true;
    context.join();
    CHECK(all_ran);
  }
}
