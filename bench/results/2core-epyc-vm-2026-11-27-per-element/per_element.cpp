// SPDX-License-Identifier: BSL-1.0
// What one element costs each side of a queue when nothing runs at the same time: 13 producer
// threads enqueue 2^20 values one thread after the other (so moodycamel has its 13 implicit
// producers, as in the funnel), then one thread dequeues them all. Ours and moodycamel
// (without tokens) alternate, 15 rounds; medians and ranges in ns per element. Also the cost of
// one locked read-modify-write on a line the thread owns (fetch_add, compare_exchange).
#include <async/queue.h>
#include <concurrentqueue/concurrentqueue.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <thread>
#include <vector>

namespace {
using clk = std::chrono::steady_clock;
constexpr int producers = 13;
constexpr std::uint64_t items = std::uint64_t(1) << 20;

double ns_since(clk::time_point t0) {
  return std::chrono::duration<double, std::nano>(clk::now() - t0).count();
}

template <typename Q, typename Push, typename Pop>
void round(Q& q, Push push, Pop pop, std::vector<double>& enq, std::vector<double>& deq) {
  double enq_ns = 0;
  for (int p = 0; p < producers; ++p) {
    std::thread t([&, p] {
      const std::uint64_t first = items * p / producers, last = items * (p + 1) / producers;
      const auto t0 = clk::now();
      for (std::uint64_t v = first; v < last; ++v) {
        push(q, v);
      }
      enq_ns += ns_since(t0); // joined before the next thread starts
    });
    t.join();
  }
  std::uint64_t sum = 0, v = 0;
  const auto t0 = clk::now();
  for (std::uint64_t i = 0; i < items; ++i) {
    while (!pop(q, v)) {
    }
    sum += v;
  }
  deq.push_back(ns_since(t0) / items);
  enq.push_back(enq_ns / items);
  if (sum != items * (items - 1) / 2) {
    std::printf("wrong sum\n");
    std::exit(1);
  }
}

struct summary {
  double median, low, high;
};
summary summarize(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return {v[v.size() / 2], v.front(), v.back()};
}
void print(const char* what, const std::vector<double>& v) {
  const summary s = summarize(v);
  std::printf("%-34s %6.2f ns (%.2f-%.2f)\n", what, s.median, s.low, s.high);
}
} // namespace

int main() {
  async::queue<std::uint64_t> ours;
  moodycamel::ConcurrentQueue<std::uint64_t> peer;
  std::vector<double> oe, od, pe, pd, ratio, xadd, cas;
  for (int r = 0; r < 15; ++r) {
    round(
        ours, [](async::queue<std::uint64_t>& q, std::uint64_t v) { q.enqueue(v); },
        [](async::queue<std::uint64_t>& q, std::uint64_t& v) { return q.dequeue(v); }, oe, od);
    round(
        peer, [](moodycamel::ConcurrentQueue<std::uint64_t>& q, std::uint64_t v) { q.enqueue(v); },
        [](moodycamel::ConcurrentQueue<std::uint64_t>& q, std::uint64_t& v) {
          return q.try_dequeue(v);
        },
        pe, pd);
    ratio.push_back((pe.back() + pd.back()) / (oe.back() + od.back()));
    alignas(64) std::atomic<std::uint64_t> word{0};
    constexpr int n = 10000000;
    auto t0 = clk::now();
    for (int i = 0; i < n; ++i) {
      word.fetch_add(1, std::memory_order_seq_cst);
    }
    xadd.push_back(ns_since(t0) / n);
    t0 = clk::now();
    for (int i = 0; i < n; ++i) {
      std::uint64_t e = word.load(std::memory_order_relaxed);
      word.compare_exchange_strong(e, e + 1, std::memory_order_seq_cst);
    }
    cas.push_back(ns_since(t0) / n);
  }
  print("async::queue enqueue", oe);
  print("async::queue dequeue", od);
  print("moodycamel enqueue (no token)", pe);
  print("moodycamel try_dequeue (no token)", pd);
  print("locked fetch_add", xadd);
  print("locked compare_exchange", cas);
  const summary s = summarize(ratio);
  std::printf("both sides, moodycamel / ours (per round): %.2fx (%.2f-%.2f)\n", s.median, s.low,
              s.high);
}
