// SPDX-License-Identifier: BSL-1.0
#ifndef ASYNC_QUEUE_H
#define ASYNC_QUEUE_H

#include "detail/config.h"

#include "detail/cache.h"
#include "detail/node_storage.h"
#include "detail/perturb.h"
#include "detail/relocate.h"
#include "detail/slot.h"
#include "detail/tagged_index.h"
#include "detail/traits.h"
#include "detail/wait.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <limits>
#include <new>
#include <stdexcept>
#include <thread>
#include <type_traits>
#include <utility>

namespace async {

/// Tuning knobs of queue. Derive from it (or write your own struct: every member is optional, a
/// missing one takes the default below) and pass it as the second template argument.
struct traits {
  /// What happens when T's constructor throws inside enqueue or bulk_enqueue. Either way the
  /// slot that was reserved for the element is marked void (consumers skip it), nothing leaks,
  /// and the queue stays usable.
  ///   true:  the exception is caught; enqueue returns false, bulk_enqueue skips the element
  ///          and goes on with the next one (its return value counts the elements that went in).
  ///   false: the exception propagates to the caller (bulk_enqueue voids the slots it reserved
  ///          for the rest of the range; the elements before the throwing one are in).
  static constexpr bool NOEXCEPT_CHECK = false;

  /// The false-sharing granule in bytes (a power of two). Consecutive tickets of a segment are
  /// spread over different lines of this size, and the shared counters are this far apart.
  static constexpr std::size_t CachelineSize = detail::cache_line_size;

  /// Slots per node (a power of two, >= 2). A node carries a segment of this many consecutive
  /// tickets; one node is linked, and one recycled, per SEGMENT_SIZE elements. Larger: fewer
  /// segment changes; smaller: a smaller empty queue. Memory of a node: about
  /// SEGMENT_SIZE x (4 + sizeof(T), rounded up to alignof(T)) bytes plus two cache lines.
  static constexpr std::size_t SEGMENT_SIZE = 256;

  /// The three levels of the node storage: a node index i lives in leaf block
  /// [i / (L2 * L3)][(i / L3) % L2] at position i % L3. The top level (L1 pointers) is part of
  /// the queue object, a middle block (L2 pointers) is allocated when the first of its nodes is,
  /// a leaf block holds L3 nodes. The queue holds at most L1 x L2 x L3 nodes, that is
  /// L1 x L2 x L3 x SEGMENT_SIZE elements at a time (defaults: 2^21 nodes, 2^29 elements);
  /// beyond that enqueue throws std::length_error. L1 x L2 x L3 must be below 2^INDEX_BITS.
  static constexpr std::size_t NODE_LEVEL1 = 512;
  static constexpr std::size_t NODE_LEVEL2 = 1024;
  static constexpr std::size_t NODE_LEVEL3 = 4;

  /// A link is one 64-bit word: a node index of INDEX_BITS bits and a tag of TAG_BITS bits
  /// (INDEX_BITS + TAG_BITS <= 64, each at most 32). The tag of a link is the low bits of the
  /// segment number it names; the free list's tag counts its pushes and pops. A stale CAS on
  /// the free list could succeed only if a multiple of 2^TAG_BITS pushes and pops happened
  /// while one thread stalled between its read and its CAS; a stale "no next node" link could
  /// be mistaken only for one of a segment whose number differs by a multiple of 2^TAG_BITS
  /// (that many segments, SEGMENT_SIZE x 2^TAG_BITS elements, passing during one stall), and
  /// the appender re-checks the node's 64-bit id after its CAS anyway. Tests use small tags to
  /// exercise the wrap; keep 32 in production.
  static constexpr unsigned INDEX_BITS = 32;
  static constexpr unsigned TAG_BITS = 32;

  /// How many pause instructions a consumer spends waiting for the producer that holds the
  /// same ticket to publish, before it marks the slot as skipped (the producer then moves its
  /// element to a later ticket), and how long blocking_dequeue spins before it parks.
  static constexpr unsigned SPIN_BUDGET = 256;
};

/// An unbounded multi-producer multi-consumer FIFO queue, lock-free.
///
/// Producers and consumers take 64-bit tickets with one fetch_add each (bulk calls take n at
/// once). Ticket t names slot t % SEGMENT_SIZE of segment t / SEGMENT_SIZE; segments live in
/// nodes of a grow-only, type-stable node storage and are linked in order by 64-bit
/// {index, tag} words. The producer of ticket t constructs its element in the slot and
/// publishes it with one CAS; the consumer of ticket t takes it. A consumer that finds its slot
/// still empty waits a moment, then marks it skipped and takes a new ticket: a stalled producer
/// never holds up anybody else's elements (it moves its element to a later ticket when it
/// resumes). When both sides have passed every slot of the oldest segment, its node goes back
/// to a tagged free list and is reused; nodes are never returned to the allocator while the
/// queue lives, so a thread holding a stale index always reads a live node (its 64-bit segment
/// number tells the thread whether the node still is the one it wanted).
///
/// Template parameters:
///   T       the element type: nothrow-destructible, move- or copy-constructible, and
///           constructible from the arguments given to enqueue; move-only, copy-only (its move
///           deleted: it is copied where others are moved) and throwing constructors are fine.
///   Traits  async::traits or a struct with some of the same members.
///
/// Guarantees:
///   - FIFO in ticket order: one producer's elements come out in the order it enqueued them,
///     at every consumer. Every element is dequeued exactly once, or destroyed by ~queue.
///   - Happens-before: what a producer did before enqueueing an element happens before what
///     the consumer that dequeues it does afterwards.
///   - Progress: enqueue and bulk_enqueue are lock-free and finish in a bounded number of
///     steps of their own, whatever T's moves cost: an element whose slot a consumer skipped
///     (its producer was slower than the consumer's spin budget) is moved to a later slot that
///     its producer claims first, and no consumer skips a claimed slot. dequeue and
///     bulk_dequeue are lock-free except at such a claimed slot, where the one consumer holding
///     that ticket waits for the move of that one element; a stalled producer delays no other
///     consumer and no other element. blocking_dequeue and dequeue_for park on an empty queue.
///   - close() makes every later enqueue return false; consumers drain what went in before.
///
/// Memory: per element, its slot (4 + sizeof(T) rounded up to alignof(T)); per node SEGMENT_SIZE
/// slots plus two cache lines; per queue the L1 top-level pointers and a few cache lines. An
/// empty queue holds one middle block and one leaf block (L3 nodes). After draining, nodes are
/// reused, so a steady load does not grow memory; memory is given back by ~queue only.
///
/// When not to use: for a fixed capacity with blocking producers use async::bounded_queue; for
/// one producer and one consumer a single-producer ring is cheaper.
///
/// Example:
///   async::queue<std::string> q;
///   std::thread producer([&] { q.enqueue("hello"); q.close(); });
///   std::string s;
///   while (q.blocking_dequeue(s)) { use(s); }   // false once closed and drained
///   producer.join();
template <typename T, typename Traits = traits>
class queue {
  static_assert(std::is_nothrow_destructible<T>::value,
                "async::queue<T>: T must be nothrow destructible.");
  static_assert(std::is_move_constructible<T>::value || std::is_copy_constructible<T>::value,
                "async::queue<T>: T must be move or copy constructible (a producer whose slot "
                "was skipped moves its element to a later slot; a copy-only T is copied).");
  static_assert(!std::is_reference<T>::value && !std::is_array<T>::value,
                "async::queue<T>: T must be an object type (not a reference or an array).");

