// SPDX-License-Identifier: BSL-1.0
// The one measuring loop every queue competitor runs through, the registration of scenarios,
// and a reporter that ends the run with a comparison table (ours / each peer) and a CSV.
//
// Every measurement verifies what it received: each consumer pops a fixed quota, and the sum of
// all popped values must equal the sum pushed. A wrong result marks the benchmark as failed and
// the binary exits with status 1.
#ifndef ASYNC_BENCH_COMMON_HARNESS_H
#define ASYNC_BENCH_COMMON_HARNESS_H

#include "registry.h"

#include <async/detail/cache.h>
#include <async/detail/wait.h>

#include <benchmark/benchmark.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#if defined(__linux__)
#include <pthread.h>
#include <sched.h>
#endif

namespace async_bench {

// ---- options ------------------------------------------------------------------------------------

struct options {
  int threads = 0;                              // N: the machine's hardware threads unless given
  std::uint64_t items = std::uint64_t(1) << 20; // items moved per measured iteration
  bool oversubscribe = false;                   // also run shapes with more threads than N
  bool pin = false;                             // pin the k-th thread of a measurement to CPU k
  std::string csv;                              // where to write the CSV (empty: no CSV)
  int rounds = 0; // > 0: every case runs this many times, ours and the peers interleaved
};

inline options& opts() {
  static options o;
  return o;
}

/// Reads and removes our own --async_* flags; the rest goes to Google Benchmark.
inline void parse_options(int& argc, char** argv) {
  int out = 1;
  for (int i = 1; i < argc; ++i) {
    const char* a = argv[i];
    auto value = [a](const char* key) -> const char* {
      const std::size_t n = std::strlen(key);
      return std::strncmp(a, key, n) == 0 ? a + n : nullptr;
    };
    if (const char* v = value("--async_threads=")) {
      opts().threads = std::atoi(v);
    } else if (const char* v = value("--async_items=")) {
      opts().items = std::strtoull(v, nullptr, 10);
    } else if (const char* v = value("--async_csv=")) {
      opts().csv = v;
    } else if (const char* v = value("--async_rounds=")) {
      opts().rounds = std::atoi(v);
    } else if (std::strcmp(a, "--async_oversubscribe") == 0) {
      opts().oversubscribe = true;
    } else if (std::strcmp(a, "--async_pin") == 0) {
      opts().pin = true;
    } else {
      argv[out++] = argv[i];
    }
  }
  argc = out;
  if (opts().threads <= 0) {
    const unsigned n = std::thread::hardware_concurrency();
    opts().threads = n == 0 ? 2 : static_cast<int>(n);
  }
}

inline bool& failed() {
  static bool f = false;
  return f;
}

inline void fail(benchmark::State& state, const std::string& what) {
  failed() = true;
  std::fprintf(stderr, "VERIFICATION FAILED: %s\n", what.c_str());
  state.SkipWithError(what.c_str());
}

// ---- waiting --------------------------------------------------------------------------------

/// The back-off every spinning adapter uses when a try call fails: 64 pauses, then a yield per
/// round (on a machine with fewer cores than threads a pure spin would starve the thread it
/// waits for); the library's own spin-then-yield, with the pause count the benchmarks had.
class spin_wait {
public:
  void operator()() { wait_.wait(); }

private:
  async::detail::spin_then_yield wait_{64};
};

/// Repeats a try call until it succeeds, backing off with spin_wait: the waiting loop of every
/// adapter that has only try calls.
template <typename Attempt>
void retry(Attempt attempt) {
  spin_wait wait;
  while (!attempt()) {
    wait();
  }
}

/// With --async_pin, binds the calling thread to CPU `k` modulo the machine's CPUs (the k-th
/// thread of a measurement: producers first, then consumers), so that a run does not depend on
/// where the scheduler happens to put the threads. Without it, or off Linux, does nothing.
inline void pin_thread(int k) {
#if defined(__linux__)
  if (!opts().pin) {
    return;
  }
  const unsigned cpus = std::thread::hardware_concurrency();
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(static_cast<int>(static_cast<unsigned>(k) % (cpus == 0 ? 1 : cpus)), &set);
  pthread_setaffinity_np(pthread_self(), sizeof set, &set);
#else
  static_cast<void>(k);
#endif
}

/// The common part of a queue adapter: its queue type, created for a capacity, and its traits
/// (queue_traits). Adapters add name(), push() and pop() (and push_bulk, pop_bulk with bulk).
template <typename Queue>
struct owning_adapter : queue_traits {
  using queue = Queue;
  static std::unique_ptr<queue> make(std::size_t capacity) {
    return std::unique_ptr<queue>(new queue(capacity));
  }
};

/// Start line for the threads of one measurement: the timer starts when it opens.
class start_line {
public:
  void wait() const {
    while (!open_.load(std::memory_order_acquire)) {
      std::this_thread::yield();
    }
  }
  void open() { open_.store(true, std::memory_order_release); }

