// SPDX-License-Identifier: BSL-1.0
// The pool scenarios, one loop each for every competitor:
//   pool_post:  S submitters post tiny tasks (batches of 16) and get every future; W workers.
//   pool_chain: I roots, each task re-posting the next of its chain D times (asiotest style).
//   pool_window: S submitters each keep `window` tasks in flight (deep-window throughput), with
//               post + future, or with the pool's call without a future.
// Each verifies what ran (sum of results, count of links).
#ifndef ASYNC_BENCH_COMMON_POOL_HARNESS_H
#define ASYNC_BENCH_COMMON_POOL_HARNESS_H

#include "harness.h"

#include <future>

namespace async_bench {

/// 1, 2, 4, ... up to N, and N itself.
inline std::vector<int> worker_counts() {
  std::vector<int> out;
  for (int w = 1; w < opts().threads; w *= 2) {
    out.push_back(w);
  }
  out.push_back(opts().threads);
  return out;
}

/// The frame of the post + future scenarios: S submitter threads each run `submit(pool, start)`,
/// which waits at the start line, posts tasks returning 1 .. per_submitter and returns the sum
/// of their results; the total is checked, and the time per task reported.
template <typename Pool, typename Submit>
void measure_posts(benchmark::State& state, const char* scenario, int workers, int submitters,
                   std::uint64_t per_submitter, Submit submit) {
  const std::uint64_t total = per_submitter * static_cast<std::uint64_t>(submitters);
  for (auto _ : state) {
    Pool pool(workers);
    start_line start;
    std::vector<std::uint64_t> sums(static_cast<std::size_t>(submitters), 0);
    std::vector<std::thread> threads;
    for (int s = 0; s < submitters; ++s) {
      threads.emplace_back([&, s] {
        pin_thread(s);
        sums[static_cast<std::size_t>(s)] = submit(pool, start);
      });
    }
    const double seconds = start.open_and_join(threads);
    state.SetIterationTime(seconds);
    const std::uint64_t sum = std::accumulate(sums.begin(), sums.end(), std::uint64_t(0));
    if (sum != static_cast<std::uint64_t>(submitters) * per_submitter * (per_submitter + 1) / 2) {
      fail(state, std::string(Pool::name()) + " " + scenario + ": wrong sum");
      return;
    }
    state.counters["ns_per_task"] = seconds * 1e9 / static_cast<double>(total);
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * total));
}

/// A task returning v.
inline auto value_task(std::uint64_t v) {
  return [v] { return v; };
}

/// pool_post: each submitter posts 16 tasks, then gets their 16 results, and again.
template <typename Pool>
void pool_post(benchmark::State& state, int workers, int submitters) {
  constexpr std::uint64_t batch = 16;
  const std::uint64_t per_submitter =
      std::max<std::uint64_t>(batch, opts().items / 16 / static_cast<std::uint64_t>(submitters)) /
      batch * batch;
  measure_posts<Pool>(state, "pool_post", workers, submitters, per_submitter,
                      [per_submitter](Pool& pool, start_line& start) {
                        using future_t = decltype(pool.post(value_task(0)));
                        std::vector<future_t> futures;
                        futures.reserve(batch);
                        start.wait();
                        std::uint64_t sum = 0;
                        for (std::uint64_t i = 0; i < per_submitter; i += batch) {
                          for (std::uint64_t k = 0; k < batch; ++k) {
                            futures.push_back(pool.post(value_task(i + k + 1)));
                          }
                          for (auto& f : futures) {
                            sum += f.get();
                          }
                          futures.clear();
                        }
                        return sum;
                      });
}

template <typename Pool>
struct chain_link {
  Pool* pool;
  std::atomic<std::uint64_t>* links;
  std::atomic<int>* chains_left;
  std::promise<void>* all_done;
  int left;
  void operator()() const {
    links->fetch_add(1, std::memory_order_relaxed);
    if (left > 0) {
      pool->spawn(chain_link{pool, links, chains_left, all_done, left - 1});
    } else if (chains_left->fetch_sub(1, std::memory_order_acq_rel) == 1) {
      all_done->set_value();
    }
  }
};

template <typename Pool>
void pool_chain(benchmark::State& state, int workers, int roots) {
  const int depth = static_cast<int>(
      std::max<std::uint64_t>(1, opts().items / 16 / static_cast<std::uint64_t>(roots)));
  const std::uint64_t total = static_cast<std::uint64_t>(roots) * (depth + 1);
  for (auto _ : state) {
    Pool pool(workers);
    std::atomic<std::uint64_t> links{0};
    std::atomic<int> chains_left{roots};
    std::promise<void> all_done;
    auto done = all_done.get_future();
    const auto t0 = std::chrono::steady_clock::now();
    for (int r = 0; r < roots; ++r) {
      pool.spawn(chain_link<Pool>{&pool, &links, &chains_left, &all_done, depth});
    }
    done.wait();
    const auto t1 = std::chrono::steady_clock::now();
    state.SetIterationTime(std::chrono::duration<double>(t1 - t0).count());
    if (links.load() != total) {
      fail(state, std::string(Pool::name()) + " pool_chain: wrong count");
      return;
    }
    state.counters["ns_per_task"] =
        std::chrono::duration<double, std::nano>(t1 - t0).count() / static_cast<double>(total);
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * total));
}

