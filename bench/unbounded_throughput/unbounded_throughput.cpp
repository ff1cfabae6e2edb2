// SPDX-License-Identifier: BSL-1.0
// Unbounded queues: P producers x C consumers with single calls, then with bulk calls of 16
// (producers hand over 16 values per call, consumers take up to 16). No pre-allocation: every
// queue starts empty and grows as it needs.
#include "adapters/async_queue.h"
#if ASYNC_BENCH_HAVE_ASIO
#include "adapters/boost_lockfree.h"
#endif
#if ASYNC_BENCH_HAVE_MOODYCAMEL
#include "adapters/moodycamel.h"
#endif
#if ASYNC_BENCH_HAVE_TBB
#include "adapters/tbb_queues.h"
#endif

namespace async_bench {

constexpr std::size_t bulk_size = 16;

/// As queue_throughput, with bulk calls on both sides.
template <typename Adapter>
void bulk_throughput(benchmark::State& state, shape sh) {
  const quotas quota(sh);
  const std::uint64_t per_producer = quota.per_producer;
  const std::uint64_t total = quota.total;
  const std::uint64_t expected_sum = quota.expected_sum;

  for (auto _ : state) {
    auto q = Adapter::make(0);
    start_line start;
    std::vector<std::uint64_t> sums(static_cast<std::size_t>(sh.consumers), 0);
    std::vector<std::thread> threads;
    for (int p = 0; p < sh.producers; ++p) {
      threads.emplace_back([&, p] {
        start.wait();
        std::uint64_t batch[bulk_size];
        std::uint64_t next = static_cast<std::uint64_t>(p) * per_producer + 1;
        const std::uint64_t end = next + per_producer;
        while (next < end) {
          const std::size_t n =
              static_cast<std::size_t>(std::min<std::uint64_t>(bulk_size, end - next));
          for (std::size_t k = 0; k < n; ++k) {
            batch[k] = next + k;
          }
          Adapter::push_bulk(*q, batch, n);
          next += n;
        }
      });
    }
    // Consumers share the total: each takes what it gets until all values are in.
    std::atomic<std::uint64_t> taken{0};
    for (int c = 0; c < sh.consumers; ++c) {
      threads.emplace_back([&, c] {
        start.wait();
        std::uint64_t batch[bulk_size];
        std::uint64_t sum = 0;
        spin_wait wait;
        while (taken.load(std::memory_order_relaxed) < total) {
          const std::size_t n = Adapter::pop_bulk(*q, batch, bulk_size);
          if (n == 0) {
            wait();
            continue;
          }
          for (std::size_t k = 0; k < n; ++k) {
            sum += batch[k];
          }
          taken.fetch_add(n, std::memory_order_relaxed);
        }
        sums[static_cast<std::size_t>(c)] = sum;
      });
    }
    state.SetIterationTime(start.open_and_join(threads));
    const std::uint64_t sum = std::accumulate(sums.begin(), sums.end(), std::uint64_t(0));
    if (sum != expected_sum) {
      fail(state, std::string(Adapter::name()) + " bulk " + sh.name() + ": sum " +
                      std::to_string(sum) + " != " + std::to_string(expected_sum));
      return;
    }
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * total));
  state.counters["threads"] = sh.producers + sh.consumers;
}

template <typename Adapter>
void register_bulk() {
  for (const shape& sh : throughput_shapes()) {
    configure(benchmark::RegisterBenchmark(
        bench_name("bulk16", sh.name(), Adapter::name()).c_str(),
        [sh](benchmark::State& st) { bulk_throughput<Adapter>(st, sh); }));
  }
}

} // namespace async_bench

int main(int argc, char** argv) {
  using namespace async_bench;
  return run_main(argc, argv, [] {
    const std::vector<std::size_t> unbounded = {0};
    register_throughput<async_unbounded>(unbounded);
#if ASYNC_BENCH_HAVE_MOODYCAMEL
    register_throughput<moodycamel_queue>(unbounded);
    register_throughput<moodycamel_queue_tokens>(unbounded);
#endif
#if ASYNC_BENCH_HAVE_TBB
    register_throughput<tbb_queue>(unbounded);
#endif
#if ASYNC_BENCH_HAVE_ASIO
    register_throughput<boost_lockfree_queue>(unbounded);
#endif
    register_bulk<async_unbounded>();
#if ASYNC_BENCH_HAVE_MOODYCAMEL
    register_bulk<moodycamel_queue>();
    register_bulk<moodycamel_queue_tokens>();
#endif
  });
}
