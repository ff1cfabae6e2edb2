// SPDX-License-Identifier: BSL-1.0
//
// unbounded_core: the machinery of async::queue (queue.h), which is its public face and its
// base's only user. The core holds the two ticket counters (in its base, ticket_counters.h),
// the segments, the event count and the close, and the steps that the public calls are written
// in:
//
//   tickets      take_tickets, effective_tail, closed, drained, the storage checks made before
//                a ticket is taken
//   producers    emplace, void_slot, relocate and place_carried (an element whose slot its
//                consumer skipped moves to a later ticket), fill (a bulk call's rounds)
//   consumers    await_slot and take (one ticket), drain (a bulk call's rounds)
//
// queue.h keeps the public calls, close() and the waiting loop. Memory-order labels: UE1
// (tickets), UC1-UC3 (close) and UD1 (consumer tickets) here and in queue.h; UP1, UP2, UT1 and
// UT2 in unbounded/slot_state.h; EC0-EC3 in unbounded/event_count.h.
#ifndef ASYNC_DETAIL_UNBOUNDED_CORE_H
#define ASYNC_DETAIL_UNBOUNDED_CORE_H

#include "../config.h"

#include "../cache.h"
#include "../element.h"
#include "../perturb.h"
#include "../relocate.h"
#include "../scope_exit.h"
#include "../ticket_counters.h"
#include "../traits.h"
#include "event_count.h"
#include "segment_list.h"
#include "slot_state.h"

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <type_traits>
#include <utility>

namespace async {
namespace detail {

/// The state and steps of async::queue<T, Traits>; Defaults is async::traits (the defaults of
/// the knobs). Used only as queue's base: every member is for queue.h.
template <typename T, typename Traits, typename Defaults>
class unbounded_core : protected ticket_counters_for<Traits, Defaults> {
protected:
  static constexpr bool noexcept_check = knob_noexcept_check<Traits, Defaults>::value;
  static constexpr std::size_t line_size = knob_cacheline<Traits, Defaults>::value;
  static constexpr unsigned spin_budget = knob_spin_budget<Traits, Defaults>::value;
  static constexpr std::size_t segment_size = knob_segment_size<Traits, Defaults>::value;
  static constexpr bool spread_tickets = knob_spread_tickets<Traits, Defaults>::value;
  static constexpr std::size_t level1 = knob_level1<Traits, Defaults>::value;
  static constexpr std::size_t level2 = knob_level2<Traits, Defaults>::value;
  static constexpr std::size_t level3 = knob_level3<Traits, Defaults>::value;
  static constexpr unsigned index_bits = knob_index_bits<Traits, Defaults>::value;
  static constexpr unsigned tag_bits = knob_tag_bits<Traits, Defaults>::value;

  // The atomic type of the protocol words (std::atomic; a test seam, see detail/traits.h).
  template <typename V>
  using atom = typename knob_atomic<Traits>::template type<V>;

  // The tickets, each on a line of its own (detail/ticket_counters.h).
  using counters = ticket_counters_for<Traits, Defaults>;
  using counters::head_;
  using counters::tail_;

  // A slot's state byte: slot_state owns its values and transitions.
  using state = slot_state;

  using list = segment_list<T, state::type, segment_size, level1, level2, level3, index_bits,
                            tag_bits, line_size, atom, !spread_tickets>;
  // A slot's state is written by the producer of its ticket (publish, void, claim) and by its
  // consumer (skip).
  using slot = typename list::slot_ref;
  using word = typename list::word;
  using walk = typename list::walk;
  using finish_batch = typename list::finish_batch;

  unbounded_core(std::size_t reserve, first_ticket start)
      : counters(start.value / segment_size * segment_size),
        segments_(start.value / segment_size, reserve) {}

