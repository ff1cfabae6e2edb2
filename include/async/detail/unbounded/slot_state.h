// SPDX-License-Identifier: BSL-1.0
//
// The unbounded queue's slot state, whole: the values of the one-byte word beside each element,
// every transition between them, and the memory order of each. Ticket t has one producer and
// one consumer; each transition is made by one of them:
//
//   empty -> full      the producer publishes its element (publish). The state stays full once
//                      the consumer has taken it; the node is reset to empty before reuse.
//   empty -> skipped   the consumer waited its spin and the element was not there (await): the
//                      producer, when it comes, finds the slot skipped and moves its element
//                      to a later ticket.
//   empty -> void      the producer gives the slot up: its constructor threw, or its bulk round
//                      was cut short (give_up). The consumer passes it.
//   empty -> writing   a producer whose element was skipped once claims its next slot before it
//   writing -> full    moves the element in (claim), then publishes it (publish_claimed), or
//   writing -> void    voids the slot if the move throws (void_claimed). A consumer never skips
//                      a writing slot: it waits for the move. So an element that is slow to
//                      move is skipped at most once, instead of being moved from ticket to
//                      ticket for as long as a consumer polls.
//
// One byte: a slot costs one byte beside its element.
#ifndef ASYNC_DETAIL_UNBOUNDED_SLOT_STATE_H
#define ASYNC_DETAIL_UNBOUNDED_SLOT_STATE_H

#include "../config.h"

#include "../backoff.h"
#include "../perturb.h"

#include <atomic>
#include <cstdint>

namespace async {
namespace detail {

struct slot_state {
  using type = std::uint8_t;
  static constexpr type empty = 0; // what segment_list resets a slot to
  static constexpr type full = 1;
  static constexpr type skipped = 2;
  static constexpr type voided = 3;
  static constexpr type writing = 4;

  /// Producer: publishes the element. False when the consumer skipped the slot first.
  template <typename Word>
  static bool publish(Word& word) noexcept {
    // (UP1) release: publishes the element (pairs with the consumer's (UT1)). Not seq_cst: the
    // waiter check that follows (EC2) is ordered by the ticket's (UE1), which a registered
    // consumer's second look reads; a consumer never parks on a slot.
    return from_empty(word, full, std::memory_order_release);
  }

  /// Producer: gives the slot up (empty -> void). Returns empty when it did so; otherwise what
  /// it found: skipped (the consumer has left, and the producer is the last to leave) or void
  /// (already given up: a bulk call voiding what is left after a throw).
  template <typename Word>
  static type give_up(Word& word) noexcept {
    type expected = empty;
    // release: what a throwing constructor wrote in the element's memory happens before the
    // consumer that passes the slot (its (UT1)), and through its finish() before the node's
    // reuse. relaxed on failure: what is read (a skip, or our own void) publishes nothing.
    if (word.compare_exchange_strong(expected, voided, std::memory_order_release,
                                     std::memory_order_relaxed)) {
      return empty;
    }
    return expected;
  }

  /// Producer of a carried element: claims the slot (empty -> writing) before moving the
  /// element in. False when the consumer skipped it first: the slot is then left to the
  /// producer, the last party, and nothing was moved.
  template <typename Word>
  static bool claim(Word& word) noexcept {
    // relaxed: nothing is published by the claim (the release comes with the element, (UP2)),
    // and a skip publishes nothing.
    return from_empty(word, writing, std::memory_order_relaxed);
  }

  /// Producer of a claimed slot: publishes the element moved in.
  template <typename Word>
  static void publish_claimed(Word& word) noexcept {
    // (UP2) release: publishes the element, as (UP1) (pairs with (UT2)); only this producer
    // writes a claimed slot.
    word.store(full, std::memory_order_release);
  }

  /// Producer of a claimed slot: the move threw, nothing is there.
  template <typename Word>
  static void void_claimed(Word& word) noexcept {
    // release: the consumer waiting on the claim sees that nothing is there.
    word.store(voided, std::memory_order_release);
  }

  /// A producer's step from empty to `to`, `success` its order. False when the slot is no
  /// longer empty: its consumer skipped it (relaxed on failure: the skip publishes nothing,
  /// see await()).
  template <typename Word>
  static bool from_empty(Word& word, type to, std::memory_order success) noexcept {
    type expected = empty;
    return word.compare_exchange_strong(expected, to, success, std::memory_order_relaxed);
  }

  /// Consumer: waits briefly for the slot's element. Returns full (the element is there),
  /// skipped (this call skipped the slot for good: its producer will move the element
  /// elsewhere) or voided (nothing came: pass the slot). While the slot is empty it spins up to
  /// `spins` pause rounds, asking no_producer() every 32 rounds whether the ticket can still
  /// get a producer (true ends the wait at once); a writing slot is waited for to the end.
  template <typename Word, typename NoProducer>
  static type await(Word& word, unsigned spins, NoProducer no_producer) noexcept {
    // (UT1) acquire: pairs with (UP1) for the element, and with give_up()'s release.
    type now = word.load(std::memory_order_acquire);
    if (ASYNC_UNLIKELY(now == empty)) {
      for (unsigned k = 0; k < spins; ++k) {
        if ((k & 31) == 0 && no_producer()) {
          break;
        }
        cpu_pause();
        now = word.load(std::memory_order_acquire); // (UT1)
        if (now != empty) {
          break;
        }
      }
      if (now == empty) {
        ASYNC_PERTURB(); // about to skip
        // acquire on failure: we read what the producer published, as (UT1). The skip itself
        // publishes nothing (this call never touched the slot's element): acquire on success
        // only because C++14 wants no weaker an order for success than for failure.
        if (word.compare_exchange_strong(now, skipped, std::memory_order_acquire,
                                         std::memory_order_acquire)) {
          return skipped; // the producer (if one ever comes) is the last to leave
        }
      }
    }
    // A producer claimed the slot for an element it is moving in: wait for the move (pause,
    // then yield; it cannot park: nobody wakes a claimed slot's waiter).
    if (ASYNC_UNLIKELY(now == writing)) {
      spin_then_yield active(spins);
      do {
        active.wait();
        // (UT2) acquire: pairs with (UP2), or with the release that voids the slot.
        now = word.load(std::memory_order_acquire);
      } while (now == writing);
    }
    return now;
  }
};

} // namespace detail
} // namespace async

#endif // ASYNC_DETAIL_UNBOUNDED_SLOT_STATE_H
