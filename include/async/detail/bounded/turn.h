// SPDX-License-Identifier: BSL-1.0
//
// The bounded queue's slot word, whole: what its bits mean and how it is handed on. One 64-bit
// word per slot:
//
//   bit 63 ............................ 3   bits 2-1   bit 0
//   the ticket t that the word is for       its state  the sleeper bit
//
//   8t + free     the producer holding ticket t may construct its element
//   8t + full     the element of t is published: its consumer may take it
//   8t + hole     the producer of t failed to construct: its consumer skips the slot
//   8t + refused  the producer of t refused the ticket while close() ran: skipped as a hole
//                 (the queue does not count it as a hole: t may lie past the close's last
//                 ticket)
//
// The consumer of t hands the slot on by storing 8(t + capacity) + free. Values are computed
// modulo 2^64, so the encoding wraps with the 64-bit tickets; turns of one slot compare by
// their signed distance. The sleeper bit is set by a thread that parks on the word:
//
//   owner:   own(word, mine)             is it my turn now? (fast path, no waiting)
//            await(word, ready, ...)     spin, yield, then park until ready(word) holds
//   hander:  publish(word, next, ...)    hand the word on to the next turn; wakes sleepers
//   closer:  wake(word)                  clears the sleeper bit and wakes sleepers (close())
//
// Two ways to hand a word on, chosen per queue when it is made:
//
//   exchange: every change of the word is an exchange (publish) or a CAS (wake, a waiter
//     setting its bit), so whoever changes the word sees the bit in the same atomic step, and
//     makes the wake-up syscall only then: a hand-over that nobody waits for costs no syscall.
//     The exchange is a locked instruction on every hand-over, waiters or not.
//
//   store (where asymmetric fences exist, detail/asymmetric_fence.h): the queue also counts
//     the threads that are about to park or parked on any of its words. While the count is 0,
//     publish is a plain release store, a compiler barrier, and a load of the count; a waiter
//     raises the count and makes the heavy fence before it looks at the word for the last time.
//     So either the waiter sees the new value (and does not sleep), or the publisher sees the
//     count (and wakes the word's sleepers): the waiter pays the fence, once per wait that
//     parks, instead of every hand-over. While the count is not 0 publish exchanges, as above,
//     so that hand-overs with sleepers about do not each make a syscall.
#ifndef ASYNC_DETAIL_BOUNDED_TURN_H
#define ASYNC_DETAIL_BOUNDED_TURN_H

#include "../config.h"

#include "../asymmetric_fence.h"
#include "../deadline.h"
#include "../park.h"
#include "../perturb.h"

#include <atomic>
#include <chrono>
#include <cstdint>

namespace async {
namespace detail {

// The queue's sleeper word, where hand-overs are plain stores: twice the number of waiters that
// are about to park or parked, plus the fenced bit. The bit says that a heavy fence was made
// while the word was above 0, and that the word has not been 0 since: every publisher's look
// at the word after that fence saw it above 0 (and exchanged, or woke), so a waiter that finds
// the bit need not fence again. Waiters leave the bit behind when the last one goes (the word
// lingers at 1: hand-overs keep exchanging), and a hand-over ends the lingering once per
// `linger_tickets` tickets (turn::publish): a queue whose threads park often pays the heavy
// fence about once per that many hand-overs, not once per park, and a queue where nobody parks
// any more is back to plain stores soon after.
//
// Should the kernel refuse a heavy fence (a sandbox installed after the queue was made), the
// waiter sets the exchanging bit, which keeps the word above 0 for good: every later hand-over
// exchanges. A publisher that read 0 just before may have stored without a fence; its store
// leaves the processor's store buffer within microseconds, so the first park of every wait
// that finds the bit (or sets it) lasts at most a millisecond, and the waiter looks at the
// word again: one early wake-up per wait, in a queue that lost its fences.
struct sleeper_word {
  static constexpr std::uint64_t fenced = 1;
  static constexpr std::uint64_t one = 2;
  static constexpr std::uint64_t lingering = fenced;
  static constexpr std::uint64_t linger_tickets = 1024;
  static constexpr std::uint64_t exchanging = std::uint64_t(1) << 63;
};

// A waiter that is about to park, counted in its queue's sleeper word until it returns (see
// sleeper_word); nothing where the queue hands over by exchange alone.
template <typename Count>
class counted_sleeper {
public:
  explicit counted_sleeper(Count* word) noexcept : word_(word) {}
  counted_sleeper(const counted_sleeper&) = delete;
  counted_sleeper& operator=(const counted_sleeper&) = delete;
  ~counted_sleeper() {
    if (counted_) {
      // relaxed: a publisher that still sees this waiter counted only wakes the word in vain.
      // The fenced bit stays: see sleeper_word.
      word_->fetch_sub(sleeper_word::one, std::memory_order_relaxed);
    }
  }