  ~unbounded_core() {
    // Every ticket below head_ has been consumed (a consumed slot keeps its "full" state until
    // the node is reused), so the elements still inside are the full slots at or after head_.
    // relaxed, here and below: the destructor's caller has every other call's end happening
    // before it (no call may still run).
    const std::uint64_t head = head_.value.load(std::memory_order_relaxed);
    segments_.for_each_segment([this, head](std::uint32_t i, std::uint64_t s) {
      for (std::uint64_t t = s * segment_size; t < (s + 1) * segment_size; ++t) {
        const slot e = segments_.slot(i, t);
        if (t >= head && e.state.load(std::memory_order_relaxed) == state::full) {
          e.element.destroy();
        }
      }
    });
  }

  unbounded_core(const unbounded_core&) = delete;
  unbounded_core& operator=(const unbounded_core&) = delete;

  static constexpr std::uint64_t closed_bit = std::uint64_t(1) << 63;
  static constexpr std::uint64_t no_close = ~std::uint64_t(0);

  // ---- tickets --------------------------------------------------------------------------------

  // Takes n producer tickets, the first in `first`, after reading the producers' hint (so that
  // it names a segment at or before the tickets'). False when the queue is closed: the tickets
  // are refused. Throws std::length_error, before taking them, when the storage is full (unless
  // the caller already holds its element and must wait for a node instead: `check` false).
  bool take_tickets(std::uint64_t n, word& hint, std::uint64_t& first, bool check = true) {
    hint = segments_.hint(list::producers);
    if (check && ASYNC_UNLIKELY(segments_.exhausted())) {
      refuse_unless_passed(n);
    }
    // (UE1) seq_cst: the tickets; seq_cst also orders them before the waiter check of
    // waiting_.notify() (EC2), against a registered consumer's (EC1) and its second look at
    // the tail (effective_tail()): a wake-up is never lost.
    first = tail_.value.fetch_add(n, std::memory_order_seq_cst);
    ASYNC_PERTURB(); // tickets taken, their slots not yet found
    return (first & closed_bit) == 0;
  }

  // The storage looked full: throws std::length_error unless the next n tickets need no node
  // (passed_by_consumers) or the queue is closed. Tickets taken after the close are refused
  // before they need a node, so the call returns false as on any closed queue; and the slots
  // past the closed end are never finished, so a closed queue whose storage filled up stays
  // full for good: checking the room first made every later enqueue throw. Kept out of line,
  // so that the ticket path stays small enough for the compiler to inline it (and the
  // publication's waiter check) into every enqueue.
  ASYNC_NOINLINE void refuse_unless_passed(std::uint64_t n) const {
    if (!closed() && !passed_by_consumers(n)) {
      segments_.check_room();
    }
  }

  // The storage is nearly full: throws std::length_error when bulk_enqueue's n tickets, from
  // the tail on, would span more segments (counted from the oldest live one) than the storage
  // has nodes. The call would fill part of its range and then wait until a consumer recycles
  // a node, and with none running it never returned (close() does not release a producer
  // holding tickets). Throws before anything is read, as enqueue does when every node is in
  // use; on a closed queue the call goes on to be refused (0). Out of line: rare, and the
  // tail's line is not read where the storage has room.
  ASYNC_NOINLINE void refuse_short_of_nodes(std::uint64_t n) const {
    // relaxed: a guess, as short_of_nodes() says; the tickets are taken later with (UE1).
    const std::uint64_t t = tail_.value.load(std::memory_order_relaxed) & ~closed_bit;
    if (segments_.short_of_nodes(t, n) && !closed()) {
      throw std::length_error("async::queue: bulk_enqueue needs more nodes than the storage "
                              "has free now (raise NODE_LEVEL1..3, or enqueue fewer at once)");
    }
  }

  // Whether consumers hold tickets past the tail, in segments that reach as far as the next n
  // producer tickets. Consumers that raced each other past the tail skipped those slots, and
  // only producers can finish them: their segments are linked (or being linked by those
  // consumers), so the tickets need no node of their own and must not be refused when the
  // storage is full (it would stay full). The relaxed loads make it a guess, and a guess is
  // enough: it only chooses between throwing and going on to take tickets, and a producer that
  // goes on and finds no node waits for one (a stale head only makes it wait, never lose).
  bool passed_by_consumers(std::uint64_t n) const noexcept {
    const std::uint64_t t = tail_.value.load(std::memory_order_relaxed) & ~closed_bit;
    const std::uint64_t h = head_.value.load(std::memory_order_relaxed);
    return h > t && (t + n - 1) / segment_size <= (h - 1) / segment_size;
  }

