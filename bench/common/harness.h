// SPDX-License-Identifier: BSL-1.0
// The one measuring loop every queue competitor runs through, the registration of scenarios,
// and a reporter that ends the run with a comparison table (ours / each peer) and a CSV.
//
// Every measurement verifies what it received: each consumer pops a fixed quota, and the sum of
// all popped values must equal the sum pushed. A wrong result marks the benchmark as failed and
// the binary exits with status 1.
#ifndef ASYNC_BENCH_COMMON_HARNESS_H
#define ASYNC_BENCH_COMMON_HARNESS_H

#include "elements.h"
#include "registry.h"

#include <async/detail/backoff.h>
#include <async/detail/cache.h>

#include <benchmark/benchmark.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <numeric>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

#if defined(__linux__)
#include <pthread.h>
#include <sched.h>
#endif

namespace async_bench {

// ---- options ------------------------------------------------------------------------------------

/// What a scenario binary is: shown by --help and in the summary.
struct binary_info {
  const char* what;           // one line: the question it answers
  const char* unit = "items"; // what its rate counts (items, tasks, round trips...)
  bool element_types = false; // takes --async_type (the queue scenarios)
};

struct options {
  int threads = 0;                              // N: the machine's hardware threads unless given
  std::uint64_t items = std::uint64_t(1) << 20; // items moved per measured iteration
  bool oversubscribe = false;                   // also run shapes with more threads than N
  bool pin = false;                             // pin the k-th thread of a measurement to CPU k
  std::string csv;                              // where to write the CSV (empty: no CSV)
  int rounds = 0;           // > 0: every case runs this many times, ours and the peers interleaved
  std::string type = "u64"; // the element type of the queue scenarios
  bool full = false;        // print every measurement and the per-case tables
  bool filtered = false;    // --benchmark_filter was given: not every case runs
  std::string binary = "bench"; // the binary's name (argv[0] without its folder)
  binary_info info{""};
};

inline options& opts() {
  static options o;
  return o;
}

/// The element types of --async_type: the flag's value and the type's name in tables.
inline const char* element_type_name(const std::string& flag) {
  return flag == "u64" ? "uint64_t" : flag == "struct64" ? "64-byte struct" : "std::string";
}

/// --help: our flags with their defaults, then the Google Benchmark flags worth knowing.
inline void print_help() {
  const options defaults;
  std::printf(
      "%s: %s\n\n"
      "Usage: %s [flags]\n\n"
      "Flags of this benchmark (defaults in brackets):\n"
      "  --async_rounds=R       run every case R times, ours and the peers back to back in each\n"
      "                         round; tables give medians and the range of the per-round\n"
      "                         ratios [0: each case once; the bench preset passes 5]\n"
      "  --async_threads=N      the thread count the shapes are built for [hardware threads: %u]\n"
      "  --async_items=K        items moved per measured iteration [%llu]\n"
      "  --async_oversubscribe  also the shapes with more threads than N%s\n"
      "  --async_pin            pin the k-th thread of a measurement to CPU k [off]\n"
      "  --async_csv=FILE       save the results: FILE (CSV), and beside it FILE's name with\n"
      "                         .md (the summary) and .meta.json (machine, commit, flags, type)\n"
      "  --async_full           also print every measurement and the full per-case tables\n",
      opts().binary.c_str(), opts().info.what, opts().binary.c_str(),
      std::thread::hardware_concurrency(), static_cast<unsigned long long>(defaults.items),
      opts().info.element_types ? " (without it, 1p1c,\n                         2p2c and 4p4c "
                                  "still run where they do not fit, marked *)"
                                : "");
  if (opts().info.element_types) {
    std::printf(
        "  --async_type=T         the element type: u64 (uint64_t), struct64 (a 64-byte\n"
        "                         trivially copyable struct) or string (std::string of 24\n"
        "                         characters, heap-allocated) [u64]; every value is checked\n"
        "                         (exactly once, per-producer FIFO, whole) for every type\n");
  }
  std::printf(
      "\nGoogle Benchmark's flags that help here (all of them: --benchmark_help):\n"
      "  --benchmark_filter=REGEX     only the cases whose name matches, e.g. '/1p1c/'\n"
      "  --benchmark_list_tests       list the cases and exit\n"
      "  --benchmark_min_time=S       seconds per measurement [0.5; the bench preset: 0.2]\n"
      "  --benchmark_out=FILE --benchmark_out_format=json   every measurement, raw\n");
}

[[noreturn]] inline void usage_error(const std::string& what) {
  std::fprintf(stderr, "%s: %s (see --help)\n", opts().binary.c_str(), what.c_str());
  std::exit(2);
}

/// A whole positive number from a flag's value, or a clear error.
inline std::uint64_t positive_number(const char* flag, const char* v, std::uint64_t most) {
  char* end = nullptr;
  errno = 0;
  const unsigned long long n = std::strtoull(v, &end, 10);
  if (*v < '0' || *v > '9' || end == nullptr || *end != '\0' || errno != 0 || n == 0 || n > most) {
    usage_error(std::string(flag) + " takes a whole number from 1 to " + std::to_string(most) +
                ", not '" + v + "'");
  }
  return n;
}

/// Reads and removes our own --async_* flags; the rest goes to Google Benchmark. A misspelt or
/// out-of-range flag of ours stops the binary with a message (exit status 2). --help (or -h)
/// prints our flags and exits; --benchmark_help is Google Benchmark's own list.
inline void parse_options(int& argc, char** argv) {
  if (argc > 0 && argv[0] != nullptr) {
    const std::string path = argv[0];
    opts().binary = path.substr(path.find_last_of('/') + 1);
  }
  int out = 1;
  bool help = false;
  for (int i = 1; i < argc; ++i) {
    const char* a = argv[i];
    auto value = [a](const char* key) -> const char* {
      const std::size_t n = std::strlen(key);
      return std::strncmp(a, key, n) == 0 ? a + n : nullptr;
    };
    if (const char* v = value("--async_threads=")) {
      opts().threads = static_cast<int>(positive_number("--async_threads", v, 4096));
    } else if (const char* v = value("--async_items=")) {
      // (A producer's sequence has 40 bits, and the sums must not wrap per producer: 2^32 items
      // is far beyond any measurement.)
      opts().items = positive_number("--async_items", v, std::uint64_t(1) << 32);
    } else if (const char* v = value("--async_csv=")) {
      if (*v == '\0') {
        usage_error("--async_csv takes a file name");
      }
      opts().csv = v;
    } else if (const char* v = value("--async_rounds=")) {
      opts().rounds = static_cast<int>(positive_number("--async_rounds", v, 1000));
    } else if (const char* v = value("--async_type=")) {
      opts().type = v;
      if (opts().type != "u64" && opts().type != "struct64" && opts().type != "string") {
        usage_error("--async_type is u64, struct64 or string, not '" + opts().type + "'");
      }
    } else if (std::strcmp(a, "--async_oversubscribe") == 0) {
      opts().oversubscribe = true;
    } else if (std::strcmp(a, "--async_pin") == 0) {
      opts().pin = true;
    } else if (std::strcmp(a, "--async_full") == 0) {
      opts().full = true;
    } else if (std::strcmp(a, "--help") == 0 || std::strcmp(a, "-h") == 0) {
      help = true;
    } else if (std::strcmp(a, "--benchmark_help") == 0) {
      argv[out++] = const_cast<char*>("--help"); // Google Benchmark's list of its flags
    } else if (std::strncmp(a, "--async", 7) == 0) {
      usage_error(std::string("unknown flag ") + a);
    } else {
      opts().filtered = opts().filtered || std::strncmp(a, "--benchmark_filter", 18) == 0;
      argv[out++] = argv[i];
    }
  }
  argc = out;
  if (help) {
    print_help();
    std::exit(0);
  }
  if (opts().type != "u64" && !opts().info.element_types) {
    // (ASYNC_BENCH_ARGS gives the same flags to every binary: not an error here.)
    std::printf("%s: --async_type ignored: this benchmark moves its own tasks or messages\n",
                opts().binary.c_str());
    opts().type = "u64";
  }
  if (opts().threads <= 0) {
    const unsigned n = std::thread::hardware_concurrency();
    opts().threads = n == 0 ? 2 : static_cast<int>(n);
  }
  if (!opts().csv.empty()) {
    // The folder is made here, and a file that cannot be written is said now, not after the run.
    const std::filesystem::path parent = std::filesystem::path(opts().csv).parent_path();
    std::error_code error;
    if (!parent.empty()) {
      std::filesystem::create_directories(parent, error);
    }
    const std::string& csv = opts().csv;
    if (csv.size() < 5 || csv.compare(csv.size() - 4, 4, ".csv") != 0) {
      usage_error("--async_csv: the file name ends in .csv (the summary and the context go "
                  "beside it, as .md and .meta.json), not '" +
                  csv + "'");
    }
    if (error || !std::ofstream(opts().csv, std::ios::app)) {
      usage_error("--async_csv: cannot write " + opts().csv +
                  (error ? " (" + error.message() + ")" : std::string()));
    }
  }
}

/// The hardware threads of this machine (2 when the system does not say).
inline int hardware_threads() {
  const unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 2 : static_cast<int>(n);
}

inline bool& failed() {
  static bool f = false;
  return f;
}

/// The cases whose result was wrong (the harness's own test looks at them).
inline std::vector<std::string>& failed_cases() {
  static std::vector<std::string> names;
  return names;
}

inline std::string& current_case();

inline void fail(benchmark::State& state, const std::string& what) {
  failed() = true;
  failed_cases().push_back(current_case());
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
template <typename Queue, typename T = std::uint64_t>
struct owning_adapter : queue_traits {
  using queue = Queue;
  using value_type = T;
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

/// 1p1c, 2p2c, 4p4c, 8p8c, 1p(N-1)c, (N-1)p1c: those that fit in N threads, and 2p2c and 4p4c
/// always (on a machine of few cores they are the shapes that show contention; the summary
/// marks them as oversubscribed); all of them with --async_oversubscribe.
inline std::vector<shape> throughput_shapes() {
  const int n = opts().threads;
  std::vector<shape> all = {{1, 1}, {2, 2}, {4, 4}, {8, 8}};
  if (n > 2) {
    all.push_back({1, n - 1});
    all.push_back({n - 1, 1});
  }
  std::vector<shape> out;
  for (const shape& s : all) {
    const bool always = s.producers == s.consumers && s.producers <= 4; // 1p1c to 4p4c
    const bool shown = s.producers + s.consumers <= n || always;
    const bool seen = std::any_of(out.begin(), out.end(), [&](const shape& o) {
      return o.producers == s.producers && o.consumers == s.consumers;
    });
    if ((shown || opts().oversubscribe) && !seen) {
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
  std::uint64_t expected_sum;     // modulo 2^64, as the consumers add
  std::uint64_t expected_squares; // the sum of the squares, modulo 2^64: a lost value and a
                                  // duplicate that leave the sum as it is change this

  explicit quotas(const shape& sh) {
    const std::uint64_t pc = static_cast<std::uint64_t>(sh.producers * sh.consumers);
    const std::uint64_t per_pair = std::max<std::uint64_t>(1, opts().items / pc);
    per_producer = per_pair * static_cast<std::uint64_t>(sh.consumers); // far below 2^40
    per_consumer = per_pair * static_cast<std::uint64_t>(sh.producers);
    total = per_producer * static_cast<std::uint64_t>(sh.producers);
    expected_sum = 0;
    expected_squares = 0;
    for (int p = 0; p < sh.producers; ++p) {
      // (per_producer is at most 2^32: the products below wrap only as the consumers' do.)
      expected_sum += first_value(p) * per_producer + per_producer * (per_producer - 1) / 2;
      for (std::uint64_t k = first_value(p), end = k + per_producer; k < end; ++k) {
        expected_squares += k * k;
      }
    }
  }

  static std::uint64_t first_value(int producer) {
    return (static_cast<std::uint64_t>(producer) << producer_shift) + 1;
  }
};

/// One consumer's check of per-producer FIFO: counts the values that arrive after a newer or the
/// same value of their producer (each such arrival is one violation: 1 3 2 counts one, 1 2 3
/// none, 1 1 one).
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
    violations_ += sequence <= last ? 1 : 0; // (sequences start at 1)
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

template <typename Adapter, typename T>
void push_batch(typename Adapter::queue& q, T* v, std::size_t n) {
  if constexpr (Adapter::bulk) {
    Adapter::push_bulk(q, v, n);
  } else {
    for (std::size_t k = 0; k < n; ++k) {
      Adapter::push(q, std::move(v[k]));
    }
  }
}

/// What one consumer received: the sum of the keys, the per-producer order, and the elements
/// that came back not whole (a torn or mixed-up copy).
class receipt {
public:
  explicit receipt(int producers) : fifo_(producers) {}

  template <typename T>
  void take(const T& e) {
    std::uint64_t key = 0;
    if (!element<T>::key_of(e, key)) {
      ++broken_;
    }
    fifo_.see(key);
    sum_ += key;
    squares_ += key * key;
  }

  std::uint64_t sum() const { return sum_; }
  std::uint64_t squares() const { return squares_; }
  std::uint64_t violations() const { return fifo_.violations(); }
  std::uint64_t broken() const { return broken_; }

private:
  fifo_check fifo_;
  std::uint64_t sum_ = 0;
  std::uint64_t squares_ = 0;
  std::uint64_t broken_ = 0;
};

/// The measuring loop: P producers push, C consumers pop, `items` values per iteration, one at a
/// time (batch == 1) or in bulk calls of up to `batch`. With single calls each consumer pops an
/// exact quota; with bulk calls the consumers share the total, each taking what it gets. The
/// sum of what was popped must be the sum of what was pushed, and every element whole. The
/// elements are the adapter's value_type (see elements.h), built by the producers as they go
/// (one per push, or a batch filled, then handed over), as a caller would: their construction,
/// and a consumer's check of each, are in the measured time for every queue alike. Measured
/// from the start line to the last join.
template <typename Adapter>
void queue_throughput(benchmark::State& state, shape sh, std::size_t capacity,
                      std::size_t batch = 1) {
  using T = typename Adapter::value_type;
  const quotas quota(sh);
  const std::uint64_t per_producer = quota.per_producer;
  const std::uint64_t per_consumer = quota.per_consumer;
  const std::uint64_t total = quota.total;
  const std::uint64_t expected_sum = quota.expected_sum;

  for (auto _ : state) {
    auto q = Adapter::make(capacity);
    start_line start;
    std::vector<std::uint64_t> sums(static_cast<std::size_t>(sh.consumers), 0);
    std::vector<std::uint64_t> squares(static_cast<std::size_t>(sh.consumers), 0);
    std::vector<std::uint64_t> violations(static_cast<std::size_t>(sh.consumers), 0);
    std::atomic<std::uint64_t> broken{0};
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
            Adapter::push(*q, element<T>::make(next));
          }
          return;
        }
        T values[max_batch]; // on the stack, as a caller's batch would be
        while (next < end) {
          const auto n = static_cast<std::size_t>(std::min<std::uint64_t>(batch, end - next));
          for (std::size_t k = 0; k < n; ++k) {
            values[k] = element<T>::make(next + k);
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
        receipt got(sh.producers);
        if (batch == 1) {
          for (std::uint64_t i = 0; i < per_consumer; ++i) {
            got.take(Adapter::pop(*q));
          }
        } else if constexpr (Adapter::bulk) {
          T values[max_batch];
          spin_wait wait;
          while (taken.load(std::memory_order_relaxed) < total) {
            const std::size_t n = Adapter::pop_bulk(*q, values, batch);
            if (n == 0) {
              wait();
              continue;
            }
            for (std::size_t k = 0; k < n; ++k) {
              got.take(values[k]);
            }
            taken.fetch_add(n, std::memory_order_relaxed);
          }
        }
        sums[static_cast<std::size_t>(c)] = got.sum();
        squares[static_cast<std::size_t>(c)] = got.squares();
        violations[static_cast<std::size_t>(c)] = got.violations();
        broken.fetch_add(got.broken(), std::memory_order_relaxed);
      });
    }
    state.SetIterationTime(start.open_and_join(threads));
    const std::uint64_t sum = std::accumulate(sums.begin(), sums.end(), std::uint64_t(0));
    const std::string what = std::string(Adapter::name()) + " " + sh.name() +
                             (batch > 1 ? " bulk" : "") + " (" + element<T>::name() + ")";
    if (broken.load() != 0) {
      fail(state, what + ": " + std::to_string(broken.load()) + " elements arrived not whole");
      return;
    }
    if (sum != expected_sum) {
      fail(state, what + ": sum " + std::to_string(sum) + " != " + std::to_string(expected_sum));
      return;
    }
    if (std::accumulate(squares.begin(), squares.end(), std::uint64_t(0)) !=
        quota.expected_squares) {
      fail(state, what + ": the sum is right, the sum of squares is not: a value was lost and "
                         "another received twice");
      return;
    }
    const std::uint64_t out_of_order =
        std::accumulate(violations.begin(), violations.end(), std::uint64_t(0));
    if (Adapter::ours && out_of_order != 0) {
      // Ours is strict FIFO: any value after a newer one of its producer is a defect.
      fail(state, what + ": " + std::to_string(out_of_order) +
                      " values arrived after a newer or the same value of their producer");
      return;
    }
    fifo_tally& tally = fifo_tallies()[current_case()];
    tally.violations += out_of_order;
    tally.checked += total;
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * total));
  state.counters["threads"] = sh.producers + sh.consumers;
}

/// One value bounces between two threads through two queues; `items` round trips per
/// iteration. Reported as round trips per second and ns per round trip. The echo thread sends
/// back a new element whose key is one more than the one it received.
template <typename Adapter>
void ping_pong(benchmark::State& state, std::size_t capacity) {
  using T = typename Adapter::value_type;
  const std::uint64_t rounds = std::max<std::uint64_t>(1, opts().items / 16);
  for (auto _ : state) {
    auto there = Adapter::make(capacity);
    auto back = Adapter::make(capacity);
    start_line start;
    std::atomic<bool> whole{true};
    std::thread echo([&] {
      pin_thread(1);
      start.wait();
      for (std::uint64_t i = 0; i < rounds; ++i) {
        std::uint64_t key = 0;
        if (!element<T>::key_of(Adapter::pop(*there), key)) {
          whole.store(false, std::memory_order_relaxed);
        }
        Adapter::push(*back, element<T>::make(key + 1));
      }
    });
    pin_thread(0);
    const auto t0 = std::chrono::steady_clock::now();
    start.open();
    std::uint64_t v = 1;
    for (std::uint64_t i = 0; i < rounds; ++i) {
      Adapter::push(*there, element<T>::make(v));
      if (!element<T>::key_of(Adapter::pop(*back), v)) {
        whole.store(false, std::memory_order_relaxed);
      }
    }
    echo.join();
    const auto t1 = std::chrono::steady_clock::now();
    state.SetIterationTime(std::chrono::duration<double>(t1 - t0).count());
    if (v != rounds + 1 || !whole.load()) {
      fail(state, std::string(Adapter::name()) + " ping-pong (" + element<T>::name() +
                      "): " + (whole.load() ? "ended at " + std::to_string(v) : "a torn element"));
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

/// How many cases were registered (each round's included): the progress lines count them.
inline std::size_t& registered_cases() {
  static std::size_t n = 0;
  return n;
}

/// The call style of each implementation, by name ("blocking": it waits inside its calls;
/// "try": the harness retries its try calls): the summary compares a peer with the one of ours
/// that has the same style. Implementations without one (pools) compare with ours' first.
inline std::map<std::string, std::string>& call_styles() {
  static std::map<std::string, std::string> styles;
  return styles;
}

template <typename Adapter>
const char* call_style() {
  return Adapter::blocking ? "blocking" : "try";
}

inline void register_case(const pending_case& c) {
  ++registered_cases();
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
void add_case(const std::string& name, Run run, const char* style = nullptr) {
  if (style != nullptr) {
    call_styles()[name.substr(name.rfind('/') + 1)] = style;
  }
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
      add_case(
          bench_name("throughput", params, Adapter::name()),
          [sh, cap](benchmark::State& st) { queue_throughput<Adapter>(st, sh, cap); },
          call_style<Adapter>());
    }
  }
}

/// The same with bulk calls of `batch` (the scenario "bulk<batch>").
template <typename Adapter>
void register_bulk(std::size_t batch) {
  batch = std::min(batch, max_batch);
  for (const shape& sh : throughput_shapes()) {
    add_case(
        bench_name("bulk" + std::to_string(batch), sh.name(), Adapter::name()),
        [sh, batch](benchmark::State& st) { queue_throughput<Adapter>(st, sh, 0, batch); },
        call_style<Adapter>());
  }
}

template <typename Adapter>
void register_ping_pong(std::size_t capacity) {
  add_case(
      bench_name("ping_pong", "round_trip", Adapter::name()),
      [capacity](benchmark::State& st) { ping_pong<Adapter>(st, capacity); },
      call_style<Adapter>());
}

// ---- run context ---------------------------------------------------------------------------

#ifndef ASYNC_BENCH_COMMIT
#define ASYNC_BENCH_COMMIT "unknown"
#endif
#ifndef ASYNC_BENCH_FLAGS
#define ASYNC_BENCH_FLAGS "unknown"
#endif

/// The CPU's name as /proc/cpuinfo gives it ("unknown" elsewhere).
inline std::string cpu_name() {
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
  return cpu;
}

/// The CPU and the hardware threads, in one line.
inline std::string machine_line() {
  return cpu_name() + ", " + std::to_string(hardware_threads()) + " hardware threads";
}

inline std::string compiler_line() {
#if defined(__clang__)
  return "clang " __clang_version__;
#elif defined(__GNUC__)
  return "g++ " __VERSION__;
#else
  return "an unknown compiler";
#endif
}

/// The date and time now, UTC, in ISO 8601 ("2026-11-28T14:05:09Z"); today() the date alone.
inline std::string now_utc() {
  const std::time_t t = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&t, &utc);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return buf;
}

inline std::string today() { return now_utc().substr(0, 10); }

/// What a result depends on: CPU, cores, compiler, flags, commit (one line each, prefixed).
inline std::string context(const char* prefix) {
  std::string out;
  out += std::string(prefix) + "cpu: " + cpu_name() + "\n";
  out += std::string(prefix) +
         "hardware threads: " + std::to_string(std::thread::hardware_concurrency()) +
         ", N used: " + std::to_string(opts().threads) + "\n";
  out += std::string(prefix) + "compiler: " + compiler_line() + "\n";
  // What the library chose for this target: where ARM boards and x86 differ.
  out += std::string(prefix) + "platform: " ASYNC_ARCH_NAME ", cache line " +
         std::to_string(async::detail::cache_line_size) + " bytes, spin hint " +
         async::detail::cpu_pause_name() + ", 64-bit atomics " +
         (std::atomic<std::uint64_t>::is_always_lock_free ? "lock-free" : "NOT lock-free") + "\n";
  out += std::string(prefix) + "flags: " ASYNC_BENCH_FLAGS "\n";
  out += std::string(prefix) + "commit: " ASYNC_BENCH_COMMIT "\n";
  if (opts().info.element_types) {
    out += std::string(prefix) + "element type: " + element_type_name(opts().type) + "\n";
  }
  return out;
}

// ---- the comparison table ---------------------------------------------------------------------

/// Median of a non-empty list.
inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/// A value for a table: three significant figures at most, never 0.0000 for a small value.
inline std::string short_number(double v) {
  char buf[32];
  const double a = std::fabs(v);
  std::snprintf(buf, sizeof buf,
                a >= 100              ? "%.0f"
                : a >= 10             ? "%.1f"
                : a >= 0.01 || a == 0 ? "%.2f"
                                      : "%.2g",
                v);
  return buf;
}

/// Words wrapped at `width` columns (a paragraph of the summary).
inline std::string wrap(const std::string& text, std::size_t width = 100) {
  std::string out;
  std::size_t line = 0;
  std::size_t at = 0;
  while (at < text.size()) {
    std::size_t end = text.find(' ', at);
    if (end == std::string::npos) {
      end = text.size();
    }
    const std::string word = text.substr(at, end - at);
    if (line > 0 && line + 1 + word.size() > width) {
      out += '\n';
      line = 0;
    } else if (line > 0) {
      out += ' ';
      ++line;
    }
    out += word;
    line += word.size();
    at = end + 1;
  }
  return out + "\n";
}

/// A Markdown table whose columns are padded to their widths (readable as plain text too);
/// `right` marks the columns of numbers.
inline std::string markdown_table(const std::vector<std::string>& head,
                                  const std::vector<std::vector<std::string>>& rows,
                                  const std::vector<bool>& right) {
  std::vector<std::size_t> width(head.size(), 3);
  for (std::size_t c = 0; c < head.size(); ++c) {
    width[c] = std::max(width[c], head[c].size());
    for (const auto& r : rows) {
      width[c] = std::max(width[c], r[c].size());
    }
  }
  auto line = [&](const std::vector<std::string>& cells) {
    std::string out = "|";
    for (std::size_t c = 0; c < cells.size(); ++c) {
      const std::string pad(width[c] - cells[c].size(), ' ');
      out += " " + (right[c] ? pad + cells[c] : cells[c] + pad) + " |";
    }
    return out + "\n";
  };
  std::string out = line(head) + "|";
  for (std::size_t c = 0; c < head.size(); ++c) {
    out += std::string(width[c] + 1, '-') + (right[c] ? ":|" : "-|");
  }
  out += "\n";
  for (const auto& r : rows) {
    out += line(r);
  }
  return out;
}

/// A string as a JSON string literal.
inline std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (const char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
      out += buf;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

/// The path of a file beside the CSV: the CSV's name with `suffix` in place of ".csv".
inline std::string beside_csv(const char* suffix) {
  std::string path = opts().csv;
  const std::size_t slash = path.find_last_of('/');
  const std::size_t dot = path.rfind('.');
  if (dot != std::string::npos && (slash == std::string::npos || dot > slash)) {
    path.erase(dot);
  }
  return path + suffix;
}

/// The run's context as JSON, beside the CSV (.meta.json): what the results depend on.
inline void write_meta_json(std::size_t rounds = 1) {
  std::ofstream out(beside_csv(".meta.json"));
  out << "{\n"
      << "  \"binary\": " << json_string(opts().binary) << ",\n"
      << "  \"question\": " << json_string(opts().info.what) << ",\n"
      << "  \"date\": " << json_string(now_utc()) << ",\n"
      << "  \"machine\": " << json_string(machine_line()) << ",\n"
      << "  \"cpu\": " << json_string(cpu_name()) << ",\n"
      << "  \"hardware_threads\": " << hardware_threads() << ",\n"
      << "  \"threads\": " << opts().threads << ",\n"
      << "  \"compiler\": " << json_string(compiler_line()) << ",\n"
      << "  \"flags\": " << json_string(ASYNC_BENCH_FLAGS) << ",\n"
      << "  \"commit\": " << json_string(ASYNC_BENCH_COMMIT) << ",\n"
      << "  \"element_type\": "
      << (opts().info.element_types ? json_string(element_type_name(opts().type)) : "null") << ",\n"
      << "  \"unit\": " << json_string(opts().info.unit) << ",\n"
      << "  \"rounds\": " << rounds << ",\n"
      << "  \"items\": " << opts().items << "\n"
      << "}\n";
}

/// The run's results. On the console: a line per round (every measurement with --async_full),
/// then the summary: one table per scenario and call style of ours, each peer against the one
/// of ours with the same call style (median of the rounds; ours / peer as the median of the
/// per-round ratios with their range), 100 columns wide at most. With --async_full, also the
/// per-case tables of every implementation and the per-producer FIFO counts. With --async_csv,
/// the summary is saved beside the CSV (.md), and the run's context in a JSON (.meta.json).
class table_reporter : public benchmark::ConsoleReporter {
public:
  table_reporter()
      : ConsoleReporter(isatty(fileno(stdout)) ? OO_ColorTabular : OO_Tabular),
        started_(std::chrono::steady_clock::now()) {}

  bool ReportContext(const Context& context) override {
    // Google Benchmark's machine lines, and a word on its warning about its own build.
    std::ostringstream lines;
    std::ostream& err = GetErrorStream();
    SetErrorStream(&lines);
    const bool ok = ConsoleReporter::ReportContext(context);
    SetErrorStream(&err);
    err << lines.str();
    if (lines.str().find("built as DEBUG") != std::string::npos) {
      err << wrap("(That warning is about Google Benchmark itself, as some distributions build "
                  "it: these benchmarks time each measurement with their own clock, and the "
                  "code under test is built as the flags line above says.)");
    }
    err.flush();
    return ok;
  }

  void ReportRuns(const std::vector<Run>& runs) override {
    if (opts().full) {
      ConsoleReporter::ReportRuns(runs);
    }
    // Google Benchmark reports a case's repetitions, then their aggregates, in two calls unless
    // --benchmark_report_aggregates_only: the second call replaces the first's value.
    const bool again = !runs.empty() && runs.front().benchmark_name() == last_name_ &&
                       !runs.front().aggregate_name.empty();
    if (!runs.empty()) {
      last_name_ = runs.front().benchmark_name();
    }
    if (!again) {
      ++reported_;
      progress();
    }
    // One call per registered case: its runs, then (with repetitions) their aggregates. The
    // case contributes one value: the median aggregate, else the median of its runs.
    std::string name;
    std::string threads;
    std::vector<double> values;
    double aggregate_median = -1;
    double thread_count = 0;
    for (const Run& r : runs) {
      if (r.error_occurred) {
        std::printf("ERROR in %s: %s\n", r.benchmark_name().c_str(), r.error_message.c_str());
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
            cost_ = cost;
          }
        }
      }
      if (it == r.counters.end()) {
        it = r.counters.find("items_per_second");
      }
      if (it == r.counters.end()) {
        continue;
      }
      const auto t = r.counters.find("threads");
      if (t != r.counters.end()) {
        thread_count = t->second.value;
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
    const double value = aggregate_median >= 0 ? aggregate_median : median(values);
    std::vector<double>& round_values = rows_[group][impl];
    if (again && !round_values.empty()) {
      round_values.back() = value;
    } else {
      round_values.push_back(value);
    }
    names_[group][impl] = name;
    if (thread_count > 0) {
      threads_[group] = static_cast<int>(thread_count);
    }
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

  /// The summary (Markdown) that Finalize printed and saved.
  const std::string& summary() const { return summary_; }

  void Finalize() override {
    ConsoleReporter::Finalize();
    if (opts().full) {
      print_table();
      print_fifo();
    }
    summary_ = make_summary();
    std::printf("\n%s", summary_.c_str());
    std::fflush(stdout);
    if (!opts().csv.empty()) {
      write_csv();
      std::ofstream(beside_csv(".md")) << summary_;
      write_meta_json(rounds_measured());
      std::printf("\nSaved: %s, %s, %s\n", opts().csv.c_str(), beside_csv(".md").c_str(),
                  beside_csv(".meta.json").c_str());
    }
  }

private:
  struct ratio_summary {
    double median = 0;
    double low = 0;
    double high = 0;
    std::size_t rounds = 0;
  };

  using row_type = std::map<std::string, std::vector<double>>;

  bool rate() const { return cost_.empty(); }

  static bool is_ours(const std::string& impl) { return impl.compare(0, 7, "async::") == 0; }

  static std::string style_of(const std::string& impl) {
    const auto it = call_styles().find(impl);
    return it == call_styles().end() ? std::string() : it->second;
  }

  /// A line per finished round (per case with --async_full, which prints the runs instead).
  void progress() {
    if (opts().full) {
      return;
    }
    // A round's cases are those registered over the rounds; a filter (or a binary that
    // registers on its own) leaves the rounds unknown: then a line per case.
    const std::size_t rounds = static_cast<std::size_t>(std::max(1, opts().rounds));
    const std::size_t per_round = registered_cases() / rounds;
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
    if (per_round == 0 || opts().filtered) {
      std::printf("%zu cases measured, %.0f s so far\n", reported_, seconds);
    } else if (reported_ % per_round == 0) {
      std::printf("round %zu of %zu: %zu cases measured, %.0f s so far\n", reported_ / per_round,
                  rounds, per_round, seconds);
    }
    std::fflush(stdout);
  }

  /// The one of ours that a peer is compared with in a case: the first of ours in the case
  /// with the peer's call style, else the first of ours there.
  std::string ours_for(const std::string& group, const std::string& peer) const {
    const row_type& row = rows_.at(group);
    std::string first;
    for (const auto& i : impls_) {
      if (!is_ours(i) || !row.count(i)) {
        continue;
      }
      if (first.empty()) {
        first = i;
      }
      if (!style_of(i).empty() && style_of(i) == style_of(peer)) {
        return i;
      }
    }
    return first;
  }

  /// `our` vs `peer` in one case, round by round ("how many times better ours is": a higher
  /// rate, or a lower cost); rounds = 0 when there is nothing to compare.
  ratio_summary ratio(const row_type& row, const std::string& our, const std::string& peer) const {
    ratio_summary out;
    const auto a = row.find(our);
    const auto b = row.find(peer);
    if (a == row.end() || b == row.end() || a == b) {
      return out;
    }
    std::vector<double> ratios;
    for (std::size_t r = 0; r < std::min(a->second.size(), b->second.size()); ++r) {
      if (a->second[r] > 0 && b->second[r] > 0) {
        ratios.push_back(rate() ? a->second[r] / b->second[r] : b->second[r] / a->second[r]);
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

  /// CPU per wall second below this is idle (a timer tick, the measuring thread): ratios of
  /// such values are noise, so the summary says "both idle", or bounds the ratio by it.
  static constexpr double idle_floor = 0.01;

  std::string ratio_text(const row_type& row, const std::string& our,
                         const std::string& peer) const {
    if (cost_ == "cpu_per_wall" && row.count(our) && row.count(peer)) {
      const double a = median(row.at(our));
      const double b = median(row.at(peer));
      if (a < idle_floor && b < idle_floor) {
        return "both idle";
      }
      if (a < idle_floor) {
        return "> " + short_number(b / idle_floor) + "x";
      }
      if (b < idle_floor) {
        return "< " + short_number(idle_floor / a) + "x";
      }
    }
    return ratio_text(ratio(row, our, peer));
  }

  static std::string ratio_text(const ratio_summary& r) {
    if (r.rounds == 0) {
      return "-";
    }
    std::string out = short_number(r.median) + "x";
    if (r.rounds > 1) {
      out += " (" + short_number(r.low) + "-" + short_number(r.high) + ")";
    }
    return out;
  }

  std::string value_text(const std::vector<double>& values) const {
    const double m = median(values);
    return short_number(rate() ? m / 1e6 : m);
  }

  std::string what_is_measured() const {
    if (rate()) {
      return std::string("millions of ") + opts().info.unit + " per second (higher is better)";
    }
    return cost_ == "wait_us" ? "microseconds an outside post waited (lower is better)"
                              : "CPU seconds per wall second while idle (lower is better)";
  }

  /// A case's name in the summary: the group without its scenario; `*` where the case ran more
  /// threads than the machine has.
  std::string case_label(const std::string& group) const {
    const std::size_t slash = group.find('/');
    std::string label = slash == std::string::npos ? group : group.substr(slash + 1);
    std::replace(label.begin(), label.end(), '/', ' ');
    const auto t = threads_.find(group);
    if (t != threads_.end() && t->second > hardware_threads()) {
      label += " *";
    }
    return label;
  }

  /// The rounds the run measured: the most values any case has (a binary that registers its
  /// cases itself measures each once, whatever --async_rounds says).
  std::size_t rounds_measured() const {
    std::size_t n = 1;
    for (const auto& g : rows_) {
      for (const auto& i : g.second) {
        n = std::max(n, i.second.size());
      }
    }
    return n;
  }

  std::string make_summary() const {
    std::string out = "## " + opts().binary + ": " + opts().info.what + "\n\n";
    std::string about = "Machine: " + machine_line() + ". Commit " ASYNC_BENCH_COMMIT ", " +
                        compiler_line() + ", " + today() + ".";
    if (opts().info.element_types) {
      about += std::string(" Element: ") + element_type_name(opts().type) + ".";
    }
    const int rounds = static_cast<int>(rounds_measured());
    about += " Values: " + what_is_measured() + ", " +
             (rounds > 1 ? "medians of " + std::to_string(rounds) + " interleaved rounds"
                         : std::string("one round")) +
             ".";
    const bool peers_in_run =
        std::any_of(impls_.begin(), impls_.end(), [](const std::string& i) { return !is_ours(i); });
    if (peers_in_run) {
      about += std::string(" ours / peer: ") +
               (rounds > 1 ? "the median of the per-round ratios, with their range; " : "") +
               "above 1.00x ours is ahead.";
    }
    if (cost_ == "cpu_per_wall") {
      about += " Below 0.01 CPU is idle: no ratio of two such values is given.";
    }
    bool any_oversubscribed = false;
    for (const auto& t : threads_) {
      any_oversubscribed = any_oversubscribed || t.second > hardware_threads();
    }
    if (any_oversubscribed) {
      about += " * more threads than the machine's " + std::to_string(hardware_threads()) +
               " hardware threads (oversubscribed: waiting threads take turns on the cores).";
    }
    out += wrap(about) + "\n";
    if (order_.empty()) {
      return out + "No case produced a value.\n";
    }
    // Sections: a scenario and one of ours; rows: each peer of each case.
    std::vector<std::string> sections;
    std::map<std::string, std::vector<std::vector<std::string>>> table;
    std::map<std::string, bool> has_peer;
    for (const auto& g : order_) {
      const row_type& row = rows_.at(g);
      const std::string scenario = g.substr(0, g.find('/'));
      bool peers = false;
      for (const auto& i : impls_) {
        if (!row.count(i) || is_ours(i)) {
          continue;
        }
        peers = true;
        const std::string our = ours_for(g, i);
        const std::string key = scenario + "\n" + our;
        if (!table.count(key)) {
          sections.push_back(key);
        }
        has_peer[key] = true;
        table[key].push_back({case_label(g), our.empty() ? "-" : value_text(row.at(our)), i,
                              value_text(row.at(i)), ratio_text(row, our, i)});
      }
      if (!peers) {
        for (const auto& i : impls_) {
          if (!row.count(i)) {
            continue;
          }
          const std::string key = scenario + "\n" + i + "\nalone"; // cases without a peer
          if (!table.count(key)) {
            sections.push_back(key);
          }
          table[key].push_back({case_label(g), value_text(row.at(i))});
        }
      }
    }
    for (const auto& key : sections) {
      const std::string scenario = key.substr(0, key.find('\n'));
      const std::size_t at = key.find('\n') + 1;
      const std::string our = key.substr(at, key.find('\n', at) - at);
      const std::string style = scenario.compare(0, 4, "bulk") == 0 ? "bulk" : style_of(our);
      out +=
          "### " + scenario + ": " + our + (style.empty() ? "" : " (" + style + " calls)") + "\n\n";
      if (has_peer.count(key)) {
        out += markdown_table({"case", "ours", "peer", "peer's", "ours / peer"}, table[key],
                              {false, true, false, true, false});
      } else {
        out += markdown_table({"case", "value"}, table[key], {false, true});
      }
      out += "\n";
    }
    out += verification_line();
    if (!failed_cases().empty()) {
      std::string failures = "FAILED (a wrong result; see VERIFICATION FAILED above):";
      std::vector<std::string> names = failed_cases();
      std::sort(names.begin(), names.end());
      names.erase(std::unique(names.begin(), names.end()), names.end());
      for (const auto& n : names) {
        failures += " " + n + ",";
      }
      failures.back() = '.';
      out += "\n" + wrap(failures);
    }
    return out;
  }

  /// What the checks found, in one paragraph.
  std::string verification_line() const {
    const auto& tallies = fifo_tallies();
    if (tallies.empty()) {
      return "";
    }
    std::map<std::string, std::pair<std::uint64_t, std::uint64_t>> by_impl; // violations, of
    for (const auto& g : order_) {
      for (const auto& kv : names_.at(g)) {
        const auto t = tallies.find(kv.second);
        if (t != tallies.end()) {
          by_impl[kv.first].first += t->second.violations;
          by_impl[kv.first].second += t->second.checked;
        }
      }
    }
    std::string text = "Checked in every measurement: each value arrived exactly once";
    text += opts().info.element_types ? " and whole" : "";
    text += " (a wrong result fails the case, and the binary's exit status); per-producer FIFO "
            "(a value received after a newer value of its producer by the same consumer; for "
            "ours, strict FIFO, one fails the case):";
    bool any = false;
    for (const auto& kv : by_impl) {
      if (kv.second.first > 0) {
        char buf[64];
        std::snprintf(buf, sizeof buf, " %llu of %llu values,",
                      static_cast<unsigned long long>(kv.second.first),
                      static_cast<unsigned long long>(kv.second.second));
        text += " " + kv.first + buf;
        any = true;
      }
    }
    if (any) {
      text.back() = ';';
      text += " every other implementation in order.";
    } else {
      text += " in order everywhere.";
    }
    return wrap(text);
  }

  /// A table with a row per case and a column per implementation: `cell(g, i)` is the text of
  /// case g and implementation i, "-" where there is none. With `skip_empty`, a case whose cells
  /// are all "-" is left out.
  template <typename Cell>
  std::string case_table(Cell cell, bool skip_empty) const {
    std::vector<std::string> head = {"case"};
    std::vector<bool> right = {false};
    for (const auto& i : impls_) {
      head.push_back(i);
      right.push_back(true);
    }
    std::vector<std::vector<std::string>> rows;
    for (const auto& g : order_) {
      std::vector<std::string> r = {g};
      bool any = false;
      for (const auto& i : impls_) {
        r.push_back(cell(g, i));
        any = any || r.back() != "-";
      }
      if (any || !skip_empty) {
        rows.push_back(r);
      }
    }
    return markdown_table(head, rows, right);
  }

  /// The per-case table of every implementation (--async_full).
  void print_table() const {
    if (order_.empty()) {
      return;
    }
    const std::string table = case_table(
        [this](const std::string& g, const std::string& i) {
          const row_type& row = rows_.at(g);
          const auto it = row.find(i);
          return it == row.end() ? std::string("-") : value_text(it->second);
        },
        false);
    std::printf("\nEvery case, %s:\n\n%s", what_is_measured().c_str(), table.c_str());
    std::fflush(stdout);
  }

  /// The per-producer FIFO table (--async_full): for every case that checks it, each
  /// implementation's count of values received after a newer value of the same producer, out
  /// of the values checked.
  void print_fifo() const {
    const auto& tallies = fifo_tallies();
    if (tallies.empty()) {
      return;
    }
    const std::string table = case_table(
        [this, &tallies](const std::string& g, const std::string& i) {
          const auto& names = names_.at(g);
          const auto n = names.find(i);
          const auto t = n == names.end() ? tallies.end() : tallies.find(n->second);
          if (t == tallies.end() || t->second.checked == 0) {
            return std::string("-");
          }
          char buf[64];
          std::snprintf(buf, sizeof buf, "%llu (%.2g%%)",
                        static_cast<unsigned long long>(t->second.violations),
                        100.0 * static_cast<double>(t->second.violations) /
                            static_cast<double>(t->second.checked));
          return t->second.violations == 0 ? std::string("0") : std::string(buf);
        },
        true);
    std::printf("\nPer-producer FIFO violations (a value received after a newer value of its "
                "producer, by the same consumer), of the values checked:\n\n%s",
                table.c_str());
    std::fflush(stdout);
  }

  /// One line per case and implementation: the median value; for a peer, ours / it (median of
  /// the rounds, lowest, highest, rounds) against the one of ours named in compared_with; the
  /// FIFO violations and values checked (empty where the case does not check); the threads of
  /// the case and whether they outnumber the machine's. The first line is the header: the
  /// run's context is in the .meta.json beside it.
  void write_csv() const {
    std::ofstream out(opts().csv);
    out << "case,implementation,value,metric,ours_vs_this,ours_vs_this_low,ours_vs_this_high,"
           "rounds,fifo_violations,fifo_checked,compared_with,threads,oversubscribed\n";
    const auto& tallies = fifo_tallies();
    const std::string metric = rate() ? std::string(opts().info.unit) + "/s" : cost_;
    for (const auto& g : order_) {
      const row_type& row = rows_.at(g);
      for (const auto& kv : row) {
        out << g << ',' << kv.first << ',' << median(kv.second) << ',' << metric << ',';
        const std::string our = is_ours(kv.first) ? std::string() : ours_for(g, kv.first);
        ratio_summary r = ratio(row, our, kv.first);
        if (cost_ == "cpu_per_wall" && r.rounds > 0 && median(row.at(our)) < idle_floor &&
            median(kv.second) < idle_floor) {
          r = ratio_summary(); // both idle: a ratio of noise (as the summary says)
        }
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
        const auto th = threads_.find(g);
        out << ',' << (r.rounds > 0 ? our : std::string()) << ',';
        if (th != threads_.end()) {
          out << th->second << ',' << (th->second > hardware_threads() ? "yes" : "no");
        } else {
          out << ',';
        }
        out << '\n';
      }
    }
  }

  std::string cost_;      // empty: a rate; else the cost counter (cpu_per_wall, wait_us)
  std::string last_name_; // the benchmark of the last call to ReportRuns
  std::size_t reported_ = 0;
  std::chrono::steady_clock::time_point started_;
  std::vector<std::string> order_;
  std::vector<std::string> impls_;
  std::map<std::string, row_type> rows_;                            // value per round
  std::map<std::string, std::map<std::string, std::string>> names_; // benchmark names
  std::map<std::string, int> threads_;                              // threads per case
  std::string summary_;
};

/// main() of every scenario binary: our flags (--help lists them), Google Benchmark's flags,
/// the registrations, the run with the summary, and a failing exit status if any result was
/// wrong.
template <typename Register>
int run_main(int argc, char** argv, const binary_info& info, Register register_all) {
  opts().info = info;
  parse_options(argc, argv);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) {
    return 2;
  }
  std::printf("%sasync bench: %llu items per iteration\n", context("").c_str(),
              static_cast<unsigned long long>(opts().items));
  benchmark::AddCustomContext("async_commit", ASYNC_BENCH_COMMIT);
  if (opts().info.element_types) {
    benchmark::AddCustomContext("async_element_type", element_type_name(opts().type));
  }
  register_all();
  register_rounds();
  table_reporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();
  return failed() ? 1 : 0;
}

/// Calls f(tag<T>()) with the element type that --async_type chose.
template <typename F>
void with_element_type(F f) {
  if (opts().type == "struct64") {
    f(tag<payload64>());
  } else if (opts().type == "string") {
    f(tag<std::string>());
  } else {
    f(tag<std::uint64_t>());
  }
}

} // namespace async_bench

#endif // ASYNC_BENCH_COMMON_HARNESS_H