  /// Opens the line, joins `threads`, and returns the seconds in between: the measured time.
  double open_and_join(std::vector<std::thread>& threads) {
    const auto t0 = std::chrono::steady_clock::now();
    open();
    for (auto& t : threads) {
      t.join();
    }
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }

private:
  std::atomic<bool> open_{false};
};

// ---- shapes ---------------------------------------------------------------------------------

struct shape {
  int producers;
  int consumers;
  std::string name() const {
    return std::to_string(producers) + "p" + std::to_string(consumers) + "c";
  }
};

/// 1p1c, 2p2c, 4p4c, 8p8c, 1p(N-1)c, (N-1)p1c: those that fit in N threads (all of them with
/// --async_oversubscribe).
inline std::vector<shape> throughput_shapes() {
  const int n = opts().threads;
  std::vector<shape> all = {{1, 1}, {2, 2}, {4, 4}, {8, 8}};
  if (n > 2) {
    all.push_back({1, n - 1});
    all.push_back({n - 1, 1});
  }
  std::vector<shape> out;
  for (const shape& s : all) {
    const bool fits = s.producers + s.consumers <= n;
    const bool seen = std::any_of(out.begin(), out.end(), [&](const shape& o) {
      return o.producers == s.producers && o.consumers == s.consumers;
    });
    if ((fits || opts().oversubscribe) && !seen) {
      out.push_back(s);
    }
  }
  return out;
}

// ---- the throughput loop ----------------------------------------------------------------------

/// The quotas of one throughput measurement: `items` rounded to a multiple of P*C so that every
/// thread has an exact share. Producer p sends the values (p << producer_shift) + 1, + 2, ...,
/// + per_producer: never 0 (atomic_queue reserves it), and each value names its producer and its
/// place in that producer's order, which the consumers check (per-producer FIFO).
constexpr int producer_shift = 40;
constexpr std::uint64_t sequence_mask = (std::uint64_t(1) << producer_shift) - 1;

struct quotas {
  std::uint64_t per_producer;
  std::uint64_t per_consumer;
  std::uint64_t total;
  std::uint64_t expected_sum; // modulo 2^64, as the consumers add

  explicit quotas(const shape& sh) {
    const std::uint64_t pc = static_cast<std::uint64_t>(sh.producers * sh.consumers);
    const std::uint64_t per_pair = std::max<std::uint64_t>(1, opts().items / pc);
    per_producer = per_pair * static_cast<std::uint64_t>(sh.consumers); // far below 2^40
    per_consumer = per_pair * static_cast<std::uint64_t>(sh.producers);
    total = per_producer * static_cast<std::uint64_t>(sh.producers);
    expected_sum = 0;
    for (int p = 0; p < sh.producers; ++p) {
      expected_sum += first_value(p) * per_producer + per_producer * (per_producer - 1) / 2;
    }
  }