  // Whether close() has been called.
  bool closed() const noexcept {
    return (tail_.value.load(std::memory_order_acquire) & closed_bit) != 0;
  }

  std::uint64_t effective_tail() const noexcept {
    // seq_cst: against a producer's (UE1) for a registered waiter (EC1); the acquire in it
    // pairs with (UC1) when the bit is set.
    const std::uint64_t t = tail_.value.load(std::memory_order_seq_cst);
    if (ASYNC_LIKELY((t & closed_bit) == 0)) {
      return t;
    }
    // Closed: tickets taken after the close are refused and never filled. Until the closer
    // has stored the exact count, the masked value is an upper bound (consumers that go past
    // the true end skip empty slots). relaxed: an upper bound is never wrong, and the count
    // orders nothing (the bit, read above, brings the close's happens-before).
    const std::uint64_t at = closed_at_.load(std::memory_order_relaxed);
    return at != no_close ? at : (t & ~closed_bit);
  }

  // Whether the slot of ticket h holds an element, judged from the node the hint names (false
  // when that node is not h's segment). A guess: nothing is read that is not atomic.
  bool looks_full(word hint, std::uint64_t h) const noexcept {
    const std::uint32_t i = list::link::index(hint);
    return segments_.holds(i, h / segment_size) &&
           segments_.slot(i, h).state.load(std::memory_order_relaxed) == state::full;
  }

  // ---- producers: the slot protocol -----------------------------------------------------------

  // Constructs the element in slot s of node i; a throwing constructor voids the slot.
  template <typename... Args>
  bool emplace(std::uint32_t i, const slot& s, Args&&... args) {
    return s.template emplace<noexcept_check>([this, i, &s] { void_slot(i, s); },
                                              std::forward<Args>(args)...);
  }

  // The producer gives up its slot: the consumer passes it (or already did).
  void void_slot(std::uint32_t i, const slot& s) noexcept {
    const state::type found = state::give_up(s.state);
    if (found == state::empty) {
      voided();
    } else if (found == state::skipped) {
      segments_.finish(i); // the consumer has left: the producer is the last to leave
    } // else void already (a bulk call voiding what is left after a throw): nothing to do
  }

  // A slot of this producer's ticket was voided: wake a parked consumer as a publication
  // does, so that the slot is passed and its node recycled. Until a consumer passes it, the
  // void slot holds its segment, and void slots alone can fill a small node storage (every
  // enqueue then refused while the only consumer slept). The ticket's fetch_add (UE1) orders
  // the waiter check after a consumer's registration that did not see the ticket.
  // The void slot is counted until its consumer passes it (size_approx() leaves it out).
  // Counted after the CAS that voids it: a consumer that passes it first makes the count wrap
  // below zero for a moment, which size_approx() reads as one element more (a call is running).
  // Out of line: rare, and an inlined copy at every voiding site would make the compiler stop
  // inlining the waiter check where elements are published.
  ASYNC_NOINLINE void voided() noexcept {
    void_slots_.fetch_add(1, std::memory_order_relaxed);
    waiting_.notify();
  }

  // The consumer of a void slot (node i) passes it. Out of line, as voided().
  ASYNC_NOINLINE void pass_void(std::uint32_t i) noexcept {
    void_slots_.fetch_sub(1, std::memory_order_relaxed);
    segments_.finish(i);
  }

  // Voids the slots of the round's tickets that are not settled yet.
  void void_rest(walk& round) noexcept {
    for (; round.next < round.end; ++round.next) {
      std::uint32_t i = 0;
      const slot s = round.slot(i);
      void_slot(i, s);
    }
  }

