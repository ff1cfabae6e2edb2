// SPDX-License-Identifier: BSL-1.0
//
// A link of the unbounded queue: an {index, tag} pair packed into one 64-bit word, so that a
// single 64-bit CAS both names a node (by its index into type-stable node_storage) and proves
// that the node has not been recycled since the word was read (the tag changes at every
// reuse). One plain 64-bit atomic: lock-free on x86-64, AArch64 and ARMv7 alike, with no
// 16-byte CAS and no -latomic.
#ifndef ASYNC_DETAIL_UNBOUNDED_TAGGED_INDEX_H
#define ASYNC_DETAIL_UNBOUNDED_TAGGED_INDEX_H

#include "../config.h"

#include <cstdint>

namespace async {
namespace detail {

/// The packing of an index of IndexBits bits and a tag of TagBits bits (IndexBits + TagBits
/// <= 64). The all-ones index is reserved as "no node". Tags count modulo 2^TagBits: a
/// thread that stalls across exactly 2^TagBits reuses of one node could be fooled, so the
/// defaults (32/32) make that take billions of reuses; tests use small widths to exercise the
/// wrap.
template <unsigned IndexBits = 32, unsigned TagBits = 32>
struct tagged_index {
  static_assert(IndexBits >= 1 && IndexBits <= 32,
                "tagged_index: the index must have between 1 and 32 bits.");
  static_assert(TagBits >= 1 && TagBits <= 32, "tagged_index: the tag must have 1 to 32 bits.");
  static_assert(IndexBits + TagBits <= 64, "tagged_index: index and tag must fit in 64 bits.");

  using word = std::uint64_t;

  static constexpr std::uint32_t index_mask =
      static_cast<std::uint32_t>((std::uint64_t(1) << IndexBits) - 1);
  static constexpr std::uint32_t tag_mask =
      static_cast<std::uint32_t>((std::uint64_t(1) << TagBits) - 1);

  /// The reserved index meaning "no node" (all ones).
  static constexpr std::uint32_t null_index = index_mask;

  static constexpr word make(std::uint32_t index, std::uint32_t tag) noexcept {
    return (static_cast<word>(tag & tag_mask) << IndexBits) | (index & index_mask);
  }
  static constexpr std::uint32_t index(word w) noexcept {
    return static_cast<std::uint32_t>(w) & index_mask;
  }
  static constexpr std::uint32_t tag(word w) noexcept {
    return static_cast<std::uint32_t>(w >> IndexBits) & tag_mask;
  }
  static constexpr bool is_null(word w) noexcept { return index(w) == null_index; }
  /// The tag after `t`, wrapping to 0 after tag_mask.
  static constexpr std::uint32_t next_tag(std::uint32_t t) noexcept { return (t + 1) & tag_mask; }
};

#if ASYNC_CPLUSPLUS < 17
// Definitions for C++14, where an odr-used static constexpr member needs one.
template <unsigned I, unsigned T>
constexpr std::uint32_t tagged_index<I, T>::index_mask;
template <unsigned I, unsigned T>
constexpr std::uint32_t tagged_index<I, T>::tag_mask;
template <unsigned I, unsigned T>
constexpr std::uint32_t tagged_index<I, T>::null_index;
#endif

} // namespace detail
} // namespace async

#endif // ASYNC_DETAIL_UNBOUNDED_TAGGED_INDEX_H