/// pool_window with post + future: each submitter keeps a ring of `window` futures; when the
/// ring is full it takes the oldest result before it posts the next task.
template <typename Pool>
void pool_window_post(benchmark::State& state, int workers, int submitters, std::size_t window) {
  const std::uint64_t per_submitter =
      std::max<std::uint64_t>(window, opts().items / static_cast<std::uint64_t>(submitters));
  measure_posts<Pool>(state, "pool_window_post", workers, submitters, per_submitter,
                      [per_submitter, window](Pool& pool, start_line& start) {
                        using future_t = decltype(pool.post(value_task(0)));
                        std::vector<future_t> ring(window);
                        start.wait();
                        std::uint64_t sum = 0;
                        for (std::uint64_t i = 0; i < per_submitter; ++i) {
                          future_t& slot = ring[static_cast<std::size_t>(i % window)];
                          if (i >= window) {
                            sum += slot.get();
                          }
                          slot = pool.post(value_task(i + 1));
                        }
                        for (std::uint64_t i = per_submitter > window ? per_submitter - window : 0;
                             i < per_submitter; ++i) {
                          sum += ring[static_cast<std::size_t>(i % window)].get();
                        }
                        return sum;
                      });
}

/// One submitter's tasks report here (a line of its own: the workers update it, its submitter
/// reads it).
struct alignas(128) window_tally {
  std::atomic<std::uint64_t> done{0};
  std::atomic<std::uint64_t> sum{0};
};

template <typename Pool>
struct window_task {
  window_tally* tally;
  std::uint64_t value;
  void operator()() const {
    tally->sum.fetch_add(value, std::memory_order_relaxed);
    tally->done.fetch_add(1, std::memory_order_release);
  }
};

/// pool_window without futures (the pool's execute/spawn): each submitter counts its finished
/// tasks and posts while fewer than `window` are in flight; the run ends when all finished.
template <typename Pool>
void pool_window_execute(benchmark::State& state, int workers, int submitters, std::size_t window) {
  const std::uint64_t per_submitter =
      std::max<std::uint64_t>(window, opts().items / static_cast<std::uint64_t>(submitters));
  const std::uint64_t total = per_submitter * static_cast<std::uint64_t>(submitters);
  for (auto _ : state) {
    std::unique_ptr<window_tally[]> tallies(new window_tally[static_cast<std::size_t>(submitters)]);
    double seconds = 0;
    {
      Pool pool(workers);
      start_line start;
      std::vector<std::thread> threads;
      for (int s = 0; s < submitters; ++s) {
        threads.emplace_back([&, s] {
          pin_thread(s);
          window_tally& tally = tallies[static_cast<std::size_t>(s)];
          start.wait();
          spin_wait wait;
          for (std::uint64_t i = 0; i < per_submitter; ++i) {
            while (i - tally.done.load(std::memory_order_acquire) >= window) {
              wait();
            }
            pool.spawn(window_task<Pool>{&tally, i + 1});
          }
          while (tally.done.load(std::memory_order_acquire) < per_submitter) {
            wait();
          }
        });
      }
      seconds = start.open_and_join(threads);
    } // the pool is joined before the tallies go
    state.SetIterationTime(seconds);
    for (int s = 0; s < submitters; ++s) {
      const window_tally& t = tallies[static_cast<std::size_t>(s)];
      if (t.done.load() != per_submitter ||
          t.sum.load() != per_submitter * (per_submitter + 1) / 2) {
        fail(state, std::string(Pool::name()) + " pool_window_execute: wrong count or sum");
        return;
      }
    }
    state.counters["ns_per_task"] = seconds * 1e9 / static_cast<double>(total);
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * total));
}

/// Both pool_window variants the pool has, S = 1 and 4, W = 1, 2, 4 .. N.
template <typename Pool>
void register_pool_window(std::size_t window) {
  for (int submitters : {1, 4}) {
    for (int w : worker_counts()) {
      const std::string params = "w:" + std::to_string(w) + "/s:" + std::to_string(submitters);
      if constexpr (Pool::futures && !Pool::thread_per_call) {
        add_case(bench_name("pool_window_post", params, Pool::name()),
                 [w, submitters, window](benchmark::State& st) {
                   pool_window_post<Pool>(st, w, submitters, window);
                 });
      }
      if constexpr (Pool::chains) {
        add_case(bench_name("pool_window_execute", params, Pool::name()),
                 [w, submitters, window](benchmark::State& st) {
                   pool_window_execute<Pool>(st, w, submitters, window);
                 });
      }
    }
  }
}

template <typename Pool>
void register_pool_post(bool vary_workers = true) {
  for (int submitters : {1, 4}) {
    for (int w : vary_workers ? worker_counts() : std::vector<int>{opts().threads}) {
      const std::string params = "w:" + std::to_string(w) + "/s:" + std::to_string(submitters);
      add_case(bench_name("pool_post", params, Pool::name()),
               [w, submitters](benchmark::State& st) { pool_post<Pool>(st, w, submitters); });
    }
  }
}

template <typename Pool>
void register_pool_chain(int roots) {
  for (int w : worker_counts()) {
    const std::string params = "w:" + std::to_string(w) + "/roots:" + std::to_string(roots);
    add_case(bench_name("pool_chain", params, Pool::name()),
             [w, roots](benchmark::State& st) { pool_chain<Pool>(st, w, roots); });
  }
}

} // namespace async_bench

#endif // ASYNC_BENCH_COMMON_POOL_HARNESS_H
