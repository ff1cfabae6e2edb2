// SPDX-License-Identifier: BSL-1.0
// The limit probe: N threads hammering fetch_add on one cache line. Any strict-FIFO queue that
// takes one shared ticket per operation cannot beat this rate at N threads, so queue figures are
// best read as a fraction of it.
#include "harness.h"

#include <atomic>
#include <cstdint>

namespace {

std::atomic<std::uint64_t>& counter() {
  static async::detail::padded<std::atomic<std::uint64_t>> c{0};
  return c.value;
}

void contended_fetch_add(benchmark::State& state) {
  std::uint64_t local = 0;
  for (auto _ : state) {
    local += counter().fetch_add(1, std::memory_order_relaxed);
  }
  benchmark::DoNotOptimize(local);
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
}

} // namespace

int main(int argc, char** argv) {
  using namespace async_bench;
  const binary_info info{"one shared ticket's ceiling: fetch_add on one line by N threads",
                         "increments"};
  return run_main(argc, argv, info, [] {
    // Google Benchmark runs the function on t threads at once; items/s sums over them.
    benchmark::RegisterBenchmark("fetch_add_ceiling/one_line/async::fetch_add", contended_fetch_add)
        ->DenseThreadRange(1, opts().threads)
        ->UseRealTime();
  });
}
