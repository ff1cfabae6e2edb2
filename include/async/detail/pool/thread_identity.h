// SPDX-License-Identifier: BSL-1.0
//
// thread_identity: what the calling thread is to the pools. The pool whose task it
// runs now, and as which worker (posts from there go to that worker's next slot or queue); the
// pool whose worker thread it is, from its start to its very end; and the tasks of pools that
// its current task interrupted (a pool's destructor that runs its own queued tasks on a worker
// of another pool, or of itself). A pool refuses to wait for itself from any of them.
//
// Each is a thread_local of the whole process (ASYNC_PROCESS_WIDE): a task that calls into
// another shared library of the program is still that pool's task there. So this is no
// template: an instantiation for the pool's types would take their visibility, hidden in a
// library built with -fvisibility=hidden, whatever the functions say (a test builds two such
// libraries). Pools and workers are kept as void pointers; the pool casts its own back.
#ifndef ASYNC_DETAIL_POOL_THREAD_IDENTITY_H
#define ASYNC_DETAIL_POOL_THREAD_IDENTITY_H

#include "../config.h"

#include "../scope_exit.h"

#include <utility>

namespace async {
namespace detail {

/// Not thread-safe: each thread reads and writes its own.
struct thread_identity {
  /// The pool whose task the calling thread runs right now (nullptr elsewhere).
  ASYNC_PROCESS_WIDE static const void*& current_pool() noexcept {
    static thread_local const void* pool = nullptr;
    return pool;
  }

  /// The calling thread's worker while it runs tasks of current_pool() as one (nullptr when it
  /// runs them as no worker, in a destructor).
  ASYNC_PROCESS_WIDE static void*& current_worker() noexcept {
    static thread_local void* w = nullptr;
    return w;
  }

  /// The pool whose worker the calling thread is, from its start to its very end (also while
  /// its thread_local destructors run, after current_pool() is cleared); nullptr elsewhere.
  ASYNC_PROCESS_WIDE static const void*& worker_of() noexcept {
    static thread_local const void* pool = nullptr;
    return pool;
  }

  /// Whether the calling thread runs a task of `pool`, now or underneath the task it runs.
  static bool runs_a_task_of(const void* pool) noexcept {
    if (current_pool() == pool) {
      return true;
    }
    for (const frame* f = outer_frames(); f != nullptr; f = f->outer) {
      if (f->pool == pool) {
        return true;
      }
    }
    return false;
  }

  /// Runs f() as a task of `pool`, as no worker of it. The task that the calling thread was
  /// running (of the pool it was running it for) is interrupted, not over: it stays recorded,
  /// so that a wait of that pool for itself is still refused from here.
  template <typename F>
  static void run_as_task_of(const void* pool, F&& f) {
    const void* const was = current_pool();
    void* const as = current_worker();
    const frame interrupted{was, outer_frames()};
    outer_frames() = &interrupted;
    current_pool() = pool;
    current_worker() = nullptr;
    const auto restore = at_scope_exit([was, as, &interrupted] {
      current_pool() = was;
      current_worker() = as;
      outer_frames() = interrupted.outer;
    });
    std::forward<F>(f)();
  }

private:
  struct frame {
    const void* pool;
    const frame* outer;
  };
  ASYNC_PROCESS_WIDE static const frame*& outer_frames() noexcept {
    static thread_local const frame* frames = nullptr;
    return frames;
  }
};

} // namespace detail
} // namespace async

#endif // ASYNC_DETAIL_POOL_THREAD_IDENTITY_H
