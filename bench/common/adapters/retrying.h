// SPDX-License-Identifier: BSL-1.0
// The waiting calls of an adapter whose queue has only try calls: push and pop repeat
// try_push / try_pop with the harness's spin_wait (retry) until they succeed.
#ifndef ASYNC_BENCH_ADAPTERS_RETRYING_H
#define ASYNC_BENCH_ADAPTERS_RETRYING_H

#include "../harness.h"

namespace async_bench {

/// Base of an adapter with try calls (CRTP): `Derived` defines
///   static bool try_push(queue&, T& v)  (called again with the same v after a false)
///   static bool try_pop(queue&, T& v)
/// and gets push() and pop() built from them. An adapter whose queue has a call that never
/// fails or that waits by itself defines that push() or pop() and hides this one.
template <typename Derived, typename Queue, typename T>
struct retrying_adapter : owning_adapter<Queue, T> {
  static void push(Queue& q, T v) {
    retry([&] { return Derived::try_push(q, v); });
  }
  static T pop(Queue& q) {
    T v{};
    retry([&] { return Derived::try_pop(q, v); });
    return v;
  }
};

} // namespace async_bench

#endif