  // Voids the round's next slots whose tickets consumers have taken already (below the head),
  // and returns how many. Consumers that raced past the tail skip such slots (void_slot then
  // finishes them at once) or wait on them (and pass the void); placing elements there would
  // only have them skipped and moved again.
  std::size_t void_passed(walk& round) noexcept {
    // relaxed: any value read is one the head had, so every ticket below it is a consumer's.
    // It only chooses which slots to void; void_slot's CAS orders each against that
    // consumer's skip. A stale head leaves slots to be filled (and perhaps skipped again).
    const std::uint64_t h = head_.value.load(std::memory_order_relaxed);
    std::size_t n = 0;
    for (; round.next < round.end && round.next < h; ++round.next, ++n) {
      std::uint32_t i = 0;
      const slot s = round.slot(i);
      void_slot(i, s);
    }
    return n;
  }

  // Fills the slots of one round of tickets in order, the carried element first, then from
  // the range, and returns how many elements the round settled (enqueued, or dropped under
  // NOEXCEPT_CHECK). Where a consumer skipped one of its slots, that element (now in `carry`)
  // and every later one must go after it to keep their order: the round's slots that consumers
  // have taken already (below the head; they skip or pass them) are voided, and the element
  // goes in the next slot, the later ones after it. An element still in `carry` when the round
  // ends goes first in a new round. (Voiding the whole rest of the round left slots that only a
  // consumer can pass: with none running, a small storage had no node for the new round, and
  // the call never returned.) If anything throws, the slots not yet settled are voided and the
  // exception propagates (the elements before are in).
  template <typename InputIt>
  std::size_t fill(walk& round, InputIt& first, holder<T>& carry, std::size_t& in) {
    const std::uint64_t start = round.next;
    std::size_t unfilled = 0; // slots of the round that settled no element: skipped ones
    try {
      while (round.next < round.end) {
        std::uint32_t i = 0;
        const slot s = round.slot(i);
        // From the moment a constructor (or place_carried) starts on slot t, the slot is its to
        // settle: it voids the slot when it throws, and voiding a slot twice would count a
        // skipped slot as finished twice (its node would be recycled with an element inside).
        // Until then (reading *first may throw) the slot is left to the catch block below.
        if (carry.engaged()) {
          ++round.next;
          const carried placed = place_carried(i, s, carry);
          if (placed == carried::skipped) { // nothing was moved: the next slot
            unfilled += 1 + void_passed(round);
          } else if (placed == carried::placed) {
            ++in;
            waiting_.notify();
          } // else lost (NOEXCEPT_CHECK): the move threw, the element is gone, its slot void
          continue;
        }
        auto&& source = *first;
        ++round.next;
        const bool made = emplace(i, s, std::forward<decltype(source)>(source));
        // The iterator moves on only once slot t is settled (published, void or left): an
        // increment that throws must not leave a built element in a slot nobody settles. (When
        // it throws after the element was moved out of a skipped slot, that element is
        // destroyed with `carry`, as when a later round's read throws.)
        if (!made) {
          ++first;
          continue; // NOEXCEPT_CHECK: this element is skipped, its slot is void
        }
        ASYNC_PERTURB(); // constructed, not yet published
        if (ASYNC_LIKELY(state::publish(s.state))) {
          ++in;
          // Wake a parked consumer now, not when the call returns: the rest of the input may
          // take long to read, or wait on that very consumer.
          waiting_.notify();
          ++first;
          continue;
        }
        // Leaves slot t, even when the move throws. An element lost to a throwing move
        // (NOEXCEPT_CHECK) is settled: the round counts it and the next element goes on.
        if (move_out(i, s, carry)) {
          ++unfilled;
        }
        ++first;
        unfilled += void_passed(round);
      }
    } catch (...) {
      void_rest(round);
      throw;
    }
    return static_cast<std::size_t>(round.end - start) - unfilled;
  }

