// SPDX-License-Identifier: BSL-1.0
// async::threadpool under a storm: tasks that post trees of tasks (with and without futures)
// and resize the pool from inside, an outside thread resizing between 0 and 4 workers, another
// cancelling what is queued and waiting for idleness with timeouts, and the pool destroyed in
// the middle of it all in every other round.
//
// Checked: no task runs twice; every task that did not run was reported by cancel_pending(),
// and none of those that carry async_keep_on_cancel (as async/asio.h's functions do);
// every post() future is ready in the end, with a value exactly when its task ran and
// broken_promise otherwise; nothing hangs (a watchdog ends the binary with a message).
//
// Tasks also wait on the futures of children they post: with short timeouts in the storm (the
// pool may be paused or down to one worker there), and without any timeout in the second test,
// where at most W - 1 tasks wait at once on W workers, which the pool promises to finish.
//
// ASYNC_SOAK_SEED=<n> replays the random choices (printed by every run); ASYNC_STRESS_SCALE
// sizes the run.
#include <async/threadpool.h>

#include "test_support.h"

#include "async_catch.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <limits>
#include <memory>
#include <mutex>
#include <thread>
#include <type_traits>
#include <vector>

namespace {

using namespace std::chrono_literals;

std::uint64_t torture_seed() { return async_test::soak_seed("threadpool torture"); }

using async_test::mix;

// Every task gets an id; ran[id] counts its runs; kept[id] says that cancel_pending() must leave
// it queued.
struct ledger {
  explicit ledger(std::size_t capacity)
      : ran(new std::atomic<int>[capacity]), kept(new bool[capacity]), size(capacity) {
    for (std::size_t i = 0; i < capacity; ++i) {
      ran[i].store(0);
      kept[i] = false;
    }
  }
  // A fresh id, or size when the ledger is full (the caller then posts nothing).
  std::size_t take() {
    const std::size_t id = next.fetch_add(1);
    return id < size ? id : size;
  }
  std::unique_ptr<std::atomic<int>[]> ran;
  std::unique_ptr<bool[]> kept; // written before the task is queued, read after the round
  std::size_t size;
  std::atomic<std::size_t> next{0};
  std::atomic<std::size_t> cancelled{0};
  std::mutex futures_mutex;
  std::vector<std::pair<std::size_t, std::future<int>>> futures;
};

// A task that cancel_pending() must leave queued (the member type async/asio.h's functions
// carry, so that a strand's invoker is never discarded).
template <typename Body>
struct kept_task {
  using async_keep_on_cancel = std::true_type;
  Body body;
  void operator()() { body(); }
};

template <typename Body>
kept_task<Body> keep(Body body) {
  return kept_task<Body>{std::move(body)};
}

struct storm {
  async::threadpool* pool;
  ledger& book;

