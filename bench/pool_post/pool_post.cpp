// SPDX-License-Identifier: BSL-1.0
// post + future.get of tiny tasks from 1 and 4 submitters, W workers.
#include "adapters/async_threadpool.h"
#include "pool_harness.h"
#if ASYNC_BENCH_HAVE_ASIO
#include "adapters/asio_pool.h"
#endif
#include "adapters/std_async.h"
#if ASYNC_BENCH_HAVE_BOOST_ASYNC
#include "adapters/boost_async.h"
#endif

int main(int argc, char** argv) {
  using namespace async_bench;
  return run_main(argc, argv, [] {
    register_pool_post<async_pool>();
#if ASYNC_BENCH_HAVE_ASIO
    register_pool_post<asio_pool>();
#endif
    register_pool_post<std_async>(false); // a thread per call: the worker count does not apply
#if ASYNC_BENCH_HAVE_BOOST_ASYNC
    register_pool_post<boost_async>(false);
#endif
  });
}
