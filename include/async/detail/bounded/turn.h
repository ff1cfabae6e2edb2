// SPDX-License-Identifier: BSL-1.0
//
// The turn-and-sleeper protocol of the bounded queue's slots, on one 64-bit word per slot:
//
//   owner:   own(word, mine)             is it my turn now? (fast path, no waiting)
//            await(word, ready, ...)     spin, yield, then park until ready(word) holds
//   hander:  publish(word, next)         hand the word on to the next turn; wakes sleepers
//   closer:  wake(word)                  clears the sleeper bit and wakes sleepers (close())
//
// The word's value is the queue's business (turns are 8 * ticket + state), except for its
// lowest bit, the sleeper bit: a waiter sets it with a CAS before it parks. Every change of the
// word is an exchange (publish) or a CAS (wake), so whoever changes the word sees the bit in
// the same atomic step, and makes the wake-up syscall only then: a hand-over that nobody waits
// for costs no syscall.
#ifndef ASYNC_DETAIL_BOUNDED_TURN_H
#define ASYNC_DETAIL_BOUNDED_TURN_H

#include "../config.h"

#include "../deadline.h"
#include "../park.h"
#include "../perturb.h"

#include <atomic>
#include <chrono>
#include <cstdint>

namespace async {
namespace detail {

struct turn {
  /// Set in the word by a thread that parks on it.
  static constexpr std::uint64_t sleeper_bit = 1;

  enum class waited { ready, interrupted, timed_out };

  /// Whether the word holds exactly `wanted` (no sleeper bit): a sleeper bit sends the caller
  /// to await(), which handles it. A plain load: an earlier version used a CAS of the value onto
  /// itself, so that the line would arrive in this core's cache exclusively at once, ready for
  /// the exchange that ends the operation; measured against the load in 12 alternating rounds
  /// on the 2-core VM, the CAS made one producer and one consumer 1.73x slower at capacity
  /// 65536 (1.07x at 1024; ping-pong level): a CAS on a line the other side still writes
  /// takes the line away from it.
  template <typename Word>
  static bool own(Word& word, std::uint64_t wanted) noexcept {
    // (TW1) acquire: pairs with (TW2), the publish that made the word `wanted`.
    return word.load(std::memory_order_acquire) == wanted;
  }

  /// Hands the word on: stores `value` and wakes the threads parked on it, if any.
  template <typename Word>
  static void publish(Word& word, std::uint64_t value) noexcept {
    // (TW2) release: publishes what the caller did before (an element constructed or moved
    // out); pairs with (TW1) and (TW3). The exchange also reads the sleeper bit in the same
    // atomic step: a thread that set it before this point is woken; one that tries later fails
    // its CAS and sees the new value.
    if (ASYNC_UNLIKELY(word.exchange(value, std::memory_order_release) & sleeper_bit)) {
      unpark_all(&word);
    }
  }

  /// Clears the sleeper bit (changing the word, so that a thread about to park does not sleep)
  /// and wakes the threads parked on the word.
  template <typename Word>
  static void wake(Word& word) noexcept {
    std::uint64_t v = word.load(std::memory_order_seq_cst);
    while ((v & sleeper_bit) != 0) {
      ASYNC_PERTURB(); // saw the bit, not yet cleared
      if (word.compare_exchange_weak(v, v & ~sleeper_bit, std::memory_order_seq_cst,
                                     std::memory_order_seq_cst)) {
        unpark_all(&word);
        return;
      }
    }
  }

  /// Waits until ready(value of the word) holds, interrupted() holds, or the deadline (if not
  /// null) passes: first `policy.wait()` rounds of active waiting (spin, then yield), then
  /// parked. interrupted() is re-evaluated after the sleeper bit is set and before sleeping; a
  /// thread that makes it true must then call wake() on the word.
  template <typename Word, typename Ready, typename Interrupted, typename Backoff>
  static waited await(Word& word, Ready ready, Interrupted interrupted,
                      const wait_clock::time_point* deadline, Backoff& active) {
    bool spinning = true;
    for (;;) {
      // (TW3) acquire: pairs with (TW2), whichever publish made the word ready.
      std::uint64_t v = word.load(std::memory_order_acquire);
      if (ready(v)) {
        return waited::ready;
      }
      if (interrupted()) {
        wake(word); // a bit we set in an earlier round may still be there (see below)
        return waited::interrupted;
      }
      if (spinning && active.wait()) {
        continue;
      }
      spinning = false;
      ASYNC_PERTURB(); // about to set the sleeper bit
      if ((v & sleeper_bit) == 0) {
        // (TW4) seq_cst: ordered before the interrupted() check below; pairs with the
        // interrupter's seq_cst store that makes interrupted() true, which comes before its
        // wake(): either we see it, or it sees our bit.
        if (!word.compare_exchange_weak(v, v | sleeper_bit, std::memory_order_seq_cst,
                                        std::memory_order_acquire)) {
          continue;
        }
        v |= sleeper_bit;
      }
      ASYNC_PERTURB(); // the bit is set, interrupted() not yet looked at again
      if (interrupted()) {
        // Our sleeper bit may have gone in after the interrupter cleared the bits and woke
        // the sleepers: a CAS from a value read before another waiter set its bit succeeds
        // once the clearing restores that value (ABA), and that other waiter, already past
        // its own check, would then sleep on our bit with nobody left to wake it. So whoever
        // leaves on interrupted() with a bit in the word passes the wake-up on.
        wake(word);
        return waited::interrupted;
      }
      ASYNC_PERTURB(); // about to park
      if (!park(&word, v, deadline)) {
        return ready(word.load(std::memory_order_acquire)) ? waited::ready : waited::timed_out;
      }
    }
  }
};

} // namespace detail
} // namespace async

#endif // ASYNC_DETAIL_BOUNDED_TURN_H
