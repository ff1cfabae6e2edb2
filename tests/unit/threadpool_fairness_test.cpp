// SPDX-License-Identifier: BSL-1.0
// async::threadpool's fairness: no door starves another. Tasks that re-post themselves for ever
// (the ordinary yield or polling pattern) must not keep an outside post, or a task waiting in a
// worker's own queue, from running; two outside submitters must not starve each other. Each
// test checks the documented bound in tasks (the number of other tasks that may run first),
// which holds for every schedule, and fails by timeout where a door starves.
#include <async/threadpool.h>

#include "test_support.h"

#include "async_catch.h"

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <future>
#include <thread>
#include <vector>

using async::threadpool;
using namespace std::chrono_literals;

namespace {

using fairness = async::detail::pool_fairness;

// The longest a worker runs other tasks before it looks at the outside posts: a look is due
// every shared_every tasks, and a run of next-slot successors started before that is not cut
// short until next_in_a_row of them have run.
constexpr std::uint64_t ticks_between_looks = fairness::shared_every + fairness::next_in_a_row;

// How long a starved task is waited for before the test fails (a fair pool runs it within
// milliseconds; the slack is for sanitizers and qemu).
constexpr auto starved_after = 20s;

// A task that re-posts itself until `stop`: with execute() its copy goes to the worker's next
// slot (the first post of a task), and so on for ever.
struct self_reposting {
  threadpool* pool;
  std::atomic<bool>* stop;
  std::atomic<std::uint64_t>* links;
  void operator()() const {
    links->fetch_add(1, std::memory_order_relaxed);
    if (!stop->load(std::memory_order_relaxed)) {
      pool->execute(*this);
    }
  }
};

// How many links ran from `from` to `to` (0 when the task ran before `from` was read).
std::uint64_t after(std::uint64_t from, std::uint64_t to) { return to > from ? to - from : 0; }

// Starts `n` endless chains and waits until they have run a while.
void start_chains(threadpool& pool, int n, std::atomic<bool>& stop,
                  std::atomic<std::uint64_t>& links) {
  for (int i = 0; i < n; ++i) {
    pool.execute(self_reposting{&pool, &stop, &links});
  }
  REQUIRE(async_test::eventually_equal(
      [&] { return links.load() >= 1000 * static_cast<std::uint64_t>(n); }, true, 10000ms));
}

} // namespace

TEST_CASE("an outside post runs while every worker runs a self-reposting chain", "[fairness]") {
  for (int workers : {1, 2, 4}) {
    CAPTURE(workers);
    threadpool pool(workers);
    std::atomic<bool> stop{false};
    std::atomic<std::uint64_t> links{0};
    start_chains(pool, workers, stop, links);
    for (int round = 0; round < 20; ++round) {
      std::atomic<std::uint64_t> at_run{0};
      auto outside = pool.post([&] { at_run = links.load(); });
      // Read once the post is queued: the bound counts from there.
      const std::uint64_t queued_at = links.load();
      const bool ran = outside.wait_for(starved_after) == std::future_status::ready;
      if (!ran) {
        stop = true; // so that the pool can end
      }
      REQUIRE(ran);
      // Each worker runs at most ticks_between_looks tasks (and the one it is in) before it
      // looks at the outside posts and takes this one.
      CHECK(after(queued_at, at_run.load()) <=
            static_cast<std::uint64_t>(workers) * (ticks_between_looks + 1));
    }
    stop = true;
    pool.wait_idle();
  }
}

TEST_CASE("a task in a worker's own queue runs while the chains on that worker go on",
          "[fairness]") {
  // One worker. Each link of the chain posts a no-op first (it goes to the next slot) and
  // itself second (the worker's own queue): the queue always holds the chain's newest link,
  // and a task queued behind it earlier must still come first (oldest first).
  threadpool pool(1);
  std::atomic<bool> stop{false};
  std::atomic<std::uint64_t> links{0};
  struct split_chain {
    threadpool* pool;
    std::atomic<bool>* stop;
    std::atomic<std::uint64_t>* links;
    void operator()() const {
      links->fetch_add(1, std::memory_order_relaxed);
      pool->execute([] {});
      if (!stop->load(std::memory_order_relaxed)) {
        pool->execute(*this);
      }
    }
  };
  for (int round = 0; round < 20; ++round) {
    std::promise<std::uint64_t> waited;
    auto result = waited.get_future();
    std::uint64_t before = 0;
    pool.execute([&] {
      before = links.load();
      pool.execute(split_chain{&pool, &stop, &links});       // the next slot
      pool.execute([&] { waited.set_value(links.load()); }); // the worker's own queue
    });
    const bool ran = result.wait_for(starved_after) == std::future_status::ready;
    stop = true;
    pool.wait_idle();
    REQUIRE(ran);
    CHECK(result.get() - before <= ticks_between_looks);
    stop = false;
  }
}

