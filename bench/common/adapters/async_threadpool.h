// SPDX-License-Identifier: BSL-1.0
// async::threadpool: post() with futures, execute() for chains.
#ifndef ASYNC_BENCH_ADAPTERS_ASYNC_THREADPOOL_H
#define ASYNC_BENCH_ADAPTERS_ASYNC_THREADPOOL_H

#include "../registry.h"

#include <async/threadpool.h>

#include <utility>

namespace async_bench {

class async_pool : public pool_traits {
public:
  static const char* name() { return "async::threadpool"; }
  static constexpr bool ours = true;
  explicit async_pool(int workers) : pool_(workers) {}
  template <typename F>
  auto post(F&& f) {
    return pool_.post(std::forward<F>(f));
  }
  template <typename F>
  void spawn(F&& f) {
    pool_.execute(std::forward<F>(f));
  }

private:
  async::threadpool pool_;
};

} // namespace async_bench

#define ASYNC_BENCH_POOLS_ASYNC async_bench::async_pool,

#endif