  static std::uint64_t first_value(int producer) {
    return (static_cast<std::uint64_t>(producer) << producer_shift) + 1;
  }
};

/// One consumer's check of per-producer FIFO: counts the values that arrive after a newer value
/// of the same producer (each such arrival is one violation: 1 3 2 counts one, 1 2 3 none).
class fifo_check {
public:
  explicit fifo_check(int producers) : last_(static_cast<std::size_t>(producers), 0) {}

  void see(std::uint64_t v) {
    const std::uint64_t producer = v >> producer_shift;
    const std::uint64_t sequence = v & sequence_mask;
    if (producer >= last_.size()) {
      return; // not a value any producer sent: the sum check reports it
    }
    std::uint64_t& last = last_[static_cast<std::size_t>(producer)];
    violations_ += sequence < last ? 1 : 0;
    last = sequence;
  }

  std::uint64_t violations() const { return violations_; }

private:
  std::vector<std::uint64_t> last_;
  std::uint64_t violations_ = 0;
};

/// Per-producer FIFO tallies of every case, by benchmark name: violations and values checked.
struct fifo_tally {
  std::uint64_t violations = 0;
  std::uint64_t checked = 0;
};

inline std::map<std::string, fifo_tally>& fifo_tallies() {
  static std::map<std::string, fifo_tally> t;
  return t;
}

/// The name of the case running now (set by add_case's wrapper; benchmarks run one at a time).
inline std::string& current_case() {
  static std::string name;
  return name;
}

/// Bulk calls: the adapter's push_bulk / pop_bulk, in batches of up to `batch` values (an
/// adapter without them is only ever measured with batch == 1), at most max_batch.
constexpr std::size_t max_batch = 64;

template <typename Adapter>
void push_batch(typename Adapter::queue& q, const std::uint64_t* v, std::size_t n) {
  if constexpr (Adapter::bulk) {
    Adapter::push_bulk(q, v, n);
  } else {
    for (std::size_t k = 0; k < n; ++k) {
      Adapter::push(q, v[k]);
    }
  }
}

/// The measuring loop: P producers push, C consumers pop, `items` values per iteration, one at a
/// time (batch == 1) or in bulk calls of up to `batch`. With single calls each consumer pops an
/// exact quota; with bulk calls the consumers share the total, each taking what it gets. The
/// sum of what was popped must be the sum of what was pushed. Measured from the start line to
/// the last join.
template <typename Adapter>
void queue_throughput(benchmark::State& state, shape sh, std::size_t capacity,
                      std::size_t batch = 1) {
  const quotas quota(sh);
  const std::uint64_t per_producer = quota.per_producer;
  const std::uint64_t per_consumer = quota.per_consumer;
  const std::uint64_t total = quota.total;
  const std::uint64_t expected_sum = quota.expected_sum;

  for (auto _ : state) {
    auto q = Adapter::make(capacity);
    start_line start;
    std::vector<std::uint64_t> sums(static_cast<std::size_t>(sh.consumers), 0);
    std::vector<std::uint64_t> violations(static_cast<std::size_t>(sh.consumers), 0);
    std::atomic<std::uint64_t> taken{0}; // bulk consumers: values taken so far, by all
    std::vector<std::thread> threads;
    for (int p = 0; p < sh.producers; ++p) {
      threads.emplace_back([&, p] {
        pin_thread(p);
        start.wait();
        std::uint64_t next = quotas::first_value(p);
        const std::uint64_t end = next + per_producer;
        if (batch == 1) {
          for (; next < end; ++next) {
            Adapter::push(*q, next);
          }
          return;
        }
        std::uint64_t values[max_batch]; // on the stack, as a caller's batch would be
        while (next < end) {
          const auto n = static_cast<std::size_t>(std::min<std::uint64_t>(batch, end - next));
          for (std::size_t k = 0; k < n; ++k) {
            values[k] = next + k;
          }
          push_batch<Adapter>(*q, values, n);
          next += n;
        }
      });
    }
    for (int c = 0; c < sh.consumers; ++c) {
      threads.emplace_back([&, c] {
        pin_thread(sh.producers + c);
        start.wait();
        std::uint64_t sum = 0;
        fifo_check fifo(sh.producers);
        if (batch == 1) {
          for (std::uint64_t i = 0; i < per_consumer; ++i) {
            const std::uint64_t v = Adapter::pop(*q);
            fifo.see(v);
            sum += v;
          }
        } else if constexpr (Adapter::bulk) {
          std::uint64_t values[max_batch];
          spin_wait wait;
          while (taken.load(std::memory_order_relaxed) < total) {
            const std::size_t n = Adapter::pop_bulk(*q, values, batch);
            if (n == 0) {
              wait();
              continue;
            }
            for (std::size_t k = 0; k < n; ++k) {
              fifo.see(values[k]);
              sum += values[k];
            }
            taken.fetch_add(n, std::memory_order_relaxed);
          }
        }
        sums[static_cast<std::size_t>(c)] = sum;
        violations[static_cast<std::size_t>(c)] = fifo.violations();
      });
    }
    state.SetIterationTime(start.open_and_join(threads));
    const std::uint64_t sum = std::accumulate(sums.begin(), sums.end(), std::uint64_t(0));
    if (sum != expected_sum) {
      fail(state, std::string(Adapter::name()) + " " + sh.name() + (batch > 1 ? " bulk" : "") +
                      ": sum " + std::to_string(sum) + " != " + std::to_string(expected_sum));
      return;
    }
    fifo_tally& tally = fifo_tallies()[current_case()];
    tally.violations += std::accumulate(violations.begin(), violations.end(), std::uint64_t(0));
    tally.checked += total;
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * total));
  state.counters["threads"] = sh.producers + sh.consumers;
}

