// SPDX-License-Identifier: BSL-1.0
// The competitors: what each adapter says about itself, and the lists scenarios pick from.
//
// Every adapter header (adapters/*.h) guards itself with its peer's ASYNC_BENCH_HAVE_* macro and
// adds its adapters to a list macro (empty when the peer is absent); adapters/queues.h and
// adapters/pools.h collect those into one list each. A scenario includes a list and registers
// the competitors whose traits fit it, with for_each_competitor: no scenario repeats the ladder
// of #if's, and a new peer is one adapter header.
#ifndef ASYNC_BENCH_COMMON_REGISTRY_H
#define ASYNC_BENCH_COMMON_REGISTRY_H

#include <type_traits>

namespace async_bench {

/// What a queue competitor is. Adapters derive from it and override what differs.
struct queue_traits {
  static constexpr bool ours = false; // one of this library's (the tables compare with it)
  static constexpr bool bounded =
      false;                          // a capacity bounds it (else it pre-allocates or ignores it)
  static constexpr bool spsc = false; // one producer and one consumer only
  static constexpr bool bulk = false; // has push_bulk / pop_bulk
  static constexpr bool blocking = false; // pop waits inside the queue (not in the harness's retry)
  static constexpr bool primary = true; // the queue's main calls (false: its try calls, tokens...)
};

/// What a pool competitor is.
struct pool_traits {
  static constexpr bool ours = false;   // this library's pool
  static constexpr bool futures = true; // post(f) returns a future
  static constexpr bool chains = true;  // spawn(f) without a future, from its own tasks
  static constexpr bool thread_per_call =
      false;                          // a thread per call: the worker count does not apply
  static constexpr bool idles = true; // its workers stay and wait (an idle cost to measure)
};

template <typename... T>
struct type_list {};

template <typename T>
struct tag {
  using type = T;
};

template <typename A, typename F>
void visit_competitor(F& f) {
  if constexpr (!std::is_void<A>::value) {
    f(tag<A>());
  }
}

/// Calls f(tag<A>()) for each A of the list, in order (`void` ends a list built from macros).
template <typename... A, typename F>
void for_each_competitor(type_list<A...>, F f) {
  (visit_competitor<A>(f), ...);
}

} // namespace async_bench

#endif // ASYNC_BENCH_COMMON_REGISTRY_H