  static constexpr bool noexcept_check = detail::knob_noexcept_check<Traits, traits>::value;
  static constexpr std::size_t line_size = detail::knob_cacheline<Traits, traits>::value;
  static constexpr unsigned spin_budget = detail::knob_spin_budget<Traits, traits>::value;
  static constexpr std::size_t segment_size = detail::knob_segment_size<Traits, traits>::value;
  static constexpr std::size_t level1 = detail::knob_level1<Traits, traits>::value;
  static constexpr std::size_t level2 = detail::knob_level2<Traits, traits>::value;
  static constexpr std::size_t level3 = detail::knob_level3<Traits, traits>::value;
  static constexpr unsigned index_bits = detail::knob_index_bits<Traits, traits>::value;
  static constexpr unsigned tag_bits = detail::knob_tag_bits<Traits, traits>::value;

  static_assert(line_size >= 16 && (line_size & (line_size - 1)) == 0,
                "async::queue: CachelineSize must be a power of two, at least 16.");
  static_assert(segment_size >= 2 && (segment_size & (segment_size - 1)) == 0 &&
                    segment_size <= (std::size_t(1) << 20),
                "async::queue: SEGMENT_SIZE must be a power of two between 2 and 2^20.");
  static_assert(static_cast<double>(level1) * level2 * level3 <
                    static_cast<double>((std::uint64_t(1) << index_bits) - 1),
                "async::queue: NODE_LEVEL1 x NODE_LEVEL2 x NODE_LEVEL3 must be below "
                "2^INDEX_BITS - 1 (the all-ones index means 'no node').");

public:
  using value_type = T;
  using traits_type = Traits;

  /// An empty queue with one node. Not thread-safe.
  queue() : queue(0, detail::first_ticket{0}) {}

  /// An empty queue with room for at least `reserve` elements before it allocates again.
  /// Throws std::length_error when the node storage cannot hold that many (for example
  /// reserve == SIZE_MAX with the default traits). Not thread-safe.
  explicit queue(std::size_t reserve) : queue(reserve, detail::first_ticket{0}) {}

  /// Test seam: both ticket counters start at `start` (rounded down to a segment boundary), so
  /// tests can put segment numbers, and the tags derived from them, near a wrap point.
  queue(std::size_t reserve, detail::first_ticket start) {
    const std::uint64_t first_segment = start.value / segment_size;
    head_.value.store(first_segment * segment_size, std::memory_order_relaxed);
    tail_.value.store(first_segment * segment_size, std::memory_order_relaxed);
    const std::uint32_t first = storage_.allocate();
    node& n = storage_[first];
    n.id.store(first_segment, std::memory_order_relaxed);
    n.next.store(nil_after(first_segment), std::memory_order_relaxed);
    // The free list's tag starts where the segment numbers do (a test can start both near a
    // wrap point).
    free_top_.value.store(link::make(link::null_index, tag_of(first_segment)),
                          std::memory_order_relaxed);
    const word w = link::make(first, tag_of(first_segment));
    anchor_.value.store(w, std::memory_order_relaxed);
    enq_hint_.value.store(w, std::memory_order_relaxed);
    deq_hint_.value.store(w, std::memory_order_relaxed);
    // Written without reserve + segment_size - 1, which wraps for reserve near SIZE_MAX.
    const std::uint64_t nodes = reserve / segment_size + (reserve % segment_size != 0 ? 1 : 0);
    if (nodes > storage_type::capacity - 1) {
      throw std::length_error("async::queue: cannot reserve more elements than the node storage "
                              "holds (raise NODE_LEVEL1..3)");
    }
    for (std::uint64_t k = 0; k < nodes; ++k) {
      push_free(storage_.allocate());
    }
  }

  queue(const queue&) = delete;
  queue& operator=(const queue&) = delete;
  queue(queue&&) = delete;
  queue& operator=(queue&&) = delete;

  /// Destroys the elements still inside. Not thread-safe: no call may be running.
  ~queue() {
    // Every ticket below head_ has been consumed (a consumed slot keeps its "full" state until
    // the node is reused), so the elements still inside are the full slots at or after head_.
    const std::uint64_t head = head_.value.load(std::memory_order_acquire);
    std::uint32_t i = link::index(anchor_.value.load(std::memory_order_acquire));
    for (;;) {
      const std::uint64_t id = storage_[i].id.load(std::memory_order_acquire);
      for (std::uint64_t t = id * segment_size; t < (id + 1) * segment_size; ++t) {
        slot& s = slot_of(i, t);
        if (t >= head && s.state.load(std::memory_order_acquire) == slot_full) {
          s.element.destroy();
        }
      }
      const word next = storage_[i].next.load(std::memory_order_acquire);
      if (link::is_null(next) ||
          storage_[link::index(next)].id.load(std::memory_order_acquire) != id + 1) {
        break;
      }
      i = link::index(next);
    }
  }

  // ---- producers ------------------------------------------------------------------------------

  /// Constructs an element from `args` at the tail. Returns true when it went in; false when
  /// the queue is closed, or, with NOEXCEPT_CHECK, when T's constructor threw. (In the rare case
  /// that the element's slot was skipped and the queue closed before it could move on, the
  /// element is destroyed and false is returned.) Throws std::length_error, before taking a
  /// ticket, when every node of the storage is in use. When memory runs out after the ticket
  /// was taken, the call waits for memory (the ticket's slot must be settled). Thread-safe
  /// (lock-free).
  template <typename... Args>
  bool enqueue(Args&&... args) {
    // (E0) acquire: pairs with the release CAS that installed the hint; read before the ticket
    // is taken, so it names a segment at or before the ticket's (or a recycled node).
    const word hint = enq_hint_.value.load(std::memory_order_acquire);
    check_capacity();
    // (E1) seq_cst: the ticket; seq_cst also orders it before the waiter check in notify().
    const std::uint64_t t = tail_.value.fetch_add(1, std::memory_order_seq_cst);
    if (ASYNC_UNLIKELY((t & closed_bit) != 0)) {
      return false;
    }
    ASYNC_PERTURB();
    const std::uint32_t i = locate_for_ticket(enq_hint_.value, hint, t / segment_size);
    slot& s = slot_of(i, t);
    if (!emplace(i, s, std::forward<Args>(args)...)) {
      return false;
    }
    ASYNC_PERTURB();
    if (ASYNC_LIKELY(publish(s))) {
      notify();
      return true;
    }
    return relocate(i, s);
  }