/// One value bounces between two threads through two queues; `items` round trips per
/// iteration. Reported as round trips per second and ns per round trip.
template <typename Adapter>
void ping_pong(benchmark::State& state, std::size_t capacity) {
  const std::uint64_t rounds = std::max<std::uint64_t>(1, opts().items / 16);
  for (auto _ : state) {
    auto there = Adapter::make(capacity);
    auto back = Adapter::make(capacity);
    start_line start;
    std::thread echo([&] {
      pin_thread(1);
      start.wait();
      for (std::uint64_t i = 0; i < rounds; ++i) {
        Adapter::push(*back, Adapter::pop(*there) + 1);
      }
    });
    pin_thread(0);
    const auto t0 = std::chrono::steady_clock::now();
    start.open();
    std::uint64_t v = 1;
    for (std::uint64_t i = 0; i < rounds; ++i) {
      Adapter::push(*there, v);
      v = Adapter::pop(*back);
    }
    echo.join();
    const auto t1 = std::chrono::steady_clock::now();
    state.SetIterationTime(std::chrono::duration<double>(t1 - t0).count());
    if (v != rounds + 1) {
      fail(state, std::string(Adapter::name()) + " ping-pong: " + std::to_string(v));
      return;
    }
    state.counters["ns_per_round_trip"] =
        std::chrono::duration<double, std::nano>(t1 - t0).count() / static_cast<double>(rounds);
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * rounds));
}

// ---- registration -----------------------------------------------------------------------------

/// Benchmark names are "<scenario>/<parameters>/<implementation>"; the reporter groups rows by
/// everything before the last '/'.
inline std::string bench_name(const std::string& scenario, const std::string& params,
                              const char* impl) {
  return scenario + "/" + params + "/" + impl;
}

inline void configure(benchmark::internal::Benchmark* b) {
  b->UseManualTime()->Unit(benchmark::kMillisecond);
}

/// A measurement waiting to be registered (with --async_rounds, all cases are known first).
struct pending_case {
  std::string name;
  std::function<void(benchmark::State&)> run;
};

inline std::vector<pending_case>& pending_cases() {
  static std::vector<pending_case> cases;
  return cases;
}

inline void register_case(const pending_case& c) {
  const std::string name = c.name;
  const std::function<void(benchmark::State&)> run = c.run;
  configure(benchmark::RegisterBenchmark(name.c_str(), [name, run](benchmark::State& st) {
    current_case() = name;
    run(st);
  }));
}

