// SPDX-License-Identifier: BSL-1.0
//
// ticket_counters: the part both queues are built on. A queue hands out tickets from two
// 64-bit counters, head_ for consumers and tail_ for producers (fetch_add, or a CAS in the
// bounded queue's try calls); a ticket names the slot its caller uses, and its order is the
// queue's order. Every call writes one of the two, so each has a cache line of its own: apart
// from the other, from the fields of the queue before them and from whatever follows. Each
// queue derives from this class, and the check of that layout is written here once.
#ifndef ASYNC_DETAIL_TICKET_COUNTERS_H
#define ASYNC_DETAIL_TICKET_COUNTERS_H

#include "config.h"

#include "cache.h"
#include "traits.h"

#include <cstddef>
#include <cstdint>
#include <type_traits>

namespace async {
namespace detail {

/// The head and tail tickets of a queue, each padded to a line of its own; Atom is the queue's
/// atomic seam, Line its false-sharing granule.
template <template <typename> class Atom, std::size_t Line>
class ticket_counters {
protected:
  using counter = Atom<std::uint64_t>;

  /// Both counters start at `first` (a test seam starts them near a wrap point).
  explicit ticket_counters(std::uint64_t first) : head_(first), tail_(first) {
    check_layout(std::is_standard_layout<ticket_counters>{});
  }

  // Written by consumers: the next ticket to consume.
  padded<counter, Line> head_;
  // Written by producers, and by close() (the unbounded queue's closed bit, the bounded
  // queue's last ticket): the next ticket to produce.
  padded<counter, Line> tail_;

private:
  // A line before head_, a line between the two, a line after tail_: whatever the queue puts
  // around this base shares no line with either counter. offsetof needs a standard-layout
  // class, which this is with std::atomic (a unit test holds it to that); a test's atomic type
  // may make it otherwise, and is not checked.
  static void check_layout(std::false_type) noexcept {}
  static void check_layout(std::true_type) noexcept {
    constexpr std::size_t head = padded_value_at<counter, Line>(offsetof(ticket_counters, head_));
    constexpr std::size_t tail = padded_value_at<counter, Line>(offsetof(ticket_counters, tail_));
    static_assert(head >= Line && tail >= head + sizeof(counter) + Line &&
                      sizeof(ticket_counters) >= tail + sizeof(counter) + Line,
                  "async: a queue's head_ and tail_ must each have a line of their own.");
  }
};

/// The ticket_counters of a queue with these traits (Defaults: the library's traits struct for
/// that queue, which holds the knobs' defaults).
template <typename Traits, typename Defaults>
using ticket_counters_for =
    ticket_counters<knob_atomic<Traits>::template type, knob_cacheline<Traits, Defaults>::value>;

} // namespace detail
} // namespace async

#endif // ASYNC_DETAIL_TICKET_COUNTERS_H