  /// Enqueues n elements constructed from *first, *(first + 1), ... (an input iterator is read
  /// exactly n times, in order), taking n tickets with one fetch_add. The elements keep their
  /// order. Returns how many went in: n, fewer when the queue was closed (the rest of the range
  /// is not read) or, with NOEXCEPT_CHECK, when constructors threw (those elements are
  /// skipped). n == 0 does nothing. Throws std::length_error, before reading the range or
  /// taking a ticket, when n exceeds max_bulk() (n tickets could need more nodes than the
  /// storage has). Thread-safe (lock-free).
  template <typename InputIt>
  std::size_t bulk_enqueue(InputIt first, std::size_t n) {
    if (ASYNC_UNLIKELY(n > max_bulk())) {
      throw std::length_error("async::queue: bulk_enqueue of more elements than the node "
                              "storage can ever hold at once (see max_bulk())");
    }
    std::size_t in = 0;
    std::size_t left = n;
    detail::holder<T> carry; // an element whose slot was skipped: it goes first in the next round
    while (left > 0) {
      const word hint = enq_hint_.value.load(std::memory_order_acquire); // (E0)
      check_capacity();
      const std::uint64_t t0 = tail_.value.fetch_add(left, std::memory_order_seq_cst); // (E1)
      if (ASYNC_UNLIKELY((t0 & closed_bit) != 0)) {
        break; // closed: `carry` (if any) is destroyed, the rest of the range is not read
      }
      ASYNC_PERTURB();
      std::uint32_t i = locate_for_ticket(enq_hint_.value, hint, t0 / segment_size);
      std::size_t k = 0;
      // The first ticket of this round whose slot the call has not settled yet (published,
      // voided, or handed back); what is left of the round is voided if something throws.
      std::uint64_t unsettled = t0;
      try {
        for (; k < left; ++k) {
          const std::uint64_t t = t0 + k;
          if (k > 0 && t % segment_size == 0) {
            i = locate_for_ticket(enq_hint_.value, link::make(i, tag_of(t / segment_size - 1)),
                                  t / segment_size);
          }
          slot& s = slot_of(i, t);
          // unsettled == t here: a throw before the constructors below start (reading *first)
          // leaves slot t to the catch block. Once they start, slot t is theirs: each voids it
          // when it throws, and voiding a slot twice would count a skipped slot as finished
          // twice (the node would be recycled with an element inside).
          const bool from_range = !carry.engaged();
          if (!from_range) {
            unsettled = t + 1;
            const carried placed = place_carried(i, s, carry);
            if (placed == carried::lost) {
              continue; // NOEXCEPT_CHECK: the move threw, that element is lost, its slot void
            }
            if (placed == carried::skipped) {
              // Skipped before we could claim it (nothing was moved): as below, the element
              // and the rest of the round go to a new round.
              void_slots(i, t + 1, t0 + left);
              unsettled = t0 + left;
              break;
            }
            ++in;
            notify();
            continue;
          } else {
            auto&& source = *first;
            unsettled = t + 1;
            const bool made = emplace(i, s, std::forward<decltype(source)>(source));
            if (!made) {
              ++first;
              continue; // NOEXCEPT_CHECK: this element is skipped, its slot is void
            }
          }
          ASYNC_PERTURB();
          if (ASYNC_LIKELY(publish(s))) {
            ++in;
            // Wake a parked consumer now, not when the call returns: the rest of the input
            // may take long to read, or wait on that very consumer. Costs a load of the
            // waiter count (a line that stays shared) while nobody is parked.
            notify();
            if (from_range) {
              ++first;
            }
            continue;
          }
          // A consumer skipped this slot: the element, and every later one, must go after it
          // to keep their order. Void the rest of this round's slots and start a new round.
          // hand_back leaves slot t even when the move throws.
          hand_back(i, s, carry);
          void_slots(i, t + 1, t0 + left);
          unsettled = t0 + left;
          if (from_range) {
            ++first;
          }
          break;
        }
      } catch (...) {
        // A constructor threw (without NOEXCEPT_CHECK) or memory ran out: the elements before
        // are in; void what is left of the round (locating its segment if need be), report.
        void_slots(i, unsettled, t0 + left);
        throw;
      }
      if (k == left) {
        left = 0;
      } else {
        left -= k;
      }
    }
    return in;
  }

  // ---- consumers ------------------------------------------------------------------------------

  /// Moves the oldest element into `out` (by assignment) if there is one now. Never waits for
  /// long. Returns false when the queue is empty. If the assignment throws, the element is
  /// destroyed and the exception propagates. Thread-safe (lock-free).
  template <typename U>
  bool dequeue(U& out) {
    for (;;) {
      const std::uint64_t h = head_.value.load(std::memory_order_relaxed);
      // (D0) acquire: as (E0), for the consumers' hint.
      const word hint = deq_hint_.value.load(std::memory_order_acquire);
      // Not empty if the slot at the head already holds an element (a look at a line we are
      // about to use anyway); otherwise compare with the tail, whose line producers keep
      // writing. A wrong guess (the head moved meanwhile) costs one skipped ticket.
      if (!looks_full(hint, h) && h >= effective_tail()) {
        return false;
      }
      ASYNC_PERTURB();
      // (D1) seq_cst: the ticket (relaxed would do for the ticket alone; seq_cst keeps the
      // reads that follow ordered after a waiter's registration, see blocking_dequeue).
      const std::uint64_t mine = head_.value.fetch_add(1, std::memory_order_seq_cst);
      ASYNC_PERTURB();
      const std::uint32_t i = locate_for_consumer(hint, mine / segment_size);
      finish_batch finished{this};
      if (take(i, slot_of(i, mine), mine, finished,
               [&out](T& v) { detail::assign_relocated(out, v); })) {
        return true;
      }
    }
  }