/// Adds the comparison case `name` ("<scenario>/<parameters>/<implementation>"). Without
/// --async_rounds it is registered at once (Google Benchmark runs cases in that order:
/// implementation after implementation). With --async_rounds=R, register_rounds() registers
/// every case R times: round by round, and within a round each group's implementations back to
/// back (in reverse order every other round), so that ours and each peer are measured seconds
/// apart in every round, and a machine that changes speed shifts both sides of a ratio alike.
template <typename Run>
void add_case(const std::string& name, Run run) {
  pending_case c{name, std::function<void(benchmark::State&)>(std::move(run))};
  if (opts().rounds > 0) {
    pending_cases().push_back(std::move(c));
  } else {
    register_case(c);
  }
}

inline void register_rounds() {
  std::vector<std::string> groups; // in order of first appearance
  std::map<std::string, std::vector<std::size_t>> members;
  const auto& cases = pending_cases();
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const std::string group = cases[i].name.substr(0, cases[i].name.rfind('/'));
    if (!members.count(group)) {
      groups.push_back(group);
    }
    members[group].push_back(i);
  }
  for (int r = 0; r < opts().rounds; ++r) {
    for (const auto& g : groups) {
      std::vector<std::size_t> order = members[g];
      if (r % 2 == 1) {
        std::reverse(order.begin(), order.end());
      }
      for (std::size_t i : order) {
        register_case(cases[i]);
      }
    }
  }
}

template <typename Adapter>
void register_throughput(const std::vector<std::size_t>& capacities) {
  for (std::size_t cap : capacities) {
    for (const shape& sh : throughput_shapes()) {
      if (Adapter::spsc && (sh.producers != 1 || sh.consumers != 1)) {
        continue; // a single-producer single-consumer queue: 1p1c only
      }
      const std::string params = (cap ? "cap:" + std::to_string(cap) + "/" : "") + sh.name();
      add_case(bench_name("throughput", params, Adapter::name()),
               [sh, cap](benchmark::State& st) { queue_throughput<Adapter>(st, sh, cap); });
    }
  }
}

/// The same with bulk calls of `batch` (the scenario "bulk<batch>").
template <typename Adapter>
void register_bulk(std::size_t batch) {
  batch = std::min(batch, max_batch);
  for (const shape& sh : throughput_shapes()) {
    add_case(bench_name("bulk" + std::to_string(batch), sh.name(), Adapter::name()),
             [sh, batch](benchmark::State& st) { queue_throughput<Adapter>(st, sh, 0, batch); });
  }
}

template <typename Adapter>
void register_ping_pong(std::size_t capacity) {
  add_case(bench_name("ping_pong", "round_trip", Adapter::name()),
           [capacity](benchmark::State& st) { ping_pong<Adapter>(st, capacity); });
}

// ---- run context ---------------------------------------------------------------------------

#ifndef ASYNC_BENCH_COMMIT
#define ASYNC_BENCH_COMMIT "unknown"
#endif
#ifndef ASYNC_BENCH_FLAGS
#define ASYNC_BENCH_FLAGS "unknown"
#endif