TEST_CASE("an outside post runs while chains fill every worker's own queue", "[fairness]") {
  // The same chains on two workers, their queues never empty: the outside post must not wait
  // for them to run dry.
  threadpool pool(2);
  std::atomic<bool> stop{false};
  std::atomic<std::uint64_t> links{0};
  struct split_chain {
    threadpool* pool;
    std::atomic<bool>* stop;
    std::atomic<std::uint64_t>* links;
    void operator()() const {
      links->fetch_add(1, std::memory_order_relaxed);
      pool->execute([] {});
      if (!stop->load(std::memory_order_relaxed)) {
        pool->execute(*this);
      }
    }
  };
  for (int i = 0; i < 2; ++i) {
    pool.execute(split_chain{&pool, &stop, &links});
  }
  REQUIRE(async_test::eventually_equal([&] { return links.load() >= 2000; }, true, 10000ms));
  for (int round = 0; round < 20; ++round) {
    std::atomic<std::uint64_t> at_run{0};
    auto outside = pool.post([&] { at_run = links.load(); });
    const std::uint64_t queued_at = links.load();
    const bool ran = outside.wait_for(starved_after) == std::future_status::ready;
    if (!ran) {
      stop = true;
    }
    REQUIRE(ran);
    // Two tasks per link (the link and its no-op).
    CHECK(after(queued_at, at_run.load()) <= 2 * (ticks_between_looks + 1));
  }
  stop = true;
  pool.wait_idle();
}

TEST_CASE("two outside submitters do not starve each other", "[fairness]") {
  // One thread keeps a deep queue of outside posts; another posts one task at a time. Few of
  // the flood's tasks posted after that one may run before it: at most a batch per look of
  // each worker at each lane of the shared queue, whatever its depth.
  constexpr int workers = 2;
  threadpool pool(workers);
  std::atomic<bool> stop{false};
  std::atomic<std::int64_t> outstanding{0};
  std::atomic<std::uint64_t> flood_posted{0};
  std::atomic<std::uint64_t> flood_started{0};
  std::thread flood([&] {
    while (!stop.load()) {
      if (outstanding.load() < 4096) {
        outstanding.fetch_add(1);
        const std::uint64_t number = flood_posted.fetch_add(1);
        pool.execute([&, number] {
          // The highest number started so far: tasks may start out of order across workers.
          std::uint64_t seen = flood_started.load();
          while (seen < number + 1 && !flood_started.compare_exchange_weak(seen, number + 1)) {
          }
          outstanding.fetch_sub(1);
        });
      } else {
        std::this_thread::yield();
      }
    }
  });
  REQUIRE(
      async_test::eventually_equal([&] { return flood_started.load() >= 10000; }, true, 10000ms));
  for (int round = 0; round < 50; ++round) {
    std::atomic<std::uint64_t> started_at{0};
    auto mine = pool.post([&] { started_at = flood_started.load(); });
    const std::uint64_t posted_after = flood_posted.load();
    const bool ran = mine.wait_for(starved_after) == std::future_status::ready;
    if (!ran) {
      stop = true;
      flood.join();
    }
    REQUIRE(ran);
    // Flood tasks numbered from posted_after on were posted after ours was queued.
    const std::uint64_t overtook =
        started_at.load() > posted_after ? started_at.load() - posted_after : 0;
    CHECK(overtook <= workers * fairness::lanes_max * fairness::batch_max);
  }
  stop = true;
  flood.join();
  pool.wait_idle();
}
