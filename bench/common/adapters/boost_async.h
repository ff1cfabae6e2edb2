// SPDX-License-Identifier: BSL-1.0
// boost::async(boost::launch::async, f) from Boost.Thread: a thread per call, a boost::future.
#ifndef ASYNC_BENCH_ADAPTERS_BOOST_ASYNC_H
#define ASYNC_BENCH_ADAPTERS_BOOST_ASYNC_H

#define BOOST_THREAD_VERSION 4
#include <boost/thread/future.hpp>

#include <utility>

namespace async_bench {

class boost_async {
public:
  static const char* name() { return "boost::async"; }
  explicit boost_async(int) {}
  template <typename F>
  auto post(F&& f) {
    return boost::async(boost::launch::async, std::forward<F>(f));
  }
};

} // namespace async_bench

#endif
