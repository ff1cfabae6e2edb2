// SPDX-License-Identifier: BSL-1.0
//
// Spreading consecutive tickets over cache lines, the one way both queues do it. A run of
// entries is laid out as `spread` lines of `per_line` entries each, and index k of the run goes
// to line k % spread, at position k / spread on that line:
//
//   spread = 4, per_line = 4:   line 0: 0 4 8 12   line 1: 1 5 9 13   line 2: 2 6 10 14  ...
//
// so that threads holding neighbouring tickets write different lines, and a line comes back
// every `spread` tickets. The bounded queue spreads each block of its ring so (bounded/
// ring_layout.h), the unbounded queue the groups of slots of a segment (unbounded/
// segment_list.h, SPREAD_TICKETS).
#ifndef ASYNC_DETAIL_SPREAD_H
#define ASYNC_DETAIL_SPREAD_H

#include "config.h"

#include <cstddef>

namespace async {
namespace detail {

/// Where index k (k < spread * per_line) of a spread run lies, counted in entries from the
/// run's start. Thread-safe (a pure function).
constexpr std::size_t spread_index(std::size_t k, std::size_t spread, std::size_t per_line) {
  return (k % spread) * per_line + k / spread;
}

/// spread_index where spread and per_line are powers of two, given by their logarithms: shifts
/// and masks on the hot path. Thread-safe (a pure function).
constexpr std::size_t spread_index_pow2(std::size_t k, std::size_t spread_shift,
                                        std::size_t line_shift) {
  return ((k & ((std::size_t(1) << spread_shift) - 1)) << line_shift) | (k >> spread_shift);
}

} // namespace detail
} // namespace async

#endif // ASYNC_DETAIL_SPREAD_H
