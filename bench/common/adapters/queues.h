// SPDX-License-Identifier: BSL-1.0
// Every queue competitor that this build has: ours first (the tables compare the others with
// the first async:: entry), then each peer that CMake found.
#ifndef ASYNC_BENCH_ADAPTERS_QUEUES_H
#define ASYNC_BENCH_ADAPTERS_QUEUES_H

#include "async_bounded_queue.h"
#include "async_queue.h"
#include "atomic_queue.h"
#include "boost_lockfree.h"
#include "boost_spsc.h"
#include "moodycamel.h"
#include "reference_ring.h"
#include "tbb_queues.h"

namespace async_bench {

/// The competitors for element type T (those that cannot hold a T are left out).
template <typename T>
using queue_competitors =
    type_list<ASYNC_BENCH_QUEUES_ASYNC_BOUNDED ASYNC_BENCH_QUEUES_ASYNC_UNBOUNDED
                  ASYNC_BENCH_QUEUES_REFERENCE_RING ASYNC_BENCH_QUEUES_ATOMIC_QUEUE
                      ASYNC_BENCH_QUEUES_TBB ASYNC_BENCH_QUEUES_MOODYCAMEL
                          ASYNC_BENCH_QUEUES_BOOST_LOCKFREE ASYNC_BENCH_QUEUES_BOOST_SPSC void>;

/// Calls f(tag<Adapter>()) for each queue competitor of the element type that --async_type
/// chose, in order: the registration loop of the scenarios that take an element type.
template <typename F>
void for_each_queue(F f) {
  with_element_type([&](auto element) {
    using T = typename decltype(element)::type;
    for_each_competitor(queue_competitors<T>(), f);
  });
}

} // namespace async_bench

#endif