  // A task: counts its run, and at random posts up to three children (by post, keeping the
  // future, or by execute, and sometimes waiting a little for the child), resizes the pool, or
  // cancels what is queued.
  void spawn(std::size_t depth, bool with_future, std::chrono::microseconds wait = {}) {
    const std::size_t id = book.take();
    if (id == book.size) {
      return;
    }
    auto body = [this, id, depth] {
      book.ran[id].fetch_add(1);
      const std::uint64_t r = mix(torture_seed() ^ (id * 0x100000001b3ull));
      if (depth < 3) {
        for (std::uint64_t c = 0; c < r % 4; ++c) {
          const bool waits = ((r >> (12 + c)) & 3) == 0;
          spawn(depth + 1, waits || ((r >> (8 + c)) & 1) != 0,
                std::chrono::microseconds(waits ? (r >> (40 + 4 * c)) % 2000 : 0));
        }
      }
      if ((r >> 20) % 29 == 0) {
        pool->configurepool(static_cast<std::size_t>((r >> 25) % 4));
      }
      if ((r >> 30) % 97 == 0) {
        book.cancelled.fetch_add(pool->cancel_pending());
      }
      return static_cast<int>(id);
    };
    if (with_future) {
      std::future<int> f = pool->post(body);
      if (wait.count() != 0) {
        f.wait_for(wait); // the child may run now (taken from our next slot), later, or never
      }
      std::lock_guard<std::mutex> lock(book.futures_mutex);
      book.futures.emplace_back(id, std::move(f));
    } else if (mix(id ^ torture_seed()) % 4 == 0) {
      // One task in eight is kept: it must run however often the queues are cancelled, in
      // whichever queue (injection, a worker's, a retiring worker's) the cancel finds it.
      book.kept[id] = true;
      pool->execute(keep([body]() mutable { body(); }));
    } else {
      pool->execute([body]() mutable { body(); });
    }
  }
};

void torture_round(std::size_t round, bool destroy_mid_storm) {
  const std::size_t roots = async_test::scaled(1600, 40);
  ledger book(roots * 40);
  std::atomic<bool> stop{false};
  std::atomic<bool> finished{false};
  bool idle_at_end = true; // checked on this thread: Catch2's assertions are not thread-safe
  std::thread runner([&] {
    {
      // Declared before the pool, so that it outlives the tasks the destructor still runs.
      storm s{nullptr, book};
      async::threadpool pool(1 + round % 3);
      s.pool = &pool;
      std::thread resizer([&] {
        for (std::uint64_t i = 0; !stop.load(); ++i) {
          pool.configurepool(static_cast<std::size_t>(mix(torture_seed() + round + i) % 5));
          std::this_thread::sleep_for(std::chrono::microseconds(50 + i % 200));
        }
      });
      std::thread canceller([&] {
        for (std::uint64_t i = 0; !stop.load(); ++i) {
          if (mix(torture_seed() ^ (round * 31 + i)) % 5 == 0) {
            book.cancelled.fetch_add(pool.cancel_pending());
          }
          // A pause that ends early when the pool is idle: either way is fine.
          static_cast<void>(pool.wait_idle_for(std::chrono::microseconds(300)));
        }
      });
      for (std::size_t k = 0; k < roots; ++k) {
        s.spawn(0, k % 2 == 0);
      }
      stop = true;
      resizer.join();
      canceller.join();
      if (!destroy_mid_storm) {
        // Tasks still running may pause the pool (configurepool(0)) again: grow it back until
        // everything has run.
        do {
          pool.configurepool(2);
        } while (!pool.wait_idle_for(5ms));
        idle_at_end = pool.wait_idle_for(std::chrono::hours::max()); // idle: returns at once
      }
      // Otherwise the destructor meets the storm: tasks still run, post and resize.
    }
    finished = true;
  });
  async_test::watchdog_or_abort(finished, 60000ms,
                                destroy_mid_storm ? "a round ending in destruction mid-storm"
                                                  : "a round ending in wait_idle");
  runner.join();
  CHECK(idle_at_end);

  const std::size_t total = std::min(book.next.load(), book.size);
  std::size_t ran = 0;
  std::size_t twice = 0;
  std::size_t kept = 0;
  std::size_t kept_lost = 0;
  for (std::size_t id = 0; id < total; ++id) {
    const int n = book.ran[id].load();
    ran += n == 1 ? 1 : 0;
    twice += n > 1 ? 1 : 0;
    kept += book.kept[id] ? 1 : 0;
    kept_lost += book.kept[id] && n == 0 ? 1 : 0;
  }
  std::size_t value_mismatch = 0;
  std::size_t unready = 0;
  for (auto& entry : book.futures) {
    auto& f = entry.second;
    if (f.wait_for(0s) != std::future_status::ready) {
      ++unready;
      continue;
    }
    try {
      value_mismatch +=
          (f.get() == static_cast<int>(entry.first) && book.ran[entry.first].load() == 1) ? 0 : 1;
    } catch (const std::future_error& e) {
      value_mismatch +=
          (e.code() == std::future_errc::broken_promise && book.ran[entry.first].load() == 0) ? 0
                                                                                              : 1;
    }
  }
  INFO("round " << round << (destroy_mid_storm ? " (destroyed mid-storm)" : "") << ": " << total
                << " tasks, " << ran << " ran, " << book.cancelled.load() << " cancelled, " << kept
                << " kept");
  CHECK(twice == 0);
  CHECK(kept_lost == 0); // cancel_pending() discarded a task it had to leave queued
  CHECK(ran + book.cancelled.load() == total); // every task ran once or was reported cancelled
  CHECK(unready == 0);
  CHECK(value_mismatch == 0);
}

} // namespace

TEST_CASE("threadpool torture: resize and cancel storms, trees of tasks, destruction mid-storm",
          "[threadpool][stress]") {
  torture_seed();
  const std::size_t rounds = async_test::scaled(12, 4);
  for (std::size_t round = 0; round < rounds; ++round) {
    torture_round(round, round % 2 == 1);
  }
}

