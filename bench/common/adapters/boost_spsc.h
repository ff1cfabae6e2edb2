// SPDX-License-Identifier: BSL-1.0
// boost::lockfree::spsc_queue: a single-producer single-consumer ring of run-time capacity,
// through its try calls with the harness's spin_wait. Valid for 1p1c and ping-pong only.
#ifndef ASYNC_BENCH_ADAPTERS_BOOST_SPSC_H
#define ASYNC_BENCH_ADAPTERS_BOOST_SPSC_H

#if ASYNC_BENCH_HAVE_ASIO

#include "retrying.h"

#include <boost/lockfree/spsc_queue.hpp>

namespace async_bench {

template <typename T>
struct boost_spsc_queue : retrying_adapter<boost_spsc_queue<T>, boost::lockfree::spsc_queue<T>, T> {
  using queue = boost::lockfree::spsc_queue<T>;
  static const char* name() { return "boost::lockfree::spsc_queue"; }
  static constexpr bool bounded = true;
  static constexpr bool spsc = true;
  static bool try_push(queue& q, const T& v) { return q.push(v); }
  static bool try_pop(queue& q, T& v) { return q.pop(v); }
};

} // namespace async_bench

#define ASYNC_BENCH_QUEUES_BOOST_SPSC async_bench::boost_spsc_queue<T>,

#else

#define ASYNC_BENCH_QUEUES_BOOST_SPSC

#endif

#endif