/// What a result depends on: CPU, cores, compiler, flags, commit (one line each, prefixed).
inline std::string context(const char* prefix) {
  std::string cpu = "unknown";
  // AArch64 kernels often name no model: the implementer and part numbers instead.
  std::string implementer;
  std::string part;
  bool x86_info = false;
  std::ifstream info("/proc/cpuinfo");
  for (std::string line; std::getline(info, line);) {
    const auto colon = line.find(':');
    if (colon == std::string::npos) {
      continue;
    }
    const auto start = line.find_first_not_of(" \t", colon + 1);
    const std::string value = start == std::string::npos ? std::string() : line.substr(start);
    const auto is = [&line](const char* key) {
      return line.compare(0, std::strlen(key), key) == 0;
    };
    if (is("vendor_id")) {
      x86_info = true;
    } else if (cpu == "unknown" && (is("model name") || is("Hardware"))) {
      cpu = value;
    } else if (implementer.empty() && is("CPU implementer")) {
      implementer = value;
    } else if (part.empty() && is("CPU part")) {
      part = value;
    }
  }
  if (cpu == "unknown" && !implementer.empty()) {
    cpu = "ARM CPU, implementer " + implementer + ", part " + part;
  }
#if !defined(ASYNC_ARCH_X86_64) && !defined(ASYNC_ARCH_X86)
  // An x86 /proc/cpuinfo seen by a non-x86 binary: qemu-user, whose timings are no claims.
  if (x86_info) {
    cpu += " (the host of an emulator: timings say nothing about the target)";
  }
#else
  (void)x86_info;
#endif
  std::string out;
  out += std::string(prefix) + "cpu: " + cpu + "\n";
  out += std::string(prefix) +
         "hardware threads: " + std::to_string(std::thread::hardware_concurrency()) +
         ", N used: " + std::to_string(opts().threads) + "\n";
#if defined(__clang__)
  out += std::string(prefix) + "compiler: clang " __clang_version__ "\n";
#elif defined(__GNUC__)
  out += std::string(prefix) + "compiler: g++ " __VERSION__ "\n";
#endif
  // What the library chose for this target: where ARM boards and x86 differ.
  out += std::string(prefix) + "platform: " ASYNC_ARCH_NAME ", cache line " +
         std::to_string(async::detail::cache_line_size) + " bytes, spin hint " +
         async::detail::cpu_pause_name() + ", 64-bit atomics " +
         (std::atomic<std::uint64_t>::is_always_lock_free ? "lock-free" : "NOT lock-free") + "\n";
  out += std::string(prefix) + "flags: " ASYNC_BENCH_FLAGS "\n";
  out += std::string(prefix) + "commit: " ASYNC_BENCH_COMMIT "\n";
  return out;
}

// ---- the comparison table ---------------------------------------------------------------------

/// Median of a non-empty list.
inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/// Console output as usual, then one table per scenario: the median rate (or cost) of every
/// implementation and how many times better ours (the first implementation whose name starts
/// with "async::") is than each peer. With --async_rounds the ratio is the median of the
/// per-round ratios, with their range; then the per-producer FIFO violations of every case.
class table_reporter : public benchmark::ConsoleReporter {
public:
  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    // One call per registered case: its runs, then (with repetitions) their aggregates. The
    // case contributes one value: the median aggregate, else the median of its runs.
    std::string name;
    std::string threads;
    std::vector<double> values;
    double aggregate_median = -1;
    for (const Run& r : runs) {
      if (r.error_occurred) {
        return;
      }
      const bool aggregate = !r.aggregate_name.empty();
      if (aggregate && r.aggregate_name != "median") {
        continue;
      }
      // A scenario reports either a rate (items_per_second) or a cost (cpu_per_wall, wait_us).
      auto it = r.counters.end();
      for (const char* cost : {"cpu_per_wall", "wait_us"}) {
        if (it == r.counters.end()) {
          it = r.counters.find(cost);
          if (it != r.counters.end()) {
            metric_ = cost;
          }
        }
      }
      if (it == r.counters.end()) {
        it = r.counters.find("items_per_second");
      }
      if (it == r.counters.end()) {
        continue;
      }
      name = r.run_name.function_name;
      threads = r.run_name.threads;
      if (aggregate) {
        aggregate_median = it->second.value;
      } else {
        values.push_back(it->second.value);
      }
    }
    if (name.empty() || (values.empty() && aggregate_median < 0)) {
      return;
    }
    const std::size_t cut = name.rfind('/');
    std::string group = name.substr(0, cut);
    if (!threads.empty()) {
      group += "/" + threads; // benchmarks run on Google Benchmark's threads
    }
    const std::string impl = name.substr(cut + 1);
    if (!rows_.count(group)) {
      order_.push_back(group);
    }
    rows_[group][impl].push_back(aggregate_median >= 0 ? aggregate_median : median(values));
    names_[group][impl] = name;
    if (std::find(impls_.begin(), impls_.end(), impl) == impls_.end()) {
      impls_.push_back(impl);
    }
  }

  /// How many values (rounds) the case `group`/`impl` contributed.
  std::size_t values_of(const std::string& group, const std::string& impl) const {
    const auto g = rows_.find(group);
    if (g == rows_.end()) {
      return 0;
    }
    const auto i = g->second.find(impl);
    return i == g->second.end() ? 0 : i->second.size();
  }

  void Finalize() override {
    ConsoleReporter::Finalize();
    print_table();
    print_fifo();
    write_csv();
  }

