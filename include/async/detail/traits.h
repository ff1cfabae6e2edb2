// SPDX-License-Identifier: BSL-1.0
//
// Reading the knobs of a traits struct with a fallback for each missing member, so that a user's
// traits struct may define only what it changes, and the original library's traits structs
// (NOEXCEPT_CHECK, CachelineSize, CachelineAlignment, sequence_type) keep compiling.
#ifndef ASYNC_DETAIL_TRAITS_H
#define ASYNC_DETAIL_TRAITS_H

#include "config.h"

#include "cache.h"

#include <cstddef>
#include <cstdint>
#include <type_traits>

namespace async {
namespace detail {

template <typename...>
using void_t = void;

template <typename Traits, typename = void>
struct traits_noexcept_check : std::false_type {};
template <typename Traits>
struct traits_noexcept_check<Traits, void_t<decltype(Traits::NOEXCEPT_CHECK)>>
    : std::integral_constant<bool, Traits::NOEXCEPT_CHECK> {};

template <typename Traits, typename = void>
struct traits_cacheline : std::integral_constant<std::size_t, cache_line_size> {};
template <typename Traits>
struct traits_cacheline<Traits, void_t<decltype(Traits::CachelineSize)>>
    : std::integral_constant<std::size_t, Traits::CachelineSize> {};

template <typename Traits, typename = void>
struct traits_spin_budget : std::integral_constant<unsigned, 256> {};
template <typename Traits>
struct traits_spin_budget<Traits, void_t<decltype(Traits::SPIN_BUDGET)>>
    : std::integral_constant<unsigned, Traits::SPIN_BUDGET> {};

// The unbounded queue's knobs (defaults as documented in async::traits).
template <typename Traits, typename = void>
struct traits_segment_size : std::integral_constant<std::size_t, 256> {};
template <typename Traits>
struct traits_segment_size<Traits, void_t<decltype(Traits::SEGMENT_SIZE)>>
    : std::integral_constant<std::size_t, Traits::SEGMENT_SIZE> {};

template <typename Traits, typename = void>
struct traits_level1 : std::integral_constant<std::size_t, 512> {};
template <typename Traits>
struct traits_level1<Traits, void_t<decltype(Traits::NODE_LEVEL1)>>
    : std::integral_constant<std::size_t, Traits::NODE_LEVEL1> {};

template <typename Traits, typename = void>
struct traits_level2 : std::integral_constant<std::size_t, 1024> {};
template <typename Traits>
struct traits_level2<Traits, void_t<decltype(Traits::NODE_LEVEL2)>>
    : std::integral_constant<std::size_t, Traits::NODE_LEVEL2> {};

template <typename Traits, typename = void>
struct traits_level3 : std::integral_constant<std::size_t, 4> {};
template <typename Traits>
struct traits_level3<Traits, void_t<decltype(Traits::NODE_LEVEL3)>>
    : std::integral_constant<std::size_t, Traits::NODE_LEVEL3> {};

template <typename Traits, typename = void>
struct traits_index_bits : std::integral_constant<unsigned, 32> {};
template <typename Traits>
struct traits_index_bits<Traits, void_t<decltype(Traits::INDEX_BITS)>>
    : std::integral_constant<unsigned, Traits::INDEX_BITS> {};

template <typename Traits, typename = void>
struct traits_tag_bits : std::integral_constant<unsigned, 32> {};
template <typename Traits>
struct traits_tag_bits<Traits, void_t<decltype(Traits::TAG_BITS)>>
    : std::integral_constant<unsigned, Traits::TAG_BITS> {};

/// Test seam: the ticket both counters of a queue start from (tests start near a wrap point).
struct first_ticket {
  std::uint64_t value;
};

} // namespace detail
} // namespace async

#endif // ASYNC_DETAIL_TRAITS_H
