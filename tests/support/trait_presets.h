// SPDX-License-Identifier: BSL-1.0
// Named traits presets for the tests: modifiers that set one knob on top of any traits struct
// (async::traits or async::bounded_traits), and shapes of the unbounded queue's node storage,
// each with the reason for its numbers. A test names the preset instead of writing the knobs.
#ifndef ASYNC_TESTS_SUPPORT_TRAIT_PRESETS_H
#define ASYNC_TESTS_SUPPORT_TRAIT_PRESETS_H

#include <async/queue.h>

#include <cstddef>

namespace async_test {

// ---- modifiers ---------------------------------------------------------------------------------

/// NOEXCEPT_CHECK on: enqueue returns false when the element's constructor throws.
template <typename Base>
struct checked : Base {
  static constexpr bool NOEXCEPT_CHECK = true;
};

/// SPIN_BUDGET = Budget: how long a waiter spins before it parks.
template <unsigned Budget, typename Base>
struct spin_budget : Base {
  static constexpr unsigned SPIN_BUDGET = Budget;
};

/// Waiters park at once (no spinning): every wait goes through the sleeper protocol, and a
/// consumer skips a slot at once when its producer has not published.
template <typename Base>
using no_spin = spin_budget<0, Base>;

/// Consecutive tickets side by side in their groups instead of spread over cache lines
/// (traits::SPREAD_TICKETS = false).
template <typename Base>
struct side_by_side : Base {
  static constexpr bool SPREAD_TICKETS = false;
};

/// The queue's atomics are `Atomic<V>` (the atomic seam): a test atomic that counts, stalls or
/// schedules the library's atomic operations.
template <typename Base, template <typename> class Atomic>
struct with_atomic : Base {
  template <typename V>
  using atomic = Atomic<V>;
};

// ---- shapes of the unbounded queue's node storage ----------------------------------------------

/// A storage of `Nodes` nodes of `Slots` slots (levels 1 and 2 hold one entry each): it runs
/// full after a handful of elements, so the paths for a full storage run (length_error, tickets
/// past the tail in segments that have no node).
template <std::size_t Nodes, std::size_t Slots = 4, typename Base = async::traits>
struct few_nodes : Base {
  static constexpr std::size_t SEGMENT_SIZE = Slots;
  static constexpr std::size_t NODE_LEVEL1 = 1;
  static constexpr std::size_t NODE_LEVEL2 = 1;
  static constexpr std::size_t NODE_LEVEL3 = Nodes;
};

/// 4-slot segments in a storage of L1 x L2 x L3 nodes, with links of `IndexBits` index bits
/// (L1 x L2 x L3 must stay below 2^IndexBits - 1) and `TagBits` tag bits: a segment change on
/// almost every call, and a tag that a test can wrap (start the tickets just below the wrap).
template <std::size_t L1, std::size_t L2, std::size_t L3, unsigned IndexBits, unsigned TagBits>
struct tiny_segments : async::traits {
  static constexpr std::size_t SEGMENT_SIZE = 4;
  static constexpr std::size_t NODE_LEVEL1 = L1;
  static constexpr std::size_t NODE_LEVEL2 = L2;
  static constexpr std::size_t NODE_LEVEL3 = L3;
  static constexpr unsigned INDEX_BITS = IndexBits;
  static constexpr unsigned TAG_BITS = TagBits;
};

/// For single-threaded tests: a node reused on almost every call, and a 16-bit tag that wraps
/// after 2^16 segments. 64 x 16 x 2 = 2048 nodes fit a 16-bit index.
using tiny_16bit_tags = tiny_segments<64, 16, 2, 16, 16>;

/// For many threads on few cores. A thread descheduled inside an operation holds back the
/// recycling of the segments after its own for as long as it sleeps (see the README), and on two
/// oversubscribed cores that is tens of milliseconds: 1023 x 512 x 2 nodes (just under 2^20, so
/// a 20-bit index) leave room for that. 16-bit tags would be too few: with 16 threads on 2 cores
/// a thread can sleep for 100 ms inside an operation, long enough for 2^16 segments to pass
/// (tiny_16bit_tags wraps them single-threaded); 24 bits need 2^24 segments (67M elements) to
/// pass during one stall.
using tiny_24bit_tags = tiny_segments<1023, 512, 2, 20, 24>;

/// tiny_24bit_tags with levels that are powers of two: 1024 x 256 x 4 = 2^20 nodes, which need a
/// 21-bit index.
using tiny_24bit_tags_pow2 = tiny_segments<1024, 256, 4, 21, 24>;

} // namespace async_test

#endif