namespace {

// Tasks that wait for their children with no timeout. A task waits only if it gets one of
// W - 1 tokens (W: the pool's smallest size in the round), so a worker is always free; the pool
// promises that every such wait then finishes. The pool grows and shrinks between W and W + 2
// meanwhile.
struct nesting {
  async::threadpool* pool;
  std::atomic<int>* tokens;
  std::atomic<long>* posted;
  std::atomic<long>* ran;
  std::uint64_t seed;

  void task(std::uint64_t id, int depth) const {
    ran->fetch_add(1);
    const std::uint64_t r = mix(seed ^ (id * 0x9e3779b97f4a7c15ull));
    if (depth >= 4) {
      return;
    }
    for (std::uint64_t c = 0; c < r % 3; ++c) {
      const std::uint64_t child = id * 4 + c + 1;
      posted->fetch_add(1);
      const nesting self = *this;
      std::future<void> f = pool->post([self, child, depth] { self.task(child, depth + 1); });
      int left = tokens->load();
      while (left > 0 && !tokens->compare_exchange_weak(left, left - 1)) {
      }
      if (left > 0) {
        f.get(); // no timeout: a free worker must take the child, wherever it waits
        tokens->fetch_add(1);
      } else if (((r >> (8 + c)) & 1) != 0) {
        f.wait_for(std::chrono::microseconds((r >> 16) % 500));
      }
    }
  }
};

void nesting_round(std::size_t round) {
  const std::size_t w = 2 + round % 3;
  const std::size_t roots = async_test::scaled(1200, 30);
  std::atomic<int> tokens{static_cast<int>(w) - 1};
  std::atomic<long> posted{0};
  std::atomic<long> ran{0};
  std::atomic<bool> finished{false};
  std::thread runner([&] {
    async::threadpool pool(static_cast<int>(w));
    std::atomic<bool> stop{false};
    std::thread resizer([&] {
      for (std::uint64_t i = 0; !stop.load(); ++i) {
        pool.configurepool(w + mix(torture_seed() + round * 977 + i) % 3);
        std::this_thread::sleep_for(std::chrono::microseconds(100 + i % 300));
      }
    });
    const nesting n{&pool, &tokens, &posted, &ran, torture_seed() + round};
    for (std::size_t k = 0; k < roots; ++k) {
      posted.fetch_add(1);
      pool.execute([n, k] { n.task(k << 20, 0); });
    }
    pool.wait_idle();
    stop = true;
    resizer.join();
    finished = true;
  });
  async_test::watchdog_or_abort(finished, 60000ms, "a round of nested waits without timeouts");
  runner.join();
  INFO("round " << round << ": " << w << " workers at least, " << posted.load() << " tasks");
  CHECK(ran.load() == posted.load());
  CHECK(tokens.load() == static_cast<int>(w) - 1);
}

} // namespace

TEST_CASE("threadpool torture: nested waits without timeouts while a worker is free",
          "[threadpool][stress]") {
  torture_seed();
  const std::size_t rounds = async_test::scaled(9, 3);
  for (std::size_t round = 0; round < rounds; ++round) {
    nesting_round(round);
  }
}

TEST_CASE("threadpool torture: a task's child starts while the pool shrinks and grows",
          "[threadpool][stress]") {
  // One task posts a child (it goes to the task's next slot) and waits on it, again and again,
  // while another thread shrinks the pool to 2 workers and grows it back to 5. The worker that
  // watched the slots used to retire without handing the watch on: configurepool had woken
  // every sleeper, but those that took the pool's lock before the retiree saw it still watching
  // and parked again without a deadline, and the child waited until some later post or resize.
  // A child that has not started after 8 ms holds the resizer (whose wake-ups would rescue
  // it); it must then start within 3 s with the pool left alone (it needs about a millisecond).
  // The bad schedule is rare (a few times a minute on the 2-core VM before the fix): this
  // runs a couple of seconds in CI, and longer with ASYNC_STRESS_SCALE.
  const std::uint64_t seed = torture_seed();
  const std::size_t cycles = async_test::scaled(150, 40);
  async::threadpool pool(5);
  std::atomic<bool> stop{false};
  std::atomic<bool> hold{false};
  std::atomic<long> children{0};
  std::atomic<long> late{0};
  std::atomic<long> stuck{0};
  auto mill = pool.post([&] {
    while (!stop.load()) {
      auto child = pool.post([] {});
      if (child.wait_for(8ms) != std::future_status::ready) {
        late.fetch_add(1);
        hold = true;
        if (child.wait_for(3s) != std::future_status::ready) {
          stuck.fetch_add(1);
          pool.execute([] {}); // a post wakes a worker, which takes the child: the test ends
        }
        hold = false;
      }
      child.get();
      children.fetch_add(1);
      std::this_thread::sleep_for(50us);
    }
  });
  std::atomic<bool> finished{false};
  std::thread resizer([&] {
    // At most 45 s, whatever the scale: the watchdog below allows 60.
    const auto end = std::chrono::steady_clock::now() + 45s;
    for (std::size_t i = 0;
         i < cycles && stuck.load() == 0 && std::chrono::steady_clock::now() < end; ++i) {
      while (hold.load()) {
        std::this_thread::sleep_for(1ms);
      }
      pool.configurepool(2);
      const auto until =
          std::chrono::steady_clock::now() + std::chrono::microseconds(mix(seed + i) % 400);
      while (std::chrono::steady_clock::now() < until) {
      }
      pool.configurepool(5);
      std::this_thread::sleep_for(10ms);
    }
    stop = true;
    finished = true;
  });
  async_test::watchdog_or_abort(finished, 60000ms,
                                "a task waiting on its children while the pool resizes");
  resizer.join();
  mill.get();
  INFO(children.load() << " children, " << late.load() << " started after 8 ms");
  CHECK(stuck.load() == 0);
  CHECK(children.load() > 0);
}