  /// Moves up to n of the oldest elements to `out` (an output iterator such as a pointer into
  /// an array or std::back_inserter), in queue order, taking tickets with one fetch_add. Returns
  /// how many were written; 0 when the queue is empty or n == 0. If writing to `out` throws, the
  /// elements of the tickets this call had taken but not written are destroyed and the
  /// exception propagates. Thread-safe (lock-free).
  template <typename OutputIt>
  std::size_t bulk_dequeue(OutputIt out, std::size_t n) {
    std::size_t got = 0;
    while (got < n) {
      const std::uint64_t h = head_.value.load(std::memory_order_relaxed);
      const std::uint64_t t = effective_tail();
      if (h >= t) {
        break;
      }
      const std::size_t want = static_cast<std::size_t>(
          std::min<std::uint64_t>(static_cast<std::uint64_t>(n - got), t - h));
      const word hint = deq_hint_.value.load(std::memory_order_acquire); // (D0)
      ASYNC_PERTURB();
      const std::uint64_t h0 = head_.value.fetch_add(want, std::memory_order_seq_cst); // (D1)
      ASYNC_PERTURB();
      std::uint32_t i = locate_for_consumer(hint, h0 / segment_size);
      finish_batch finished{this};
      std::size_t k = 0;
      try {
        for (; k < want; ++k) {
          const std::uint64_t mine = h0 + k;
          if (k > 0 && mine % segment_size == 0) {
            finished.flush(); // the node may be recycled once its slots are counted
            i = locate_for_consumer(link::make(i, tag_of(mine / segment_size - 1)),
                                    mine / segment_size);
          }
          if (take(i, slot_of(i, mine), mine, finished, [&out](T& v) {
                detail::assign_relocated(*out, v);
                ++out;
              })) {
            ++got;
          }
        }
      } catch (...) {
        // Writing to `out` threw: the tickets this call took and has not served are still its
        // own. Their elements are destroyed (reported lost by the exception) so that their
        // slots are left and the queue stays whole.
        for (++k; k < want; ++k) {
          const std::uint64_t mine = h0 + k;
          if (mine % segment_size == 0) {
            finished.flush();
            i = locate_for_consumer(link::make(i, tag_of(mine / segment_size - 1)),
                                    mine / segment_size);
          }
          take(i, slot_of(i, mine), mine, finished, [](T&) {});
        }
        throw;
      }
    }
    return got;
  }

  /// Moves the oldest element into `out`, waiting politely while the queue is empty (a short
  /// spin, then the thread parks). Returns false only when the queue is closed and every
  /// element that went in has been taken. Thread-safe (may block).
  template <typename U>
  bool blocking_dequeue(U& out) {
    return wait_dequeue(out, nullptr);
  }

  /// Like blocking_dequeue, but gives up after `timeout`. Returns false on timeout, or when the
  /// queue is closed and drained. Thread-safe (may block).
  template <typename U, typename Rep, typename Period>
  bool dequeue_for(U& out, const std::chrono::duration<Rep, Period>& timeout) {
    const auto deadline = detail::deadline_after(timeout);
    return wait_dequeue(out, &deadline);
  }

  // ---- closing --------------------------------------------------------------------------------

  /// Closes the queue: every enqueue that takes its ticket afterwards returns false (and a bulk
  /// call stops); consumers still receive every element that went in before; blocked and timed
  /// dequeue calls return false once nothing is left. Idempotent. Thread-safe (lock-free; wakes
  /// every parked consumer).
  void close() noexcept {
    std::uint64_t t = tail_.value.load(std::memory_order_seq_cst);
    while ((t & closed_bit) == 0) {
      // (C1) seq_cst: after this CAS every producer's fetch_add sees the bit; the value it
      // replaced is the exact number of tickets handed out before the close.
      if (tail_.value.compare_exchange_weak(t, t | closed_bit, std::memory_order_seq_cst,
                                            std::memory_order_seq_cst)) {
        // (C2) seq_cst: consumers read it after they see the bit; pairs with (W2).
        closed_at_.store(t, std::memory_order_seq_cst);
        wake_all();
        return;
      }
    }
  }

  /// Whether close() has been called. Thread-safe.
  bool is_closed() const noexcept {
    return (tail_.value.load(std::memory_order_acquire) & closed_bit) != 0;
  }

  // ---- observers ------------------------------------------------------------------------------

  /// The number of elements, give or take those in flight (the result may be stale before it
  /// is returned). Thread-safe (wait-free).
  std::size_t size_approx() const noexcept {
    const std::uint64_t h = head_.value.load(std::memory_order_acquire);
    const std::uint64_t t = effective_tail();
    return t > h ? static_cast<std::size_t>(t - h) : 0;
  }

  /// Whether the queue looked empty (racy, like size_approx). Thread-safe (wait-free).
  bool was_empty() const noexcept { return size_approx() == 0; }

  /// Whether the queue is lock-free on this platform: its links and counters are plain 64-bit
  /// atomics, lock-free on x86-64, AArch64 and ARMv7 (checked when compiling).
  static constexpr bool is_lock_free_v() { return ATOMIC_LLONG_LOCK_FREE == 2; }

  /// Bytes of node storage held (nodes in use and on the free list). Thread-safe.
  std::size_t storage_bytes() const noexcept { return storage_.bytes(); }

  /// Nodes taken from the storage so far (in use plus free). Thread-safe.
  std::size_t nodes_allocated() const noexcept {
    // The storage's counter goes on counting failed allocations past its capacity.
    return static_cast<std::size_t>(
        std::min<std::uint64_t>(storage_.allocated(), storage_type::capacity));
  }

  /// The largest n that bulk_enqueue accepts: n tickets may start anywhere in a segment and so
  /// span n / SEGMENT_SIZE + 2 nodes, all of which must exist at once.
  static constexpr std::size_t max_bulk() noexcept {
    return static_cast<std::size_t>(std::min<std::uint64_t>(
        (storage_type::capacity - 1) * segment_size, std::numeric_limits<std::size_t>::max()));
  }

private:
  using link = detail::tagged_index<index_bits, tag_bits>;
  using word = std::uint64_t;

  static constexpr std::uint64_t closed_bit = std::uint64_t(1) << 63;
  // A node's id is its segment number while it is linked; while it is not, free_flag | (one
  // more than its last segment number, 0 for a fresh node): unique for each lifetime.
  static constexpr std::uint64_t free_flag = std::uint64_t(1) << 63;

