// SPDX-License-Identifier: BSL-1.0
// TBB's task_group inside a task_arena of the given size (no futures: chains only).
#ifndef ASYNC_BENCH_ADAPTERS_TBB_TASK_GROUP_H
#define ASYNC_BENCH_ADAPTERS_TBB_TASK_GROUP_H

#if ASYNC_BENCH_HAVE_TBB

#include "../registry.h"

#include <tbb/task_arena.h>
#include <tbb/task_group.h>

#include <utility>

namespace async_bench {

class tbb_group : public pool_traits {
public:
  static const char* name() { return "tbb::task_group"; }
  static constexpr bool futures = false;
  static constexpr bool idles = false;
  // One slot is reserved for the thread that creates the arena (it only submits and waits),
  // so `workers` TBB worker threads run the tasks, like the other pools.
  explicit tbb_group(int workers) : arena_(workers + 1, 1) {}
  ~tbb_group() {
    arena_.execute([this] { group_.wait(); });
  }
  template <typename F>
  void spawn(F&& f) {
    arena_.execute([this, &f] { group_.run(std::forward<F>(f)); });
  }

private:
  tbb::task_arena arena_;
  tbb::task_group group_;
};

} // namespace async_bench

#define ASYNC_BENCH_POOLS_TBB async_bench::tbb_group,

#else

#define ASYNC_BENCH_POOLS_TBB

#endif

#endif