  // The consumer skipped slot s (node i) before its element was published: move the element
  // into `carry` and leave the slot for good. If the move throws, the element is destroyed
  // (the enqueue fails with that exception) and the slot is left all the same.
  void hand_back(std::uint32_t i, const slot& s, holder<T>& carry) {
    const auto done = at_scope_exit([this, i, &s] {
      s.element.destroy();
      segments_.finish(i);
    });
    ASYNC_PERTURB(); // skipped, the element not yet moved out
    carry.take_from(*s.element.get());
  }

  // hand_back, where a move that throws under NOEXCEPT_CHECK loses the element (false, the
  // slot left all the same) instead of propagating, as in place_carried.
  bool move_out(std::uint32_t i, const slot& s, holder<T>& carry) {
    if (!noexcept_check) {
      hand_back(i, s, carry);
      return true;
    }
    try {
      hand_back(i, s, carry);
    } catch (...) {
      return false;
    }
    return true;
  }

  // The element in slot s of node i was skipped by its consumer: move it to a new ticket.
  // False when it could not go in (closed meanwhile, or lost to a move that threw).
  bool relocate(std::uint32_t i, const slot& s) {
    holder<T> carry;
    if (!move_out(i, s, carry)) {
      return false;
    }
    for (;;) {
      word hint = 0;
      std::uint64_t t = 0;
      if (!take_tickets(1, hint, t, /*check=*/false)) {
        return false; // closed meanwhile: the element is destroyed with `carry`
      }
      const std::uint32_t j = segments_.find(list::producers, hint, t / segment_size);
      switch (place_carried(j, segments_.slot(j, t), carry)) {
      case carried::placed:
        waiting_.notify();
        return true;
      case carried::lost:
        return false;
      case carried::skipped:
        break; // nothing was moved: try the next ticket
      }
    }
  }

  enum class carried { placed, skipped, lost };

  // Places the carried element in slot s of node i and publishes it: claims the slot first
  // (empty -> writing), so that no consumer can skip it while the element moves in. Returns
  // skipped, having moved nothing and left the slot (finished), when its consumer skipped it
  // before the claim. If the move throws, the slot is voided, the element is destroyed, and the
  // exception propagates (without NOEXCEPT_CHECK) or lost is returned.
  carried place_carried(std::uint32_t i, const slot& s, holder<T>& carry) {
    if (!state::claim(s.state)) {
      segments_.finish(i); // skipped: its consumer has left, we are the last party
      return carried::skipped;
    }
    ASYNC_PERTURB(); // claimed, the element not yet moved in
    try {
      s.element.relocate_from(carry.get());
    } catch (...) {
      state::void_claimed(s.state);
      voided();
      carry.reset();
      if (noexcept_check) {
        return carried::lost;
      }
      throw;
    }
    carry.reset();
    state::publish_claimed(s.state);
    return carried::placed;
  }

  // ---- consumers: the slot protocol -----------------------------------------------------------

  // bulk_dequeue's iterator: the caller's own (advanced in place), or a copy of it.
  template <typename It>
  static It& caller_iterator(It& it, std::true_type) noexcept {
    return it;
  }
  template <typename It>
  static typename std::decay<It>::type caller_iterator(It&& it, std::false_type) {
    return std::forward<It>(it); // an rvalue is moved, a const or volatile lvalue copied
  }

  template <typename OutputIt>
  std::size_t bulk_dequeue_through(OutputIt&& out, std::size_t n) {
    std::size_t got = 0;
    while (got < n) {
      const std::uint64_t h = head_.value.load(std::memory_order_relaxed);
      const std::uint64_t t = effective_tail();
      if (h >= t) {
        break;
      }
      const std::size_t want = static_cast<std::size_t>(
          std::min<std::uint64_t>(static_cast<std::uint64_t>(n - got), t - h));
      const word hint = segments_.hint(list::consumers);
      ASYNC_PERTURB(); // looked, no tickets yet
      const std::uint64_t h0 = head_.value.fetch_add(want, std::memory_order_relaxed); // (UD1)
      ASYNC_PERTURB(); // tickets taken, their slots not yet found
      finish_batch finished(segments_);
      walk round(segments_, typename walk::consumer_tag{}, hint, h0, h0 + want, &finished);
      got += drain(round, finished, out);
    }
    return got;
  }

