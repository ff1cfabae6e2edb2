// SPDX-License-Identifier: BSL-1.0
// The harness's own test: the per-producer FIFO column must be able to show a violation, the
// check of whole elements must catch a damaged one, for every element type, and the interleaved
// rounds must give every case one value per round. Stand-in queues under a mutex run through the
// real measuring loop: a deque (FIFO: no violation may be counted), one that hands out the newest
// of the first two values every other pop (each swap one violation; as one of ours, whose FIFO
// is strict, it must fail), and one that damages elements (its cases must fail: for uint64_t a
// lost and a duplicated value that leave the sum as it was). Only those may fail. The exit
// status says whether the harness saw what it had to see.
#include "deque_adapters.h"

#include <algorithm>
#include <type_traits>

namespace {

template <typename T>
void add_cases(const std::string& type) {
  using namespace async_bench;
  const shape one_to_one{1, 1};
  const shape two_to_one{2, 1};
  for (const shape& sh : {one_to_one, two_to_one}) {
    const std::string params = type + "/" + sh.name();
    add_case(bench_name("selftest", params, "async::fifo deque"),
             [sh](benchmark::State& st) { queue_throughput<deque_adapter<false, T>>(st, sh, 0); });
    add_case(bench_name("selftest", params, "swapping deque"),
             [sh](benchmark::State& st) { queue_throughput<deque_adapter<true, T>>(st, sh, 0); });
    add_case(bench_name("selftest", params, "damaging deque"), [sh](benchmark::State& st) {
      queue_throughput<deque_adapter<false, T, true>>(st, sh, 0);
    });
    if (std::is_same<T, std::uint64_t>::value) {
      // One of ours that breaks FIFO: its cases must fail (ours is strict FIFO).
      add_case(bench_name("selftest", params, "async::swapping deque"), [sh](benchmark::State& st) {
        queue_throughput<deque_adapter<true, T, false, true>>(st, sh, 0);
      });
    }
  }
}

} // namespace

int main(int argc, char** argv) {
  using namespace async_bench;
  opts().info = binary_info{"the harness's own test"};
  parse_options(argc, argv);
  opts().rounds = 3;
  opts().items = 20000;
  benchmark::Initialize(&argc, argv);
  add_cases<std::uint64_t>("u64");
  add_cases<payload64>("struct64");
  add_cases<std::string>("string");
  register_rounds();
  table_reporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();

  int errors = 0;
  std::size_t tallied = 0;
  for (const auto& kv : fifo_tallies()) {
    if (kv.first.find("damaging") != std::string::npos ||
        kv.first.find("async::swapping") != std::string::npos) {
      continue; // failed before tallying
    }
    ++tallied;
    const bool swapping = kv.first.find("swapping") != std::string::npos;
    const bool ok =
        kv.second.checked > 0 && (swapping ? kv.second.violations > 0 : kv.second.violations == 0);
    std::printf("selftest: %s: %llu violations of %llu values: %s\n", kv.first.c_str(),
                static_cast<unsigned long long>(kv.second.violations),
                static_cast<unsigned long long>(kv.second.checked), ok ? "as expected" : "WRONG");
    errors += ok ? 0 : 1;
  }
  if (tallied != 12) {
    std::printf("selftest: %zu FIFO and swapping cases tallied, expected 12\n", tallied);
    ++errors;
  }
  // Every damaging case failed in every round, as did every case of ours that swaps, and
  // nothing else failed.
  const auto& failures = failed_cases();
  const auto count = [&failures](const char* what) {
    return static_cast<std::size_t>(
        std::count_if(failures.begin(), failures.end(), [what](const std::string& name) {
          return name.find(what) != std::string::npos;
        }));
  };
  const std::size_t damaged = count("damaging deque");
  const std::size_t unordered = count("async::swapping deque");
  const std::size_t squares = count("u64/1p1c/damaging") + count("u64/2p1c/damaging");
  std::printf("selftest: %zu failed measurements: %zu of the damaging deque (expected 18, 6 of "
              "them found by the sum of squares alone: %zu), %zu of ours swapping (expected "
              "6)\n",
              failures.size(), damaged, squares, unordered);
  if (damaged != 18 || unordered != 6 || squares != 6 || failures.size() != 24) {
    ++errors;
  }
  for (const char* type : {"u64", "struct64", "string"}) {
    for (const char* shape : {"1p1c", "2p1c"}) {
      const std::string group = std::string("selftest/") + type + "/" + shape;
      for (const char* impl : {"async::fifo deque", "swapping deque"}) {
        const std::size_t n = reporter.values_of(group, impl);
        if (n != 3) {
          std::printf("selftest: %s/%s has %zu rounds, expected 3\n", group.c_str(), impl, n);
          ++errors;
        }
      }
    }
  }
  return errors == 0 ? 0 : 1;
}