  // Slot states. empty -> full (producer) -> consumed by the consumer (the state stays full;
  // the node is reset before reuse); empty -> skipped (consumer, the producer has not
  // published) -> the producer moves its element elsewhere; empty -> void (producer: its
  // constructor threw or its bulk round was cut short) -> the consumer passes.
  // empty -> writing (a producer whose element was skipped once claims its next slot before it
  // moves the element in) -> full, or void if the move throws. A consumer never skips a
  // writing slot: it waits for the move. So an element that is slow to move is skipped at most
  // once, instead of being moved from ticket to ticket for as long as a consumer polls.
  static constexpr std::uint32_t slot_empty = 0;
  static constexpr std::uint32_t slot_full = 1;
  static constexpr std::uint32_t slot_skipped = 2;
  static constexpr std::uint32_t slot_void = 3;
  static constexpr std::uint32_t slot_writing = 4;

  // Its state is written by the producer of its ticket (publish or void) and by its consumer
  // (skip).
  using slot = detail::slot<T, std::uint32_t>;

  static constexpr std::size_t slots_per_line_raw =
      sizeof(slot) >= line_size ? 1 : line_size / sizeof(slot);
  static constexpr std::size_t floor_pow2(std::size_t x) {
    return x <= 1 ? 1 : 2 * floor_pow2(x / 2);
  }
  static constexpr std::size_t slots_per_line = floor_pow2(slots_per_line_raw) > segment_size
                                                    ? segment_size
                                                    : floor_pow2(slots_per_line_raw);
  static constexpr std::size_t lines_per_segment = segment_size / slots_per_line;

  struct node {
    // Line 1, read by every operation and written once per lifetime of the node.
    // Written when the node is linked (segment number) and when it is recycled (free_flag).
    std::atomic<std::uint64_t> id{free_flag};
    // Written once per lifetime by the CAS that links the next segment (from the "nil" link).
    std::atomic<word> next{link::make(link::null_index, 0)};
    // Written by the one thread that wins the right to recycle the node: last segment + 1.
    std::atomic<std::uint64_t> claimed{0};
    // Written by the thread that pushes the node on the free list.
    std::atomic<std::uint32_t> free_next{link::null_index};
    char pad1[line_size - 3 * sizeof(std::uint64_t) - sizeof(std::uint32_t)];
    // Line 2. Written by the last party to leave each slot: how many slots are finished.
    std::atomic<std::uint32_t> finished{0};
    char pad2[line_size - sizeof(std::uint32_t)];
    slot slots[segment_size];
  };
  static_assert(line_size >= 3 * sizeof(std::uint64_t) + 2 * sizeof(std::uint32_t),
                "async::queue: CachelineSize is too small for a node header.");

  using storage_type = detail::node_storage<node, level1, level2, level3>;

  // ---- segment numbers, links ---------------------------------------------------------------

  static constexpr std::uint32_t tag_of(std::uint64_t segment) noexcept {
    return static_cast<std::uint32_t>(segment) & link::tag_mask;
  }
  // The "no next node" value of a node that is segment s: tagged with s, so that a stale
  // appender (who saw the node as an earlier segment) fails its CAS.
  static constexpr word nil_after(std::uint64_t s) noexcept {
    return link::make(link::null_index, tag_of(s));
  }
  static constexpr bool is_free(std::uint64_t id) noexcept { return (id & free_flag) != 0; }

  slot& slot_of(std::uint32_t i, std::uint64_t ticket) const noexcept {
    // Consecutive tickets go to different cache lines: ticket k of a segment lives on line
    // k % lines_per_segment, at position k / lines_per_segment within it.
    const std::size_t k = static_cast<std::size_t>(ticket % segment_size);
    return storage_[i].slots[(k % lines_per_segment) * slots_per_line + k / lines_per_segment];
  }

  std::uint64_t effective_tail() const noexcept {
    // seq_cst: pairs with (C1)/(C2) and with a producer's (E1) for a registered waiter.
    const std::uint64_t t = tail_.value.load(std::memory_order_seq_cst);
    if (ASYNC_LIKELY((t & closed_bit) == 0)) {
      return t;
    }
    // Closed: tickets taken after the close are refused and never filled. Until the closer
    // has stored the exact count, the masked value is an upper bound (consumers that go past
    // the true end skip empty slots).
    const std::uint64_t at = closed_at_.load(std::memory_order_seq_cst);
    return at != no_close ? at : (t & ~closed_bit);
  }

  // ---- finding a segment ----------------------------------------------------------------------

  // The index of the node that is segment s, appending segments as needed. `seen` is a hint
  // read before the caller took its ticket in s. The caller's ticket keeps segment s alive:
  // a node is recycled only after both parties of each of its slots have left it, so once a
  // node is seen with id == s it stays segment s until the caller is done with its slot.
  std::uint32_t locate(std::atomic<word>& hint, word seen, std::uint64_t s) {
    std::uint32_t i = link::index(seen);
    // acquire: pairs with (L2)/(L3), the release that made the node segment id.
    std::uint64_t id = storage_[i].id.load(std::memory_order_acquire);
    if (ASYNC_LIKELY(id == s)) {
      return i;
    }
    ASYNC_PERTURB();
    if (is_free(id) || id > s) {
      anchor_node(s, i, id);
    }
    i = walk(i, id, s);
    // Move the hint forward (a failure means another thread moved it: fine either way).
    if (link::index(seen) != i) {
      hint.compare_exchange_strong(seen, link::make(i, tag_of(s)), std::memory_order_release,
                                   std::memory_order_relaxed);
    }
    return i;
  }

  // locate for a thread that holds a ticket in s. It cannot give its ticket back (the other
  // side of the slot depends on it), so when the segment cannot be created because memory or
  // the node storage is exhausted, it waits for another thread to create it or for memory.
  std::uint32_t locate_for_ticket(std::atomic<word>& hint, word seen, std::uint64_t s) noexcept {
    for (;;) {
      try {
        return locate(hint, seen, s);
      } catch (...) {
        std::this_thread::yield();
      }
    }
  }

  std::uint32_t locate_for_consumer(word seen, std::uint64_t s) noexcept {
    return locate_for_ticket(deq_hint_.value, seen, s);
  }

  // Producers refuse to take a ticket once every node of the storage is in use and none is
  // free (a ticket taken then would have to wait for a consumer to free a node).
  void check_capacity() const {
    if (ASYNC_UNLIKELY(storage_.allocated() >= storage_type::capacity) &&
        link::is_null(free_top_.value.load(std::memory_order_acquire))) {
      throw std::length_error("async::queue: node storage exhausted (raise NODE_LEVEL1..3)");
    }
  }

  // Loads the oldest live segment (the anchor): its node index and segment number. The anchor
  // is at or before every segment that a thread holding a ticket may still need.
  void anchor_node(std::uint64_t s, std::uint32_t& i, std::uint64_t& id) const noexcept {
    for (;;) {
      // acquire: pairs with (R2), the store that moved the anchor.
      const word a = anchor_.value.load(std::memory_order_acquire);
      i = link::index(a);
      id = storage_[i].id.load(std::memory_order_acquire);
      if (!is_free(id) && id <= s) {
        return;
      }
      // The anchor moved on and its old node was recycled between our two loads: reload.
    }
  }