  void enter() noexcept {
    if (word_ == nullptr) {
      return;
    }
    // (TW7) seq_cst, then the heavy fence: pairs with (TW6). Every look at the turn word after
    // this sees the publishes that did not see the count. Acquire, where the fenced bit is
    // found: pairs with the release below, after the fence that bit stands for.
    const std::uint64_t before = word_->fetch_add(sleeper_word::one, std::memory_order_seq_cst);
    counted_ = true;
    if (ASYNC_UNLIKELY((before & sleeper_word::exchanging) != 0)) {
      unfenced_ = true; // see sleeper_word
      return;
    }
    if ((before & sleeper_word::fenced) == 0) {
      if (ASYNC_UNLIKELY(!fences_of<Count>::type::heavy())) {
        word_->fetch_or(sleeper_word::exchanging | sleeper_word::fenced, std::memory_order_seq_cst);
        unfenced_ = true; // see sleeper_word
        return;
      }
      ASYNC_PERTURB(); // fenced, the bit not yet set
      word_->fetch_or(sleeper_word::fenced, std::memory_order_release);
    }
  }

  /// Once, where the queue lost its fences: how long this waiter's first park may last (see
  /// sleeper_word); `deadline` otherwise.
  const wait_clock::time_point* park_until(const wait_clock::time_point* deadline,
                                           wait_clock::time_point& soon) noexcept {
    if (ASYNC_LIKELY(!unfenced_)) {
      return deadline;
    }
    unfenced_ = false;
    soon = wait_clock::now() + std::chrono::milliseconds(1);
    return deadline != nullptr && *deadline < soon ? deadline : &soon;
  }

private:
  Count* word_;
  bool counted_ = false;
  bool unfenced_ = false;
};

struct turn {
  /// Set in the word by a thread that parks on it.
  static constexpr std::uint64_t sleeper_bit = 1;

  /// The states of a turn (bits 1 and 2; see the top of this file).
  static constexpr std::uint64_t free = 0;
  static constexpr std::uint64_t full = 2;
  static constexpr std::uint64_t hole = 4;
  static constexpr std::uint64_t refused = 6;
  static constexpr std::uint64_t state_bits = 6;

  /// The word of ticket t in `state`.
  static constexpr std::uint64_t of(std::uint64_t ticket, std::uint64_t state) noexcept {
    return ticket * 8 + state;
  }

  /// The word without its sleeper bit.
  static constexpr std::uint64_t value(std::uint64_t word) noexcept { return word & ~sleeper_bit; }

  /// The state part of a word.
  static constexpr std::uint64_t state(std::uint64_t word) noexcept { return word & state_bits; }

  /// Whether the word (sleeper bit ignored) is a turn before `wanted`: the slot has not got
  /// there yet.
  static constexpr bool before(std::uint64_t word, std::uint64_t wanted) noexcept {
    return static_cast<std::int64_t>(value(word) - wanted) < 0;
  }

  /// Whether the consumer of ticket t may go on at this word: the turn of t is full, a hole or
  /// refused (other turns lie below, or 8 or more above; the sleeper bit is ignored).
  static constexpr bool settled(std::uint64_t word, std::uint64_t ticket) noexcept {
    return value(word) - of(ticket, full) <= refused - full;
  }

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

