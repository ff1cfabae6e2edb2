// SPDX-License-Identifier: BSL-1.0
// Idle cost: CPU seconds the process burns per wall second while (a) one consumer is blocked on
// an empty queue, (b) a pool of N workers has nothing to do. The goal is ~0; a spinning waiter
// shows ~1 per spinning thread.
#include "adapters/pools.h"
#include "adapters/queues.h"

#include <time.h>

namespace async_bench {
namespace {

constexpr auto settle = std::chrono::milliseconds(50);  // past any spin-then-park phase
constexpr auto window = std::chrono::milliseconds(300); // what is measured

double process_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

// CPU per wall second over the window, with the idle thing set up by the caller.
void measure(benchmark::State& state) {
  std::this_thread::sleep_for(settle);
  const double cpu0 = process_cpu_seconds();
  const auto t0 = std::chrono::steady_clock::now();
  std::this_thread::sleep_for(window);
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  state.SetIterationTime(wall);
  state.counters["cpu_per_wall"] = (process_cpu_seconds() - cpu0) / wall;
}

template <typename Adapter>
void blocked_consumer(benchmark::State& state) {
  for (auto _ : state) {
    auto q = Adapter::make(1024);
    std::uint64_t got = 0;
    std::thread consumer([&] { got = Adapter::pop(*q); });
    measure(state);
    Adapter::push(*q, 7); // release the consumer
    consumer.join();
    if (got != 7) {
      fail(state, std::string(Adapter::name()) + " idle consumer received " + std::to_string(got));
    }
  }
}

template <typename Pool>
void idle_pool(benchmark::State& state, int workers) {
  for (auto _ : state) {
    Pool pool(workers);
    if (pool.post([] { return 1; }).get() != 1) { // the workers are up
      fail(state, std::string(Pool::name()) + " idle pool");
    }
    measure(state);
  }
}

template <typename Adapter>
void register_consumer() {
  benchmark::RegisterBenchmark(bench_name("idle_cost", "blocked_consumer", Adapter::name()).c_str(),
                               blocked_consumer<Adapter>)
      ->UseManualTime()
      ->Iterations(1)
      ->Unit(benchmark::kMillisecond);
}

template <typename Pool>
void register_pool() {
  const int w = opts().threads;
  benchmark::RegisterBenchmark(
      bench_name("idle_cost", "pool/w:" + std::to_string(w), Pool::name()).c_str(),
      [w](benchmark::State& st) { idle_pool<Pool>(st, w); })
      ->UseManualTime()
      ->Iterations(1)
      ->Unit(benchmark::kMillisecond);
}

} // namespace
} // namespace async_bench

int main(int argc, char** argv) {
  using namespace async_bench;
  const binary_info info{"what a waiting consumer and an idle pool cost: CPU per wall second"};
  return run_main(argc, argv, info, [] {
    for_each_competitor(queue_competitors<std::uint64_t>(), [](auto competitor) {
      using queue = typename decltype(competitor)::type;
      if constexpr (queue::blocking) {
        register_consumer<queue>();
      }
    });
    for_each_competitor(pool_competitors(), [](auto competitor) {
      using pool = typename decltype(competitor)::type;
      if constexpr (pool::idles) {
        register_pool<pool>();
      }
    });
  });
}