  // From node i (segment id <= s, live when read) to segment s, linking segments as needed.
  std::uint32_t walk(std::uint32_t i, std::uint64_t id, std::uint64_t s) {
    while (id < s) {
      node& n = storage_[i];
      // (L1) acquire: pairs with the CAS that linked the next node (A1).
      word next = n.next.load(std::memory_order_acquire);
      if (link::is_null(next)) {
        if (n.id.load(std::memory_order_acquire) == id) {
          next = append(n, id);
        }
        if (link::is_null(next)) { // n was recycled under us
          anchor_node(s, i, id);
          continue;
        }
      }
      ASYNC_PERTURB();
      const std::uint32_t j = link::index(next);
      std::uint64_t jid = storage_[j].id.load(std::memory_order_acquire);
      ASYNC_PERTURB();
      // Validate: ids never repeat, so if n is still segment id, `next` was read from this
      // lifetime of n, and the node it names cannot have been recycled when jid was read
      // (segments are recycled in order, n first).
      if (n.id.load(std::memory_order_acquire) != id) {
        anchor_node(s, i, id);
        continue;
      }
      if (jid != id + 1) {
        if (is_free(jid)) {
          ASYNC_PERTURB();
          set_id(storage_[j], jid, id + 1); // linked, but its linker has not named it yet: help
          jid = storage_[j].id.load(std::memory_order_acquire);
        }
        if (jid != id + 1) {
          anchor_node(s, i, id);
          continue;
        }
      }
      i = j;
      id = jid;
    }
    return i;
  }

  // (L2) release: makes the node segment `to` (its slots were reset before it was linked).
  void set_id(node& n, std::uint64_t from, std::uint64_t to) noexcept {
    n.id.compare_exchange_strong(from, to, std::memory_order_acq_rel, std::memory_order_acquire);
  }

  // Links a fresh node after n (segment id) unless another thread did; returns n's next link
  // (or a nil link if n turned out to be recycled: the caller revalidates).
  word append(node& n, std::uint64_t id) {
    const std::uint32_t j = take_node();
    node& fresh = storage_[j];
    const std::uint64_t fresh_id = fresh.id.load(std::memory_order_relaxed);
    fresh.next.store(nil_after(id + 1), std::memory_order_relaxed);
    fresh.finished.store(0, std::memory_order_relaxed);
    for (std::size_t k = 0; k < segment_size; ++k) {
      fresh.slots[k].state.store(slot_empty, std::memory_order_relaxed);
    }
    word expected = nil_after(id);
    ASYNC_PERTURB();
    // (A1) seq_cst: publishes the reset node (pairs with (L1)); seq_cst also orders it before
    // the anchor check below, against a finisher's check of the link (see finish_slot).
    if (!n.next.compare_exchange_strong(expected, link::make(j, tag_of(id + 1)),
                                        std::memory_order_seq_cst, std::memory_order_acquire)) {
      push_free(j); // lost the race (or n was recycled): nobody saw this node
      return expected;
    }
    ASYNC_PERTURB();
    // The CAS proves that n.next held nil_after(id), not that n was still segment id: a node
    // recycled since the caller looked at it, then taken by another stalled appender and reset
    // for segment id (the same number: both work on a segment long gone), holds that very
    // value. Ids never come back, so n.id == id now means n was segment id at the CAS.
    if (n.id.load(std::memory_order_acquire) == id) {
      set_id(fresh, fresh_id, id + 1);
      try_recycle();
      return link::make(j, tag_of(id + 1));
    }
    // n has left segment id. Had the link been real, n could only have been recycled after its
    // recycler named j (try_recycle names the next node before it frees the old one), so an
    // unnamed j means the link went into a recycled node. Nobody trusts a link without seeing
    // its node's id first, so nobody can reach j through it: give j back.
    // acquire: pairs with the recycler's naming of j (acq_rel), which comes before its release
    // of n's free id that the load above read.
    if (fresh.id.load(std::memory_order_acquire) == fresh_id) {
      push_free(j);
      return nil_after(id);
    }
    return link::make(j, tag_of(id + 1)); // real, and already named; the caller revalidates
  }

  // ---- the free list and recycling ----------------------------------------------------------

  std::uint32_t take_node() {
    // acquire: pairs with the release CAS in push_free (the node's free_next and its reset).
    word top = free_top_.value.load(std::memory_order_acquire);
    while (!link::is_null(top)) {
      const std::uint32_t i = link::index(top);
      const std::uint32_t below = storage_[i].free_next.load(std::memory_order_relaxed);
      ASYNC_PERTURB();
      // The tag changes at every push and pop: a stale `below` fails the CAS.
      if (free_top_.value.compare_exchange_weak(
              top, link::make(below, link::next_tag(link::tag(top))), std::memory_order_acquire,
              std::memory_order_acquire)) {
        return i;
      }
    }
    return storage_.allocate();
  }

  void push_free(std::uint32_t i) noexcept {
    word top = free_top_.value.load(std::memory_order_relaxed);
    do {
      storage_[i].free_next.store(link::index(top), std::memory_order_relaxed);
      // release: pairs with the acquire in take_node.
    } while (!free_top_.value.compare_exchange_weak(
        top, link::make(i, link::next_tag(link::tag(top))), std::memory_order_release,
        std::memory_order_relaxed));
  }

  // The last party to leave a slot calls this. When every slot of the node is finished, the
  // node can be recycled once it is the anchor (segments are recycled in order).
  void finish_slot(std::uint32_t i, std::uint32_t slots = 1) noexcept {
    // (F1) seq_cst (acq_rel for the counting: the last finisher sees everything done in the
    // node's slots); seq_cst orders it before the anchor and link checks in try_recycle,
    // against (R2) and (A1).
    ASYNC_PERTURB();
    const std::uint32_t before = storage_[i].finished.fetch_add(slots, std::memory_order_seq_cst);
    if (ASYNC_UNLIKELY(before + slots == segment_size)) {
      try_recycle();
    }
  }

  // Counts finished slots of one node at a time, for bulk_dequeue: one fetch_add per node
  // instead of one per element. Flushed before moving to another node and at the end.
  struct finish_batch {
    queue* q;
    std::uint32_t node = 0;
    std::uint32_t count = 0;

    explicit finish_batch(queue* owner) noexcept : q(owner) {}
    finish_batch(const finish_batch&) = delete;
    finish_batch& operator=(const finish_batch&) = delete;
    ~finish_batch() { flush(); }