  /// Hands the word on: stores `value` and wakes the threads parked on it, if any. `sleepers`
  /// is the queue's count of waiters that park (see await), or null where the queue hands over
  /// by exchange alone (see the top of this file).
  template <typename Word, typename Count>
  static void publish(Word& word, std::uint64_t value, Count* sleepers) noexcept {
    // relaxed: only picks the way; the load after the store below is the one that counts.
    const std::uint64_t counted =
        sleepers != nullptr ? sleepers->load(std::memory_order_relaxed) : 0;
    if (sleepers != nullptr && counted == 0) {
      // (TW5) release: as (TW2). Then the light fence and (TW6), the count read again: pairs
      // with (TW7) and the heavy fence in await(). A waiter that raised the count before this
      // point is woken; one that raises it later looks at the word after its heavy fence and
      // sees `value`.
      word.store(value, std::memory_order_release);
      fences_of<Count>::type::light();
      ASYNC_PERTURB(); // stored, the count not yet read again
      if (ASYNC_UNLIKELY(sleepers->load(std::memory_order_relaxed) != 0)) {
        unpark_all(&word);
      }
      return;
    }
    if (ASYNC_UNLIKELY(counted == sleeper_word::lingering) &&
        (value / 8) % sleeper_word::linger_tickets == 0) {
      // Nobody waits, and nobody has for a while: back to plain stores. The next waiter finds
      // the word at 0 and fences again (value / 8 is the ticket). relaxed: the word is only
      // ever read for its value.
      std::uint64_t expected = sleeper_word::lingering;
      sleepers->compare_exchange_strong(expected, 0, std::memory_order_relaxed);
    }
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
    // (TW8) seq_cst: the read of the sleeper bit after the caller's seq_cst store that made
    // interrupted() true; pairs with (TW4).
    std::uint64_t v = word.load(std::memory_order_seq_cst);
    while ((v & sleeper_bit) != 0) {
      ASYNC_PERTURB(); // saw the bit, not yet cleared
      // relaxed: clearing the bit only changes the word, so that a thread about to park on
      // the old value does not sleep; the ordering that matters is (TW8)'s.
      if (word.compare_exchange_weak(v, v & ~sleeper_bit, std::memory_order_relaxed,
                                     std::memory_order_relaxed)) {
        unpark_all(&word);
        return;
      }
    }
  }

  /// Waits until ready(value of the word) holds, interrupted() holds, or the deadline (if not
  /// null) passes: first `policy.wait()` rounds of active waiting (spin, then yield), then
  /// parked. interrupted() is re-evaluated after the sleeper bit is set and before sleeping; a
  /// thread that makes it true must then call wake() on the word. `sleepers` as in publish:
  /// a wait that parks is counted there from its last look at the word until it returns.
  template <typename Word, typename Count, typename Ready, typename Interrupted, typename Backoff>
  static waited await(Word& word, Count* sleepers, Ready ready, Interrupted interrupted,
                      const wait_clock::time_point* deadline, Backoff& active) {
    bool spinning = true;
    counted_sleeper<Count> counted(sleepers);
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
      if (spinning) {
        spinning = false;
        if (deadline != nullptr && *deadline != no_deadline() && wait_clock::now() >= *deadline) {
          return waited::timed_out; // would not park: no need to be counted (and fenced)
        }
        counted.enter();
        continue; // the last look, after the heavy fence
      }
      ASYNC_PERTURB(); // about to set the sleeper bit
      if ((v & sleeper_bit) == 0) {
        // (TW4) seq_cst: ordered before the interrupted() check below; pairs with the
        // interrupter's seq_cst store that makes interrupted() true, which comes before its
        // wake(): either we see it, or it sees our bit.
        // relaxed on failure: the loop looks at the word again, (TW3).
        if (!word.compare_exchange_weak(v, v | sleeper_bit, std::memory_order_seq_cst,
                                        std::memory_order_relaxed)) {
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
      wait_clock::time_point soon;
      const wait_clock::time_point* until = counted.park_until(deadline, soon);
      if (!park(&word, v, until) && until == deadline) {
        return ready(word.load(std::memory_order_acquire)) ? waited::ready : waited::timed_out;
      }
    }
  }
};

} // namespace detail
} // namespace async

#endif // ASYNC_DETAIL_BOUNDED_TURN_H
