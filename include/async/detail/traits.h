// SPDX-License-Identifier: BSL-1.0
//
// Reading the knobs of a traits struct with a fallback for each missing member, so that a user's
// traits struct may define only what it changes, and the original library's traits structs
// (NOEXCEPT_CHECK, CachelineSize, CachelineAlignment, sequence_type) keep compiling.
#ifndef ASYNC_DETAIL_TRAITS_H
#define ASYNC_DETAIL_TRAITS_H

#include "config.h"

#include "cache.h"

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <type_traits>

namespace async {
namespace detail {

template <typename...>
using void_t = void;

/// false, but only once instantiated (for a static_assert in a template that must not be used).
template <typename...>
struct dependent_false : std::false_type {};

// knob_X<Traits, Defaults>::value is Traits::X when the user's struct has that member, else
// Defaults::X, where Defaults is the library's own traits struct (async::traits or
// async::bounded_traits): the one place where each default is written.
template <typename Traits, typename Defaults, typename = void>
struct knob_noexcept_check : std::integral_constant<bool, Defaults::NOEXCEPT_CHECK> {};
template <typename Traits, typename Defaults>
struct knob_noexcept_check<Traits, Defaults, void_t<decltype(Traits::NOEXCEPT_CHECK)>>
    : std::integral_constant<bool, Traits::NOEXCEPT_CHECK> {};

template <typename Traits, typename Defaults, typename = void>
struct knob_cacheline : std::integral_constant<std::size_t, Defaults::CachelineSize> {};
template <typename Traits, typename Defaults>
struct knob_cacheline<Traits, Defaults, void_t<decltype(Traits::CachelineSize)>>
    : std::integral_constant<std::size_t, Traits::CachelineSize> {};

template <typename Traits, typename Defaults, typename = void>
struct knob_spin_budget : std::integral_constant<unsigned, Defaults::SPIN_BUDGET> {};
template <typename Traits, typename Defaults>
struct knob_spin_budget<Traits, Defaults, void_t<decltype(Traits::SPIN_BUDGET)>>
    : std::integral_constant<unsigned, Traits::SPIN_BUDGET> {};

template <typename Traits, typename Defaults, typename = void>
struct knob_segment_size : std::integral_constant<std::size_t, Defaults::SEGMENT_SIZE> {};
template <typename Traits, typename Defaults>
struct knob_segment_size<Traits, Defaults, void_t<decltype(Traits::SEGMENT_SIZE)>>
    : std::integral_constant<std::size_t, Traits::SEGMENT_SIZE> {};

template <typename Traits, typename Defaults, typename = void>
struct knob_spread_tickets : std::integral_constant<bool, Defaults::SPREAD_TICKETS> {};
template <typename Traits, typename Defaults>
struct knob_spread_tickets<Traits, Defaults, void_t<decltype(Traits::SPREAD_TICKETS)>>
    : std::integral_constant<bool, Traits::SPREAD_TICKETS> {};

template <typename Traits, typename Defaults, typename = void>
struct knob_level1 : std::integral_constant<std::size_t, Defaults::NODE_LEVEL1> {};
template <typename Traits, typename Defaults>
struct knob_level1<Traits, Defaults, void_t<decltype(Traits::NODE_LEVEL1)>>
    : std::integral_constant<std::size_t, Traits::NODE_LEVEL1> {};

template <typename Traits, typename Defaults, typename = void>
struct knob_level2 : std::integral_constant<std::size_t, Defaults::NODE_LEVEL2> {};
template <typename Traits, typename Defaults>
struct knob_level2<Traits, Defaults, void_t<decltype(Traits::NODE_LEVEL2)>>
    : std::integral_constant<std::size_t, Traits::NODE_LEVEL2> {};

template <typename Traits, typename Defaults, typename = void>
struct knob_level3 : std::integral_constant<std::size_t, Defaults::NODE_LEVEL3> {};
template <typename Traits, typename Defaults>
struct knob_level3<Traits, Defaults, void_t<decltype(Traits::NODE_LEVEL3)>>
    : std::integral_constant<std::size_t, Traits::NODE_LEVEL3> {};

template <typename Traits, typename Defaults, typename = void>
struct knob_index_bits : std::integral_constant<unsigned, Defaults::INDEX_BITS> {};
template <typename Traits, typename Defaults>
struct knob_index_bits<Traits, Defaults, void_t<decltype(Traits::INDEX_BITS)>>
    : std::integral_constant<unsigned, Traits::INDEX_BITS> {};

template <typename Traits, typename Defaults, typename = void>
struct knob_tag_bits : std::integral_constant<unsigned, Defaults::TAG_BITS> {};
template <typename Traits, typename Defaults>
struct knob_tag_bits<Traits, Defaults, void_t<decltype(Traits::TAG_BITS)>>
    : std::integral_constant<unsigned, Traits::TAG_BITS> {};

/// Test seam: the atomic type template that a queue's protocol words use. std::atomic unless the
/// traits struct has a member template `template <typename V> using atomic = ...;` (the
/// library's deterministic-schedule tests put a scheduled atomic in that way).
template <typename Traits, typename = void>
struct knob_atomic {
  template <typename V>
  using type = std::atomic<V>;
};
template <typename Traits>
struct knob_atomic<Traits, void_t<typename Traits::template atomic<std::uint64_t>>> {
  template <typename V>
  using type = typename Traits::template atomic<V>;
};

/// Test seam: the ticket both counters of a queue start from (tests start near a wrap point).
struct first_ticket {
  std::uint64_t value;
};

} // namespace detail
} // namespace async

#endif // ASYNC_DETAIL_TRAITS_H
