// SPDX-License-Identifier: BSL-1.0
// boost::lockfree::queue (Michael-Scott with a node free list; may allocate when it grows),
// through its try calls with the harness's spin_wait. The capacity argument pre-allocates. It
// holds trivially copyable elements only: not std::string.
#ifndef ASYNC_BENCH_ADAPTERS_BOOST_LOCKFREE_H
#define ASYNC_BENCH_ADAPTERS_BOOST_LOCKFREE_H

#if ASYNC_BENCH_HAVE_ASIO

#include "retrying.h"

#include <boost/lockfree/queue.hpp>

#include <type_traits>

namespace async_bench {

template <typename T>
struct boost_lockfree_queue
    : retrying_adapter<boost_lockfree_queue<T>, boost::lockfree::queue<T>, T> {
  using queue = boost::lockfree::queue<T>;
  static const char* name() { return "boost::lockfree::queue"; }
  static bool try_push(queue& q, const T& v) { return q.push(v); }
  static bool try_pop(queue& q, T& v) { return q.pop(v); }
};

} // namespace async_bench

#define ASYNC_BENCH_QUEUES_BOOST_LOCKFREE                                                          \
  typename std::conditional<std::is_trivially_copyable<T>::value,                                  \
                            async_bench::boost_lockfree_queue<T>, void>::type,

#else

#define ASYNC_BENCH_QUEUES_BOOST_LOCKFREE

#endif

#endif