  // Takes the elements of one round of consumer tickets in order, writing them to `out`;
  // returns how many. If writing throws, the round's tickets not yet served are still this
  // call's: their elements are destroyed (reported lost by the exception) so that their slots
  // are left and the queue stays whole.
  template <typename OutputIt>
  std::size_t drain(walk& round, finish_batch& finished, OutputIt& out) {
    std::size_t got = 0;
    try {
      for (; round.next < round.end; ++round.next) {
        if (ASYNC_UNLIKELY(!round.reach())) {
          return got; // the rest lies past the closed end: no element will come for it
        }
        std::uint32_t i = 0;
        const slot s = round.slot(i);
        if (take(i, s, round.next, finished, [&out](T& v) {
              assign_relocated(*out, v);
              ++out;
            })) {
          ++got;
        }
      }
    } catch (...) {
      for (++round.next; round.next < round.end && round.reach(); ++round.next) {
        std::uint32_t i = 0;
        const slot s = round.slot(i);
        take(i, s, round.next, finished, [](T&) {});
      }
      throw;
    }
    return got;
  }

  // Takes ticket `mine` (slot s of node i): waits briefly for its element, hands it to
  // deliver(T&), then destroys it and counts the slot in `finished` (also when deliver throws).
  // Returns false when the slot carried nothing (skipped or void).
  template <typename Deliver>
  bool take(std::uint32_t i, const slot& s, std::uint64_t mine, finish_batch& finished,
            Deliver deliver) {
    if (!await_slot(i, s, mine)) {
      return false;
    }
    const auto done = at_scope_exit([&finished, i, &s] {
      s.element.destroy();
      finished.add(i);
    });
    deliver(*s.element.get());
    return true;
  }

  // Waits briefly for the producer of `mine`; true when the slot holds an element. Otherwise
  // the slot is left for good: skipped (its producer will move the element elsewhere) or void.
  bool await_slot(std::uint32_t i, const slot& s, std::uint64_t mine) noexcept {
    // Wait only while the ticket has a producer (who is constructing right now).
    const state::type now =
        state::await(s.state, spin_budget, [this, mine] { return effective_tail() <= mine; });
    if (now == state::voided) {
      pass_void(i);
    }
    return now == state::full;
  }

  // Closed, and every ticket handed out before the close has been taken by a consumer. Called
  // by a waiting consumer after a dequeue() that found nothing. A false "not drained" costs
  // a park that close()'s wake-up ends (the epoch, (EC3), has moved on).
  bool drained() const noexcept {
    // (UC3) acquire: pairs with (UC1); what the closer did happens before the caller's
    // "closed and drained".
    if ((tail_.value.load(std::memory_order_acquire) & closed_bit) == 0) {
      return false;
    }
    // relaxed: a waiter that read close()'s epoch ((EC0) acquires (EC3)) has the count
    // stored before it; one that read an older epoch parks for no time. The head: the dequeue()
    // just before read it (relaxed) or moved it (its fetch_add), and a later read of the same
    // word by the same thread is never older (coherence).
    const std::uint64_t at = closed_at_.load(std::memory_order_relaxed);
    return at != no_close && head_.value.load(std::memory_order_relaxed) >= at;
  }

  // ---- data -----------------------------------------------------------------------------------
  // The segments, their nodes and the free list.
  list segments_;
  // Written by parking consumers and by the producers that wake them.
  event_count<atom, line_size> waiting_;
  // Written once by close(): the number of tickets handed out before it.
  atom<std::uint64_t> closed_at_{no_close};
  // Written when a producer voids a slot and when its consumer passes it (both rare): the void
  // slots not yet passed, which size_approx() does not count as elements.
  atom<std::uint64_t> void_slots_{0};
};

} // namespace detail
} // namespace async

#endif // ASYNC_DETAIL_UNBOUNDED_CORE_H
