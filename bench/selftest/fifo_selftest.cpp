// SPDX-License-Identifier: BSL-1.0
// The harness's own test: the per-producer FIFO column must be able to show a violation, and the
// interleaved rounds must give every case one value per round. Two stand-in queues under a
// mutex run through the real measuring loop: a deque (FIFO: no violation may be counted) and
// one that hands out the newest of the first two values every other pop (each swap one
// violation). The exit status says whether the harness saw what it had to see.
#include "deque_adapters.h"

int main(int argc, char** argv) {
  using namespace async_bench;
  parse_options(argc, argv);
  opts().rounds = 3;
  opts().items = 20000;
  benchmark::Initialize(&argc, argv);
  const shape one_to_one{1, 1};
  const shape two_to_one{2, 1};
  for (const shape& sh : {one_to_one, two_to_one}) {
    add_case(bench_name("selftest", sh.name(), "async::fifo deque"),
             [sh](benchmark::State& st) { queue_throughput<deque_adapter<false>>(st, sh, 0); });
    add_case(bench_name("selftest", sh.name(), "swapping deque"),
             [sh](benchmark::State& st) { queue_throughput<deque_adapter<true>>(st, sh, 0); });
  }
  register_rounds();
  table_reporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();

  int errors = failed() ? 1 : 0;
  for (const auto& kv : fifo_tallies()) {
    const bool swapping = kv.first.find("swapping") != std::string::npos;
    const bool ok =
        kv.second.checked > 0 && (swapping ? kv.second.violations > 0 : kv.second.violations == 0);
    std::printf("selftest: %s: %llu violations of %llu values: %s\n", kv.first.c_str(),
                static_cast<unsigned long long>(kv.second.violations),
                static_cast<unsigned long long>(kv.second.checked), ok ? "as expected" : "WRONG");
    errors += ok ? 0 : 1;
  }
  if (fifo_tallies().size() != 4) {
    std::printf("selftest: %zu cases tallied, expected 4\n", fifo_tallies().size());
    ++errors;
  }
  for (const char* group : {"selftest/1p1c", "selftest/2p1c"}) {
    for (const char* impl : {"async::fifo deque", "swapping deque"}) {
      const std::size_t n = reporter.values_of(group, impl);
      if (n != 3) {
        std::printf("selftest: %s/%s has %zu rounds, expected 3\n", group, impl, n);
        ++errors;
      }
    }
  }
  return errors == 0 ? 0 : 1;
}
