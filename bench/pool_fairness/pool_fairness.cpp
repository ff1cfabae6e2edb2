// SPDX-License-Identifier: BSL-1.0
// Fairness: how long a task posted from outside waits while every worker runs a chain that
// re-posts itself for ever (the yield or polling pattern): the median (p50) and the 99th
// percentile (p99) of its wait over the posts of a run, in microseconds, W workers each with
// a chain. A pool that does not serve an outside post while its workers have work of their own
// shows a wait of at least the cap (`starved` counts such posts; the run then stops the chains,
// so that the post runs and the pool can end).
#include "adapters/pools.h"
#include "pool_harness.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace async_bench {
namespace {

constexpr auto cap = std::chrono::milliseconds(200);

template <typename Pool>
struct endless_link {
  Pool* pool;
  std::atomic<bool>* stop;
  std::atomic<std::uint64_t>* links;
  void operator()() const {
    links->fetch_add(1, std::memory_order_relaxed);
    if (!stop->load(std::memory_order_relaxed)) {
      pool->spawn(endless_link{pool, stop, links});
    }
  }
};

// One outside post: posted at `posted`, run when `ran` is set, after `waited_ns`.
struct outside_task {
  std::chrono::steady_clock::time_point posted;
  std::atomic<std::int64_t>* waited_ns;
  std::atomic<bool>* ran;
  void operator()() const {
    waited_ns->store(std::chrono::duration_cast<std::chrono::nanoseconds>(
                         std::chrono::steady_clock::now() - posted)
                         .count(),
                     std::memory_order_relaxed);
    ran->store(true, std::memory_order_release);
  }
};

template <typename Pool>
void outside_wait(benchmark::State& state, int workers, double quantile) {
  const std::size_t samples =
      static_cast<std::size_t>(std::clamp<std::uint64_t>(opts().items / 4096, 20, 500));
  for (auto _ : state) {
    std::vector<double> waits; // microseconds
    std::size_t starved = 0;
    double seconds = 0;
    {
      Pool pool(workers);
      std::atomic<bool> stop{false};
      std::atomic<std::uint64_t> links{0};
      for (int w = 0; w < workers; ++w) {
        pool.spawn(endless_link<Pool>{&pool, &stop, &links});
      }
      spin_wait wait;
      const auto started = std::chrono::steady_clock::now();
      while (links.load() < 1000 * static_cast<std::uint64_t>(workers) &&
             std::chrono::steady_clock::now() - started < std::chrono::seconds(5)) {
        wait();
      }
      const auto t0 = std::chrono::steady_clock::now();
      for (std::size_t i = 0; i < samples && starved == 0; ++i) {
        std::atomic<std::int64_t> waited_ns{0};
        std::atomic<bool> ran{false};
        const auto posted = std::chrono::steady_clock::now();
        pool.spawn(outside_task{posted, &waited_ns, &ran});
        while (!ran.load(std::memory_order_acquire)) {
          if (starved == 0 && std::chrono::steady_clock::now() - posted > cap) {
            starved = 1;
            stop = true; // the chains end, and the post runs
          }
          wait();
        }
        waits.push_back(static_cast<double>(waited_ns.load()) / 1e3);
      }
      seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      stop = true;
    } // the pool is joined (the chains have ended) before the counters go
    std::sort(waits.begin(), waits.end());
    const std::size_t at = std::min(
        waits.size() - 1, static_cast<std::size_t>(quantile * static_cast<double>(waits.size())));
    state.SetIterationTime(seconds);
    state.counters["wait_us"] = waits[at];
    state.counters["starved"] = static_cast<double>(starved);
    state.counters["posts"] = static_cast<double>(waits.size());
  }
}

template <typename Pool>
void register_outside_wait() {
  for (int w : worker_counts()) {
    for (const double q : {0.5, 0.99}) {
      const std::string scenario = q < 0.9 ? "outside_wait_p50" : "outside_wait_p99";
      add_case(bench_name(scenario, "w:" + std::to_string(w), Pool::name()),
               [w, q](benchmark::State& st) { outside_wait<Pool>(st, w, q); });
    }
  }
}

} // namespace
} // namespace async_bench

int main(int argc, char** argv) {
  using namespace async_bench;
  const binary_info info{"how long a task from outside waits while every worker re-posts itself",
                         "tasks"};
  return run_main(argc, argv, info, [] {
    for_each_competitor(pool_competitors(), [](auto competitor) {
      using pool = typename decltype(competitor)::type;
      if constexpr (pool::chains) {
        register_outside_wait<pool>();
      }
    });
  });
}