    void add(std::uint32_t i) noexcept {
      if (count != 0 && i != node) {
        flush();
      }
      node = i;
      ++count;
    }
    void flush() noexcept {
      if (count != 0) {
        q->finish_slot(node, count);
        count = 0;
      }
    }
  };

  // Whether the slot of ticket h holds an element, judged from the node the hint names (false
  // when that node is not h's segment). A guess: nothing is read that is not atomic.
  bool looks_full(word hint, std::uint64_t h) const noexcept {
    const std::uint32_t i = link::index(hint);
    return storage_[i].id.load(std::memory_order_acquire) == h / segment_size &&
           slot_of(i, h).state.load(std::memory_order_relaxed) == slot_full;
  }

  // Recycles finished segments at the anchor, in order, while each has a successor. Safe to
  // call from any thread at any time: one thread wins the right to recycle each segment.
  void try_recycle() noexcept {
    for (;;) {
      const word a = anchor_.value.load(std::memory_order_seq_cst);
      const std::uint32_t i = link::index(a);
      node& n = storage_[i];
      const std::uint64_t id = n.id.load(std::memory_order_acquire);
      // The node must still be in the life the anchor named (its tag): a node recycled since
      // the anchor was read may now be a later, finished segment in the middle of the list, and
      // recycling that would move the anchor past unfinished segments.
      if (is_free(id) || link::tag(a) != tag_of(id) ||
          n.finished.load(std::memory_order_seq_cst) != segment_size) {
        return;
      }
      const word next = n.next.load(std::memory_order_seq_cst);
      if (link::is_null(next)) {
        return; // whoever links the next segment calls try_recycle again
      }
      ASYNC_PERTURB();
      std::uint64_t claimed = n.claimed.load(std::memory_order_acquire);
      if (claimed > id || n.id.load(std::memory_order_acquire) != id) {
        return; // already claimed, or recycled since we looked
      }
      // (R1) the claim: `claimed` only grows, so a thread that looked at an earlier lifetime
      // of the node fails here.
      if (!n.claimed.compare_exchange_strong(claimed, id + 1, std::memory_order_acq_rel,
                                             std::memory_order_relaxed)) {
        return;
      }
      ASYNC_PERTURB();
      const std::uint32_t j = link::index(next);
      const std::uint64_t jid = storage_[j].id.load(std::memory_order_acquire);
      if (is_free(jid)) {
        set_id(storage_[j], jid, id + 1);
      }
      ASYNC_PERTURB();
      // The old node stops being segment id before the anchor moves on (and so before the
      // next node can be recycled): a walker that read n.next and then the next node's id
      // re-checks n.id after that read, so it never trusts an id that the next node received
      // in a later life (it would "help" name a node that is back on the free list).
      n.id.store(free_flag | (id + 1), std::memory_order_release);
      ASYNC_PERTURB();
      // (R2) seq_cst: moves the anchor (pairs with the acquire in anchor_node); seq_cst orders
      // it before the check of the next node's counter, against (F1). Threads that find the
      // anchor naming a free node wait in anchor_node for this store.
      anchor_.value.store(link::make(j, tag_of(id + 1)), std::memory_order_seq_cst);
      ASYNC_PERTURB();
      push_free(i);
    }
  }

  // ---- producer helpers -----------------------------------------------------------------------

  // Constructs the element in slot s of node i; a throwing constructor voids the slot.
  template <typename... Args>
  bool emplace(std::uint32_t i, slot& s, Args&&... args) {
    return s.template emplace<noexcept_check>([this, i, &s] { void_slot(i, s); },
                                              std::forward<Args>(args)...);
  }

  // (P1) seq_cst: publishes the element (pairs with the consumer's load (T1)); seq_cst orders
  // it before the waiter check in notify(). Fails when the consumer skipped the slot.
  static bool publish(slot& s) noexcept {
    std::uint32_t expected = slot_empty;
    return s.state.compare_exchange_strong(expected, slot_full, std::memory_order_seq_cst,
                                           std::memory_order_acquire);
  }

  // The producer gives up its slot: the consumer passes it (or already did).
  void void_slot(std::uint32_t i, slot& s) noexcept {
    std::uint32_t expected = slot_empty;
    // release: the consumer's acquire sees that nothing is there. On failure the consumer has
    // already skipped the slot and the producer is the last to leave, or the slot is void
    // already (a bulk call voiding what is left after a throw): nothing to do.
    if (!s.state.compare_exchange_strong(expected, slot_void, std::memory_order_release,
                                         std::memory_order_acquire) &&
        expected == slot_skipped) {
      finish_slot(i);
    }
  }

  // Voids the slots of tickets [from, end) reserved by a bulk round that was cut short; i is the
  // node of ticket from - 1 (or of `from` itself when it is not the first of a segment).
  void void_slots(std::uint32_t i, std::uint64_t from, std::uint64_t end) noexcept {
    for (std::uint64_t t = from; t < end; ++t) {
      if (t % segment_size == 0) {
        i = locate_for_ticket(enq_hint_.value, link::make(i, tag_of(t / segment_size - 1)),
                              t / segment_size);
      }
      void_slot(i, slot_of(i, t));
    }
  }

  // The consumer skipped slot s (node i) before its element was published: move the element
  // into `carry` and leave the slot for good. If the move throws, the element is destroyed
  // (the enqueue fails with that exception) and the slot is left all the same.
  void hand_back(std::uint32_t i, slot& s, detail::holder<T>& carry) {
    const auto done = detail::at_scope_exit([this, i, &s] {
      s.element.destroy();
      finish_slot(i);
    });
    ASYNC_PERTURB();
    carry.take_from(*s.element.get());
  }

