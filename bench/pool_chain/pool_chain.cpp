// SPDX-License-Identifier: BSL-1.0
// Chained tasks: I roots, each task posting the next link of its chain (D links per chain).
#include "adapters/async_threadpool.h"
#include "pool_harness.h"
#if ASYNC_BENCH_HAVE_ASIO
#include "adapters/asio_pool.h"
#endif
#if ASYNC_BENCH_HAVE_TBB
#include "adapters/tbb_task_group.h"
#endif

int main(int argc, char** argv) {
  using namespace async_bench;
  return run_main(argc, argv, [] {
    for (int roots : {1, 16}) {
      register_pool_chain<async_pool>(roots);
#if ASYNC_BENCH_HAVE_ASIO
      register_pool_chain<asio_pool>(roots);
#endif
#if ASYNC_BENCH_HAVE_TBB
      register_pool_chain<tbb_group>(roots);
#endif
    }
  });
}
