// SPDX-License-Identifier: BSL-1.0
// Every pool competitor that this build has: ours first, then each peer that CMake found.
#ifndef ASYNC_BENCH_ADAPTERS_POOLS_H
#define ASYNC_BENCH_ADAPTERS_POOLS_H

#include "asio_pool.h"
#include "async_threadpool.h"
#include "boost_async.h"
#include "std_async.h"
#include "tbb_task_group.h"

namespace async_bench {

using pool_competitors =
    type_list<ASYNC_BENCH_POOLS_ASYNC ASYNC_BENCH_POOLS_ASIO ASYNC_BENCH_POOLS_TBB
                  ASYNC_BENCH_POOLS_STD_ASYNC ASYNC_BENCH_POOLS_BOOST_ASYNC void>;

} // namespace async_bench

#endif
