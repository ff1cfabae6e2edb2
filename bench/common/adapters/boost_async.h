// SPDX-License-Identifier: BSL-1.0
// boost::async(boost::launch::async, f) from Boost.Thread: a thread per call, a boost::future.
#ifndef ASYNC_BENCH_ADAPTERS_BOOST_ASYNC_H
#define ASYNC_BENCH_ADAPTERS_BOOST_ASYNC_H

#if ASYNC_BENCH_HAVE_BOOST_ASYNC

#include "../registry.h"

#define BOOST_THREAD_VERSION 4
#include <boost/thread/future.hpp>

#include <utility>

namespace async_bench {

class boost_async : public pool_traits {
public:
  static const char* name() { return "boost::async"; }
  static constexpr bool chains = false;
  static constexpr bool thread_per_call = true;
  static constexpr bool idles = false;
  explicit boost_async(int) {}
  template <typename F>
  auto post(F&& f) {
    return boost::async(boost::launch::async, std::forward<F>(f));
  }
};

} // namespace async_bench

#define ASYNC_BENCH_POOLS_BOOST_ASYNC async_bench::boost_async,

#else

#define ASYNC_BENCH_POOLS_BOOST_ASYNC

#endif

#endif