namespace {

// For the test below: tasks the pool keeps on cancel_pending(), as async/asio.h's are.
struct kept_noop {
  using async_keep_on_cancel = std::true_type;
  void operator()() const {}
};
struct kept_chain {
  using async_keep_on_cancel = std::true_type;
  async::threadpool* pool;
  std::atomic<bool>* stop;
  void operator()() const {
    if (!stop->load()) {
      pool->execute(*this);
    }
  }
};

} // namespace

TEST_CASE("threadpool torture: cancel_pending finds the tasks a fairness look is moving",
          "[threadpool][stress]") {
  // Two workers. One runs a long task that keeps queueing tasks q on its own queue (behind a
  // kept task in its next slot); the other runs a kept chain, whose fairness looks move the
  // busy worker's oldest tasks to its own queue. The main thread cancels in a loop. The chain's
  // worker runs the q's one at a time, so of the q's queued before a cancel began, at most two
  // can have started after it returned: one taken for running just before it, and one in the
  // long task's next slot (a q lands there when the slot's task was taken between two posts;
  // cancel_pending leaves a next slot alone). More mean that queued tasks escaped it. They did
  // while a look held them between the two queues (helper-2: up to 8 for one cancel, in each
  // of 3 runs of 3 s).
  const long capacity = 200000;
  const auto run_for = std::chrono::milliseconds(
      static_cast<long>(1000 * std::min(1.0, async_test::stress_scale())));
  std::unique_ptr<std::atomic<long>[]> first_cancel_after(new std::atomic<long>[capacity]);
  std::unique_ptr<std::atomic<long>[]> escaped_from(new std::atomic<long>[capacity]);
  for (long i = 0; i < capacity; ++i) {
    escaped_from[i].store(0);
  }
  std::atomic<bool> stop{false};
  std::atomic<long> cancels_started{0};
  std::atomic<long> cancels_done{0};
  std::atomic<long> next_id{0};
  async::threadpool pool(2);
  auto stuck = [&] {
    while (!stop.load()) {
      for (int i = 0; i < 40; ++i) {
        pool.execute(kept_noop{}); // the next slot
        const long id = next_id.fetch_add(1);
        if (id >= capacity) {
          stop = true;
          break;
        }
        first_cancel_after[id].store(std::numeric_limits<long>::max());
        pool.execute([&, id] { // the worker's own queue
          const long done = cancels_done.load();
          const long from = first_cancel_after[id].load();
          for (long c = from; c <= done && c < capacity; ++c) {
            escaped_from[c].fetch_add(1); // queued before cancel c began, started after it
          }
        });
        first_cancel_after[id].store(cancels_started.load() + 1);
      }
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
  };
  pool.execute(stuck);
  std::this_thread::sleep_for(5ms);
  pool.execute(kept_chain{&pool, &stop});
  const auto end = std::chrono::steady_clock::now() + run_for;
  long calls = 0;
  while (std::chrono::steady_clock::now() < end && !stop.load() && calls + 1 < capacity) {
    cancels_started.fetch_add(1);
    pool.cancel_pending();
    cancels_done.fetch_add(1);
    ++calls;
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  stop = true;
  pool.wait_idle();
  long most = 0;
  for (long c = 0; c <= calls; ++c) {
    most = (std::max)(most, escaped_from[c].load());
  }
  INFO(calls << " cancel_pending calls");
  CHECK(most <= 2);
}
