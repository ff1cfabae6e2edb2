// SPDX-License-Identifier: BSL-1.0
// An Asio pool the way the original library benchmarked one ("AsioThreadPool"): a
// boost::asio::thread_pool, with std::packaged_task giving each post a future.
#ifndef ASYNC_BENCH_ADAPTERS_ASIO_POOL_H
#define ASYNC_BENCH_ADAPTERS_ASIO_POOL_H

#if ASYNC_BENCH_HAVE_ASIO

#include "../registry.h"

#include <boost/asio/post.hpp>
#include <boost/asio/thread_pool.hpp>

#include <future>
#include <memory>
#include <type_traits>
#include <utility>

namespace async_bench {

class asio_pool : public pool_traits {
public:
  static const char* name() { return "asio thread_pool+packaged_task"; }
  explicit asio_pool(int workers) : pool_(static_cast<std::size_t>(workers)) {}
  ~asio_pool() { pool_.join(); }
  template <typename F>
  auto post(F&& f) {
    using R = decltype(f());
    auto task = std::make_shared<std::packaged_task<R()>>(std::forward<F>(f));
    auto future = task->get_future();
    boost::asio::post(pool_, [task] { (*task)(); });
    return future;
  }
  template <typename F>
  void spawn(F&& f) {
    boost::asio::post(pool_, std::forward<F>(f));
  }

private:
  boost::asio::thread_pool pool_;
};

} // namespace async_bench

#define ASYNC_BENCH_POOLS_ASIO async_bench::asio_pool,

#else

#define ASYNC_BENCH_POOLS_ASIO

#endif

#endif