  // The element in slot s of node i was skipped by its consumer: move it to a new ticket.
  bool relocate(std::uint32_t i, slot& s) {
    detail::holder<T> carry;
    hand_back(i, s, carry);
    for (;;) {
      const word hint = enq_hint_.value.load(std::memory_order_acquire);           // (E0)
      const std::uint64_t t = tail_.value.fetch_add(1, std::memory_order_seq_cst); // (E1)
      if ((t & closed_bit) != 0) {
        return false; // closed meanwhile: the element is destroyed with `carry`
      }
      ASYNC_PERTURB();
      const std::uint32_t j = locate_for_ticket(enq_hint_.value, hint, t / segment_size);
      switch (place_carried(j, slot_of(j, t), carry)) {
      case carried::placed:
        notify();
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
  carried place_carried(std::uint32_t i, slot& s, detail::holder<T>& carry) {
    std::uint32_t expected = slot_empty;
    // acquire on failure: the consumer's skip; relaxed would do on success (nothing is
    // published by the claim, the release comes with the element).
    if (!s.state.compare_exchange_strong(expected, slot_writing, std::memory_order_acquire,
                                         std::memory_order_acquire)) {
      finish_slot(i); // skipped: its consumer has left, we are the last party
      return carried::skipped;
    }
    ASYNC_PERTURB();
    try {
      s.element.relocate_from(carry.get());
    } catch (...) {
      // release: the consumer waiting on the claim sees that nothing is there.
      s.state.store(slot_void, std::memory_order_release);
      carry.reset();
      if (noexcept_check) {
        return carried::lost;
      }
      throw;
    }
    carry.reset();
    // (P2) seq_cst: publishes the element, as (P1); only this producer writes a claimed slot.
    s.state.store(slot_full, std::memory_order_seq_cst);
    return carried::placed;
  }

  // ---- consumer helpers -----------------------------------------------------------------------

  // Takes ticket `mine` (slot s of node i): waits briefly for its element, hands it to
  // deliver(T&), then destroys it and counts the slot in `finished` (also when deliver throws).
  // Returns false when the slot carried nothing (skipped or void).
  template <typename Deliver>
  bool take(std::uint32_t i, slot& s, std::uint64_t mine, finish_batch& finished, Deliver deliver) {
    if (!await_slot(i, s, mine)) {
      return false;
    }
    const auto done = detail::at_scope_exit([&finished, i, &s] {
      s.element.destroy();
      finished.add(i);
    });
    deliver(*s.element.get());
    return true;
  }

  // Waits briefly for the producer of `mine`; true when the slot holds an element. Otherwise
  // the slot is left for good: skipped (its producer will move the element elsewhere) or void.
  bool await_slot(std::uint32_t i, slot& s, std::uint64_t mine) noexcept {
    // (T1) seq_cst (acquire for the element): pairs with (P1).
    std::uint32_t state = s.state.load(std::memory_order_seq_cst);
    if (ASYNC_UNLIKELY(state == slot_empty)) {
      // Wait only while the ticket has a producer (who is constructing right now).
      for (unsigned spins = 0; spins < spin_budget; ++spins) {
        if ((spins & 31) == 0 && effective_tail() <= mine) {
          break;
        }
        detail::cpu_pause();
        state = s.state.load(std::memory_order_seq_cst);
        if (state != slot_empty) {
          break;
        }
      }
      if (state == slot_empty) {
        ASYNC_PERTURB();
        // seq_cst (acq_rel would do for the slot): on success the producer's failing publish
        // sees the skip; on failure we read what the producer published (pairs with (P1) or
        // void_slot).
        if (s.state.compare_exchange_strong(state, slot_skipped, std::memory_order_seq_cst,
                                            std::memory_order_seq_cst)) {
          return false; // the producer (if one ever comes) is the last to leave
        }
      }
    }
    // A producer claimed the slot for an element it is moving in: wait for the move (pause,
    // then yield; it cannot park: nobody wakes a claimed slot's waiter).
    for (unsigned spins = 0; ASYNC_UNLIKELY(state == slot_writing); ++spins) {
      if (spins < spin_budget) {
        detail::cpu_pause();
      } else {
        std::this_thread::yield();
      }
      // (T2) seq_cst: pairs with (P2), or with the release that voids the slot.
      state = s.state.load(std::memory_order_seq_cst);
    }
    if (state == slot_void) {
      finish_slot(i);
      return false;
    }
    return true;
  }

  template <typename U>
  bool wait_dequeue(U& out, const detail::wait_clock::time_point* deadline) {
    detail::backoff active(spin_budget, 16, std::chrono::microseconds(20));
    for (;;) {
      if (dequeue(out)) {
        return true;
      }
      if (drained()) {
        return false;
      }
      if (active.wait()) {
        continue;
      }
      const std::uint64_t epoch = wake_epoch_.value.load(std::memory_order_seq_cst);
      // (W1) seq_cst: registers the waiter before the re-check below; pairs with the check in
      // notify(), which follows the producer's seq_cst publish (P1).
      waiters_.value.fetch_add(1, std::memory_order_seq_cst);
      struct unregister {
        std::atomic<std::uint32_t>& waiters;
        ~unregister() { waiters.fetch_sub(1, std::memory_order_relaxed); }
      } registered{waiters_.value};
      if (dequeue(out)) {
        return true;
      }
      if (drained()) {
        return false;
      }
      ASYNC_PERTURB();
      if (!detail::park(&wake_epoch_.value, epoch, deadline)) {
        return dequeue(out); // timed out: one last look
      }
    }
  }

  // Closed, and every ticket handed out before the close has been taken by a consumer.
  bool drained() const noexcept {
    // (W2) seq_cst: pairs with (C1)/(C2).
    if ((tail_.value.load(std::memory_order_seq_cst) & closed_bit) == 0) {
      return false;
    }
    const std::uint64_t at = closed_at_.load(std::memory_order_seq_cst);
    return at != no_close && head_.value.load(std::memory_order_seq_cst) >= at;
  }

  void notify() noexcept {
    // seq_cst: after the publish (P1); pairs with (W1).
    if (ASYNC_UNLIKELY(waiters_.value.load(std::memory_order_seq_cst) != 0)) {
      wake_all();
    }
  }

  void wake_all() noexcept {
    wake_epoch_.value.fetch_add(1, std::memory_order_seq_cst);
    detail::unpark_all(&wake_epoch_.value);
  }

  static constexpr std::uint64_t no_close = ~std::uint64_t(0);

  template <typename V>
  using separated = detail::padded<std::atomic<V>, line_size>;

  // ---- data -----------------------------------------------------------------------------------
  // The nodes. Blocks are added by whichever thread first needs them (lock-free).
  storage_type storage_;
  // Written by consumers (fetch_add): the next ticket to consume.
  separated<std::uint64_t> head_;
  // Written by producers (fetch_add) and once by close() (the closed bit): the next ticket.
  separated<std::uint64_t> tail_;
  // Written by producers that reach a new segment: where producers start looking.
  separated<word> enq_hint_;
  // Written by consumers that reach a new segment: where consumers start looking.
  separated<word> deq_hint_;
  // Written by the thread that recycles the oldest segment: the oldest live segment.
  separated<word> anchor_;
  // Written by recyclers (push) and appenders (pop): the free list of nodes.
  separated<word> free_top_;
  // Written by parking consumers: how many are registered, and the word they park on.
  separated<std::uint32_t> waiters_;
  separated<std::uint64_t> wake_epoch_;
  // Written once by close(): the number of tickets handed out before it.
  std::atomic<std::uint64_t> closed_at_{no_close};
};

} // namespace async

#endif // ASYNC_QUEUE_H
