// SPDX-License-Identifier: BSL-1.0
// Asio's "work queue with strands" (the asiotest workload): C initial calls, each posted to the
// strand (or io_context) picked for it round-robin, and each causing K follow-up handlers, one
// after the other, on that same strand. Over W worker threads:
//   async::threadpool+strand    asio::strand over the executor of an async::asio_context
//   asio thread_pool+strand     asio::strand over boost::asio::thread_pool's executor
//   asio io_context per thread  W io_contexts, one thread each; a "strand" is one of them
// Verified: every handler runs exactly once, the handlers of one strand never overlap, and each
// strand runs its initial calls in the order they were posted.
#include "harness.h"
#include "pool_harness.h"

#include <async/asio.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/thread_pool.hpp>

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace net = boost::asio;

namespace async_bench {
namespace {

// What one strand saw (a line of its own: only that strand's handlers write it).
struct alignas(128) lane_tally {
  std::atomic<int> inside{0};
  std::uint64_t handlers = 0;
  std::uint64_t overlaps = 0;
  std::int64_t last_call = -1; // the last initial call seen on this strand
  std::uint64_t order_violations = 0;
};

// The shared part of a run: the tallies and the count of handlers still to run.
struct run_state {
  explicit run_state(int lanes) : tallies(new lane_tally[static_cast<std::size_t>(lanes)]) {}
  std::unique_ptr<lane_tally[]> tallies;
  std::atomic<std::uint64_t> remaining{0};
};

// A handler of call `call` on strand `lane`, `left` follow-ups still to come after it.
template <typename Executor>
struct step {
  Executor* lanes;
  run_state* state;
  int lane;
  std::int64_t call;
  int left;
  bool initial;
  void operator()() const {
    lane_tally& t = state->tallies[static_cast<std::size_t>(lane)];
    if (t.inside.fetch_add(1, std::memory_order_relaxed) != 0) {
      ++t.overlaps;
    }
    ++t.handlers;
    if (initial) {
      if (call <= t.last_call) {
        ++t.order_violations;
      }
      t.last_call = call;
    }
    t.inside.fetch_sub(1, std::memory_order_relaxed);
    if (left > 0) {
      net::post(lanes[lane], step{lanes, state, lane, call, left - 1, false});
    }
    state->remaining.fetch_sub(1, std::memory_order_acq_rel);
  }
};

// Posts the C initial calls round-robin over the lanes, waits until every handler ran, and
// checks the tallies. Returns the seconds from the first post to the last handler.
template <typename Executor>
double run_calls(benchmark::State& state, const char* name, std::vector<Executor>& lanes,
                 std::int64_t calls, int follow_ups) {
  run_state run(static_cast<int>(lanes.size()));
  const std::uint64_t total =
      static_cast<std::uint64_t>(calls) * static_cast<std::uint64_t>(follow_ups + 1);
  run.remaining.store(total, std::memory_order_relaxed);
  const auto t0 = std::chrono::steady_clock::now();
  for (std::int64_t c = 0; c < calls; ++c) {
    const int lane = static_cast<int>(c % static_cast<std::int64_t>(lanes.size()));
    net::post(lanes[static_cast<std::size_t>(lane)],
              step<Executor>{lanes.data(), &run, lane, c, follow_ups, true});
  }
  spin_wait wait;
  while (run.remaining.load(std::memory_order_acquire) != 0) {
    wait();
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::uint64_t handlers = 0;
  for (std::size_t l = 0; l < lanes.size(); ++l) {
    const lane_tally& t = run.tallies[l];
    handlers += t.handlers;
    if (t.overlaps != 0 || t.order_violations != 0) {
      fail(state,
           std::string(name) + " asio_strands: a strand ran handlers at once or out of order");
    }
  }
  if (handlers != total) {
    fail(state, std::string(name) + " asio_strands: wrong handler count");
  }
  return seconds;
}

// The pools whose executors carry the strands: W workers, an executor, join().
struct our_pool {
  static const char* name() { return "async::threadpool+strand"; }
  using executor_type = async::asio_context::executor_type;
  explicit our_pool(int workers) : pool(workers), context(pool) {}
  executor_type executor() { return context.get_executor(); }
  void join() { context.join(); }
  async::threadpool pool;
  async::asio_context context;
};

struct asio_pool {
  static const char* name() { return "asio thread_pool+strand"; }
  using executor_type = net::thread_pool::executor_type;
  explicit asio_pool(int workers) : pool(static_cast<std::size_t>(workers)) {}
  executor_type executor() { return pool.get_executor(); }
  void join() { pool.join(); }
  net::thread_pool pool;
};

// S asio::strands over the executor of a Pool of W workers.
template <typename Pool>
struct strands_on {
  static const char* name() { return Pool::name(); }
  template <typename Measure>
  static void measure(int workers, int strands, Measure m) {
    Pool pool(workers);
    std::vector<net::strand<typename Pool::executor_type>> lanes;
    for (int s = 0; s < strands; ++s) {
      lanes.push_back(net::make_strand(pool.executor()));
    }
    m(lanes);
    pool.join();
  }
};

struct asio_contexts {
  static const char* name() { return "asio io_context per thread"; }
  template <typename Measure>
  static void measure(int workers, int /*strands*/, Measure m) {
    // One io_context per worker thread; the lanes are the contexts (serial by construction).
    std::vector<std::unique_ptr<net::io_context>> contexts;
    std::vector<net::executor_work_guard<net::io_context::executor_type>> guards;
    std::vector<std::thread> threads;
    std::vector<net::io_context::executor_type> lanes;
    for (int w = 0; w < workers; ++w) {
      contexts.emplace_back(new net::io_context(1));
      guards.push_back(net::make_work_guard(*contexts.back()));
      lanes.push_back(contexts.back()->get_executor());
    }
    for (int w = 0; w < workers; ++w) {
      net::io_context* io = contexts[static_cast<std::size_t>(w)].get();
      threads.emplace_back([io] { io->run(); });
    }
    m(lanes);
    for (auto& g : guards) {
      g.reset();
    }
    for (auto& t : threads) {
      t.join();
    }
  }
};

template <typename Rig>
void asio_strands(benchmark::State& state, int workers, int strands, int follow_ups) {
  const std::int64_t calls = std::max<std::int64_t>(
      1, static_cast<std::int64_t>(opts().items) / static_cast<std::int64_t>(follow_ups + 1));
  const std::uint64_t total =
      static_cast<std::uint64_t>(calls) * static_cast<std::uint64_t>(follow_ups + 1);
  for (auto _ : state) {
    double seconds = 0;
    Rig::measure(workers, strands, [&](auto& lanes) {
      seconds = run_calls(state, Rig::name(), lanes, calls, follow_ups);
    });
    state.SetIterationTime(seconds);
    state.counters["ns_per_handler"] = seconds * 1e9 / static_cast<double>(total);
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * total));
}

template <typename Rig>
void register_rig(int workers, int strands, int follow_ups) {
  const std::string params = "w:" + std::to_string(workers) +
                             "/strands:" + std::to_string(strands) +
                             "/k:" + std::to_string(follow_ups);
  add_case(bench_name("asio_strands", params, Rig::name()),
           [workers, strands, follow_ups](benchmark::State& st) {
             asio_strands<Rig>(st, workers, strands, follow_ups);
           });
}

} // namespace
} // namespace async_bench

int main(int argc, char** argv) {
  using namespace async_bench;
  const binary_info info{"Asio's work queue with strands: over our pool and over Asio's own",
                         "handlers"};
  return run_main(argc, argv, info, [] {
    for (int w : worker_counts()) {
      for (int strands : {8, 64}) {
        const int follow_ups = 16;
        register_rig<strands_on<our_pool>>(w, strands, follow_ups);
        register_rig<strands_on<asio_pool>>(w, strands, follow_ups);
        register_rig<asio_contexts>(w, strands, follow_ups);
      }
    }
  });
}
