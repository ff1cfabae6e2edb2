// SPDX-License-Identifier: BSL-1.0
// std::async(std::launch::async): a new thread per call; the worker count does not apply.
#ifndef ASYNC_BENCH_ADAPTERS_STD_ASYNC_H
#define ASYNC_BENCH_ADAPTERS_STD_ASYNC_H

#include <future>
#include <utility>

namespace async_bench {

class std_async {
public:
  static const char* name() { return "std::async"; }
  explicit std_async(int) {}
  template <typename F>
  auto post(F&& f) {
    return std::async(std::launch::async, std::forward<F>(f));
  }
};

} // namespace async_bench

#endif
