// SPDX-License-Identifier: BSL-1.0
//
// The original library (d36u9/async v1.1.0) in one place: the members of its traits structs that
// have no meaning here, detected so that a struct setting one is rejected with a message that
// names the knob to set instead (MIGRATION.md), and its bounded_traits::sequence_type check.
#ifndef ASYNC_DETAIL_COMPAT_H
#define ASYNC_DETAIL_COMPAT_H

#include "config.h"

#include "traits.h"

#include <type_traits>

namespace async {
namespace detail {

// ---- members of the original library's traits (d36u9/async v1.1.0) ----------------------------
// The original laid a link out as Tagbits + L3bits + L2bits + L1bits + Basebits = 64 bits, one
// element per node. Here a node holds a segment of SEGMENT_SIZE elements and a link is
// INDEX_BITS + TAG_BITS, so those five members have no meaning: a traits struct that sets one
// is rejected (queue.h says which knob to set instead) rather than silently ignored.
template <typename Traits, typename = void>
struct sets_tagbits : std::false_type {};
template <typename Traits>
struct sets_tagbits<Traits, void_t<decltype(Traits::Tagbits)>> : std::true_type {};

template <typename Traits, typename = void>
struct sets_level1_bits : std::false_type {};
template <typename Traits>
struct sets_level1_bits<Traits, void_t<decltype(Traits::L1bits)>> : std::true_type {};

template <typename Traits, typename = void>
struct sets_level2_bits : std::false_type {};
template <typename Traits>
struct sets_level2_bits<Traits, void_t<decltype(Traits::L2bits)>> : std::true_type {};

template <typename Traits, typename = void>
struct sets_level3_bits : std::false_type {};
template <typename Traits>
struct sets_level3_bits<Traits, void_t<decltype(Traits::L3bits)>> : std::true_type {};

template <typename Traits, typename = void>
struct sets_basebits : std::false_type {};
template <typename Traits>
struct sets_basebits<Traits, void_t<decltype(Traits::Basebits)>> : std::true_type {};

// The original's bounded_traits::sequence_type: the ticket type. Tickets are 64-bit here; a
// 64-bit unsigned sequence_type is accepted (it is what is used), any other is rejected.
template <typename Traits, typename = void>
struct sequence_type_ok : std::true_type {};
template <typename Traits>
struct sequence_type_ok<Traits, void_t<typename Traits::sequence_type>>
    : std::integral_constant<bool, std::is_integral<typename Traits::sequence_type>::value &&
                                       std::is_unsigned<typename Traits::sequence_type>::value &&
                                       sizeof(typename Traits::sequence_type) == 8> {};

} // namespace detail
} // namespace async

#endif // ASYNC_DETAIL_COMPAT_H
