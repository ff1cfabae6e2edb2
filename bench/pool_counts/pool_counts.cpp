// SPDX-License-Identifier: BSL-1.0
// A counting build of the pool's scheduler: where the machine has no hardware counters (a cloud
// VM), what a task costs in shared-memory traffic is counted instead. The scheduler runs on an
// atomic type that counts every read-modify-write (a locked instruction on x86: exchange,
// compare-exchange, fetch_add and the like) per word and per thread. A word that more than one
// thread writes is a line that moves between cores; the locked instructions on such words, per
// task, are the structural cost that no 2-core timing shows.
//
//   pool_counts [workers] [submitters] [tasks per submitter] [lanes]   (2 2 200000 1)
//
// Each submitter keeps up to 1024 tiny tasks in flight (as bench_pool_window's execute()); the
// output gives, per task, the locked instructions on words by how many threads write them (a
// word that every thread writes is a lock that every post queues on).
#include <async/detail/pool/scheduler.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

namespace {

// Per thread: locked instructions per word address. Merged into `all` when the thread ends.
struct thread_tally {
  std::unordered_map<const void*, std::uint64_t> rmw;
  ~thread_tally();
};
std::mutex merge_mutex;
std::map<const void*, std::pair<std::uint64_t, std::uint32_t>> all; // rmw count, writer threads

thread_tally::~thread_tally() {
  std::lock_guard<std::mutex> lock(merge_mutex);
  for (const auto& kv : rmw) {
    auto& entry = all[kv.first];
    entry.first += kv.second;
    entry.second += 1;
  }
}

thread_tally& tally() {
  static thread_local thread_tally t;
  return t;
}

// std::atomic's interface as the scheduler uses it; every read-modify-write is counted.
template <typename V>
class counting_atomic {
public:
  counting_atomic() noexcept : v_() {}
  constexpr counting_atomic(V v) noexcept : v_(v) {} // NOLINT: implicit, as std::atomic's
  counting_atomic(const counting_atomic&) = delete;
  counting_atomic& operator=(const counting_atomic&) = delete;

  V load(std::memory_order o = std::memory_order_seq_cst) const { return v_.load(o); }
  void store(V v, std::memory_order o = std::memory_order_seq_cst) {
    if (o == std::memory_order_seq_cst) {
      count(); // an exchange on x86
    }
    v_.store(v, o);
  }
  V exchange(V v, std::memory_order o = std::memory_order_seq_cst) {
    count();
    return v_.exchange(v, o);
  }
  bool compare_exchange_strong(V& e, V d, std::memory_order s, std::memory_order f) {
    count();
    return v_.compare_exchange_strong(e, d, s, f);
  }
  bool compare_exchange_strong(V& e, V d, std::memory_order o = std::memory_order_seq_cst) {
    count();
    return v_.compare_exchange_strong(e, d, o);
  }
  bool compare_exchange_weak(V& e, V d, std::memory_order s, std::memory_order f) {
    count();
    return v_.compare_exchange_weak(e, d, s, f);
  }
  bool compare_exchange_weak(V& e, V d, std::memory_order o = std::memory_order_seq_cst) {
    count();
    return v_.compare_exchange_weak(e, d, o);
  }
  template <typename D>
  V fetch_add(D d, std::memory_order o = std::memory_order_seq_cst) {
    count();
    return v_.fetch_add(d, o);
  }
  template <typename D>
  V fetch_sub(D d, std::memory_order o = std::memory_order_seq_cst) {
    count();
    return v_.fetch_sub(d, o);
  }
  V fetch_or(V d, std::memory_order o = std::memory_order_seq_cst) {
    count();
    return v_.fetch_or(d, o);
  }
  V fetch_and(V d, std::memory_order o = std::memory_order_seq_cst) {
    count();
    return v_.fetch_and(d, o);
  }

  // detail::park / unpark_all on this word: through the real word (a 64-bit atomic).
  bool park(std::uint64_t expected, const async::detail::wait_clock::time_point* deadline) {
    return async::detail::park(word(), expected, deadline);
  }
  void unpark_all() { async::detail::unpark_all(word()); }

private:
  void count() const { ++tally().rmw[this]; }
  std::atomic<std::uint64_t>* word() {
    static_assert(sizeof(V) == sizeof(std::uint64_t), "parking needs a 64-bit word");
    return reinterpret_cast<std::atomic<std::uint64_t>*>(&v_);
  }
  std::atomic<V> v_;
};

struct host {
  void idle() const {}
  void orphaned() const {}
};
using scheduler = async::detail::scheduler<host, counting_atomic>;
using async::detail::task;

struct tiny {
  std::atomic<std::uint64_t>* done;
  void operator()() const { done->fetch_add(1, std::memory_order_release); }
};

} // namespace

int main(int argc, char** argv) {
  const int workers = argc > 1 ? std::atoi(argv[1]) : 2;
  const int submitters = argc > 2 ? std::atoi(argv[2]) : 2;
  const std::uint64_t per = argc > 3 ? std::strtoull(argv[3], nullptr, 10) : 200000;
  const std::size_t lanes = argc > 4 ? std::strtoull(argv[4], nullptr, 10) : 1;
  const std::uint64_t window = 1024;
  std::uint64_t tasks = 0;
  {
    scheduler s(host{}, lanes);
    std::vector<scheduler::worker*> ws;
    for (int i = 0; i < workers; ++i) {
      ws.push_back(&s.add_worker());
    }
    std::vector<std::thread> threads;
    for (auto* w : ws) {
      threads.emplace_back([&s, w] {
        s.run(*w);
        s.leave(*w);
      });
    }
    std::vector<std::unique_ptr<std::atomic<std::uint64_t>>> done;
    for (int k = 0; k < submitters; ++k) {
      done.emplace_back(new std::atomic<std::uint64_t>(0));
    }
    std::vector<std::thread> posters;
    for (int k = 0; k < submitters; ++k) {
      std::atomic<std::uint64_t>* d = done[static_cast<std::size_t>(k)].get();
      posters.emplace_back([&s, d, per, window] {
        for (std::uint64_t i = 0; i < per; ++i) {
          while (i - d->load(std::memory_order_acquire) >= window) {
            std::this_thread::yield();
          }
          s.submit(task(tiny{d}), nullptr);
        }
        while (d->load(std::memory_order_acquire) < per) {
          std::this_thread::yield();
        }
      });
    }
    for (auto& p : posters) {
      p.join();
    }
    tasks = per * static_cast<std::uint64_t>(submitters);
    for (auto* w : ws) {
      s.retire(*w);
    }
    for (auto& t : threads) {
      t.join();
    }
  }
  // The main thread's own tally (the retire() calls) merges here.
  { thread_tally drained = std::move(tally()); }
  // Locked instructions per task, by the number of threads that write the word.
  std::map<std::uint32_t, std::uint64_t> by_writers;
  for (const auto& kv : all) {
    by_writers[kv.second.second] += kv.second.first;
  }
  std::printf("workers %d, submitters %d, lanes %zu, tasks %llu\n", workers, submitters, lanes,
              static_cast<unsigned long long>(tasks));
  std::printf("locked instructions per task, by how many threads write the word:\n");
  double total = 0;
  for (const auto& kv : by_writers) {
    const double per_task = static_cast<double>(kv.second) / static_cast<double>(tasks);
    total += per_task;
    std::printf("  %2u thread%s: %.2f\n", kv.first, kv.first == 1 ? " " : "s", per_task);
  }
  std::printf("  in all:     %.2f\n", total);
  return 0;
}
