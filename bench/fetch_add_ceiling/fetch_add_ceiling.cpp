// SPDX-License-Identifier: BSL-1.0
// The limit probe: N threads hammering fetch_add on one cache line. Any strict-FIFO queue that
// takes one shared ticket per operation cannot beat this rate at N threads, so queue figures are
// best read as a fraction of it.
#include <async/detail/cache.h>

#include <benchmark/benchmark.h>

#include <atomic>
#include <cstdint>
#include <thread>

namespace {

async::detail::cache_padded<std::atomic<std::uint64_t>> counter{0};

void contended_fetch_add(benchmark::State& state) {
  std::uint64_t local = 0;
  for (auto _ : state) {
    local += counter->fetch_add(1, std::memory_order_relaxed);
  }
  benchmark::DoNotOptimize(local);
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
}

int max_threads() {
  const unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 2 : static_cast<int>(n);
}

BENCHMARK(contended_fetch_add)->DenseThreadRange(1, max_threads())->UseRealTime();

} // namespace

BENCHMARK_MAIN();
