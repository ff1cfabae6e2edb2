// SPDX-License-Identifier: BSL-1.0
// boost::lockfree::queue (Michael-Scott with a node free list; may allocate when it grows),
// through its try calls with the harness's spin_wait. The capacity argument pre-allocates.
#ifndef ASYNC_BENCH_ADAPTERS_BOOST_LOCKFREE_H
#define ASYNC_BENCH_ADAPTERS_BOOST_LOCKFREE_H

#if ASYNC_BENCH_HAVE_ASIO

#include "../harness.h"

#include <boost/lockfree/queue.hpp>

namespace async_bench {

struct boost_lockfree_queue : owning_adapter<boost::lockfree::queue<std::uint64_t>> {
  static const char* name() { return "boost::lockfree::queue"; }
  static void push(queue& q, std::uint64_t v) {
    retry([&] { return q.push(v); });
  }
  static std::uint64_t pop(queue& q) {
    std::uint64_t v = 0;
    retry([&] { return try_pop(q, v); });
    return v;
  }
  static bool try_pop(queue& q, std::uint64_t& v) { return q.pop(v); }
};

} // namespace async_bench

#define ASYNC_BENCH_QUEUES_BOOST_LOCKFREE async_bench::boost_lockfree_queue,

#else

#define ASYNC_BENCH_QUEUES_BOOST_LOCKFREE

#endif

#endif
