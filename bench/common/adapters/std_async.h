// SPDX-License-Identifier: BSL-1.0
// std::async(std::launch::async): a new thread per call; the worker count does not apply.
#ifndef ASYNC_BENCH_ADAPTERS_STD_ASYNC_H
#define ASYNC_BENCH_ADAPTERS_STD_ASYNC_H

#include "../registry.h"

#include <future>
#include <utility>

namespace async_bench {

class std_async : public pool_traits {
public:
  static const char* name() { return "std::async"; }
  static constexpr bool chains = false;
  static constexpr bool thread_per_call = true;
  static constexpr bool idles = false;
  explicit std_async(int) {}
  template <typename F>
  auto post(F&& f) {
    return std::async(std::launch::async, std::forward<F>(f));
  }
};

} // namespace async_bench

#define ASYNC_BENCH_POOLS_STD_ASYNC async_bench::std_async,

#endif