private:
  struct ratio_summary {
    double median = 0;
    double low = 0;
    double high = 0;
    std::size_t rounds = 0;
  };

  bool rate() const { return metric_ == "items/s"; }

  std::string ours() const {
    for (const auto& i : impls_) {
      if (i.compare(0, 7, "async::") == 0) {
        return i;
      }
    }
    return {};
  }

  /// Ours vs `peer` in one case, round by round ("how many times better ours is": a higher
  /// rate, or a lower cost); rounds = 0 when there is nothing to compare.
  ratio_summary ratio(const std::map<std::string, std::vector<double>>& row,
                      const std::string& peer) const {
    auto our = row.find(ours());
    if (our == row.end()) {
      // A row without the first of ours (another scenario's class) uses its own async:: entry.
      our = std::find_if(row.begin(), row.end(),
                         [](const auto& e) { return e.first.compare(0, 7, "async::") == 0; });
    }
    const auto it = row.find(peer);
    ratio_summary out;
    if (our == row.end() || it == row.end() || it == our) {
      return out;
    }
    std::vector<double> ratios;
    for (std::size_t r = 0; r < std::min(our->second.size(), it->second.size()); ++r) {
      const double a = our->second[r];
      const double b = it->second[r];
      if (a > 0 && b > 0) {
        ratios.push_back(rate() ? a / b : b / a);
      }
    }
    if (ratios.empty()) {
      return out;
    }
    out.median = median(ratios);
    out.low = *std::min_element(ratios.begin(), ratios.end());
    out.high = *std::max_element(ratios.begin(), ratios.end());
    out.rounds = ratios.size();
    return out;
  }

  void print_table() const {
    if (order_.empty()) {
      return;
    }
    const std::string our = ours();
    const bool rounds = opts().rounds > 1;
    const char* what =
        rate() ? "Million items per second"
        : metric_ == "wait_us"
            ? "Microseconds an outside post waited (lower is better; ratio = peer / ours)"
            : "CPU seconds per wall second (lower is better; ratio = peer / ours)";
    std::printf("\n%s (median%s), and ours / peer%s:\n\n| case |", what,
                rounds ? " of the rounds" : "",
                rounds ? " (median of the per-round ratios, and their range)" : "");
    for (const auto& i : impls_) {
      std::printf(" %s |", i.c_str());
    }
    for (const auto& i : impls_) {
      if (i != our && !our.empty()) {
        std::printf(" vs %s |", i.c_str());
      }
    }
    std::printf("\n|---|");
    for (std::size_t k = 0; k < impls_.size() * 2 - (our.empty() ? impls_.size() : 1); ++k) {
      std::printf("---|");
    }
    std::printf("\n");
    for (const auto& g : order_) {
      const auto& row = rows_.at(g);
      std::printf("| %s |", g.c_str());
      for (const auto& i : impls_) {
        const auto it = row.find(i);
        if (it == row.end()) {
          std::printf(" - |");
        } else {
          const double m = median(it->second);
          std::printf(rate()                 ? " %.2f |"
                      : metric_ == "wait_us" ? " %.1f |"
                                             : " %.4f |",
                      rate() ? m / 1e6 : m);
        }
      }
      for (const auto& i : impls_) {
        if (i == our || our.empty()) {
          continue;
        }
        const ratio_summary r = ratio(row, i);
        if (r.rounds == 0) {
          std::printf(" - |");
        } else if (r.rounds == 1) {
          std::printf(" %.2fx |", r.median);
        } else {
          std::printf(" %.2fx (%.2f-%.2f) |", r.median, r.low, r.high);
        }
      }
      std::printf("\n");
    }
    std::fflush(stdout);
  }

  /// The per-producer FIFO table: for every case that checks it, each implementation's count
  /// of values received after a newer value of the same producer, out of the values checked.
  void print_fifo() const {
    const auto& tallies = fifo_tallies();
    if (tallies.empty()) {
      return;
    }
    std::printf("\nPer-producer FIFO violations (a value received after a newer value of its "
                "producer, by the same consumer), of the values checked:\n\n| case |");
    for (const auto& i : impls_) {
      std::printf(" %s |", i.c_str());
    }
    std::printf("\n|---|");
    for (std::size_t k = 0; k < impls_.size(); ++k) {
      std::printf("---|");
    }
    std::printf("\n");
    for (const auto& g : order_) {
      const auto& names = names_.at(g);
      bool any = false;
      for (const auto& kv : names) {
        any = any || tallies.count(kv.second) != 0;
      }
      if (!any) {
        continue;
      }
      std::printf("| %s |", g.c_str());
      for (const auto& i : impls_) {
        const auto n = names.find(i);
        const auto t = n == names.end() ? tallies.end() : tallies.find(n->second);
        if (t == tallies.end() || t->second.checked == 0) {
          std::printf(" - |");
        } else if (t->second.violations == 0) {
          std::printf(" 0 |");
        } else {
          std::printf(" %llu (%.2g%%) |", static_cast<unsigned long long>(t->second.violations),
                      100.0 * static_cast<double>(t->second.violations) /
                          static_cast<double>(t->second.checked));
        }
      }
      std::printf("\n");
    }
    std::fflush(stdout);
  }

  /// One line per case and implementation: the median value; for a peer, ours / it (median of
  /// the rounds, lowest, highest, rounds); the FIFO violations and values checked (empty where
  /// the case does not check).
  void write_csv() const {
    if (opts().csv.empty()) {
      return;
    }
    std::ofstream out(opts().csv);
    out << context("# ");
    out << "case,implementation,value,metric,ours_vs_this,ours_vs_this_low,ours_vs_this_high,"
           "rounds,fifo_violations,fifo_checked\n";
    const auto& tallies = fifo_tallies();
    for (const auto& g : order_) {
      const auto& row = rows_.at(g);
      for (const auto& kv : row) {
        out << g << ',' << kv.first << ',' << median(kv.second) << ',' << metric_ << ',';
        const ratio_summary r = ratio(row, kv.first);
        if (r.rounds > 0) {
          out << r.median << ',' << r.low << ',' << r.high << ',' << r.rounds;
        } else {
          out << ",,," << kv.second.size();
        }
        const auto t = tallies.find(names_.at(g).at(kv.first));
        if (t != tallies.end()) {
          out << ',' << t->second.violations << ',' << t->second.checked;
        } else {
          out << ",,";
        }
        out << '\n';
      }
    }
  }

  std::string metric_ = "items/s";
  std::vector<std::string> order_;
  std::vector<std::string> impls_;
  std::map<std::string, std::map<std::string, std::vector<double>>> rows_; // value per round
  std::map<std::string, std::map<std::string, std::string>> names_;        // benchmark names
};

/// main() of every scenario binary: our flags, Google Benchmark's flags, the registrations, the
/// run with the table, and a failing exit status if any result was wrong.
template <typename Register>
int run_main(int argc, char** argv, Register register_all) {
  parse_options(argc, argv);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) {
    return 2;
  }
  std::printf("%sasync bench: %llu items per iteration\n", context("").c_str(),
              static_cast<unsigned long long>(opts().items));
  register_all();
  register_rounds();
  table_reporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();
  return failed() ? 1 : 0;
}

} // namespace async_bench

#endif // ASYNC_BENCH_COMMON_HARNESS_H
