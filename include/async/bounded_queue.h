// SPDX-License-Identifier: BSL-1.0
#ifndef ASYNC_BOUNDED_QUEUE_H
#define ASYNC_BOUNDED_QUEUE_H

#include "detail/config.h"

#include "detail/asymmetric_fence.h"
#include "detail/backoff.h"
#include "detail/bounded/ring_layout.h"
#include "detail/bounded/turn.h"
#include "detail/cache.h"
#include "detail/compat.h"
#include "detail/deadline.h"
#include "detail/element.h"
#include "detail/perturb.h"
#include "detail/relocate.h"
#include "detail/scope_exit.h"
#include "detail/ticket_counters.h"
#include "detail/traits.h"

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <new>
#include <stdexcept>
#include <thread>
#include <type_traits>
#include <utility>

namespace async {

/// Tuning knobs of bounded_queue. Derive from it (or write your own struct: every member is
/// optional, a missing one takes the default below) and pass it as the second template argument.
struct bounded_traits {
  /// What happens when T's constructor throws inside an enqueue call. Either way the ticket's
  /// slot is marked as a hole that consumers skip: nothing leaks, nothing is destroyed twice,
  /// and the queue stays usable. A hole occupies its slot until a consumer passes it.
  ///   true:  the exception is caught and the call returns false.
  ///   false: the exception propagates to the caller of enqueue.
  static constexpr bool NOEXCEPT_CHECK = false;

  /// The false-sharing granule in bytes (a power of two, at least 8; the default is
  /// detail::cache_line_size, ASYNC_CACHE_LINE_SIZE). The head and tail counters are kept
  /// this far apart, and consecutive tickets are spread over different lines of this size
  /// (in blocks of 16 lines, so that a line comes back 16 tickets later; see SPREAD_TICKETS).
  static constexpr std::size_t CachelineSize = detail::cache_line_size;

  /// How many times a blocking call executes the pause instruction while it waits for its
  /// slot, before it parks in the kernel. One pause is ~5 ns on older x86 and ~40 ns on
  /// Skylake and later, so the default spins for roughly 2-10 us: long enough to hand over an
  /// element between two running threads without a syscall, short enough that a waiter on an
  /// idle queue costs almost no CPU. 0 parks at once.
  static constexpr unsigned SPIN_BUDGET = 256;

  /// Where consecutive tickets lie in the ring.
  ///   true:  on different cache lines (in blocks of 16 lines), so that threads holding
  ///          neighbouring tickets (several producers or consumers at once) never write the
  ///          same line.
  ///   false: side by side, as many slots to a line as fit (4 for an 8-byte element with
  ///          64-byte lines, 8 with 128): a producer and a consumer that follow each other
  ///          touch a new line every few tickets instead of every ticket, and several threads
  ///          per side write shared lines. For one producer with one consumer: 1.26x-1.42x
  ///          the try calls' throughput on the 2-core VM (docs/benchmarks.md, "Where we are
  ///          behind").
  static constexpr bool SPREAD_TICKETS = true;

  /// The ticket type, as the original library named it here. Tickets and turns are 64-bit
  /// whatever a traits struct says: one that names another type is a compile error.
  using sequence_type = std::uint64_t;
};

/// A bounded multi-producer multi-consumer FIFO queue: a ring of slots, each with a turn word,
/// in the style of Dave Dice's PTLQueue (ticket locks, one per slot).
///
/// A producer takes a ticket t (blocking calls with one fetch_add on the tail, try calls with a
/// CAS that only succeeds when the slot is free), waits for its slot's turn, constructs the
/// element in place and publishes it with one release. Blocking calls take their ticket at
/// once, even on a full (or, for a consumer, empty) ring, until a ticket holder of their side
/// has had to wait past its spin: then the side counts as crowded for the next 2^16 tickets,
/// and a blocking call that finds the ring full (empty) waits without a ticket and then claims
/// one with a CAS, so that no thread queues up behind a boundary it cannot pass: where threads
/// outnumber cores, tickets held across a full ring make every hand-off wait for one
/// particular thread to be scheduled. The consumer holding the same ticket on
/// the head side waits for that publication, moves the element out and hands the slot to the
/// producer of ticket t + capacity. Waiting is polite: a short spin with the pause instruction,
/// then the thread parks (futex on Linux). A publication pays for a wake-up syscall only when a
/// thread is parked on that very slot.
///
/// @tparam T       the element type: nothrow-destructible and constructible from the arguments
///                 given to enqueue; move-only and throwing constructors are fine.
/// @tparam Traits  bounded_traits or a struct with the same members (all optional).
///
/// Guarantees:
///   - FIFO in ticket order: elements are dequeued in the order their producers took tickets,
///     so one producer's elements come out in the order it enqueued them.
///   - Every enqueued element is dequeued exactly once or destroyed by ~bounded_queue.
///   - Happens-before: everything a producer did before enqueueing an element happens before
///     everything the consumer that dequeues it does afterwards.
///   - Progress: try calls never wait for another thread's progress, but can report full (or
///     empty) while a thread that took the neighbouring ticket is between its two steps.
///     A blocking call that took a ticket waits for the thread holding the previous turn of
///     its slot.
///   - close() makes the queue refuse new elements while consumers drain the rest.
///
/// Memory: capacity x (8 + sizeof(T), rounded up to a multiple of 8 and of alignof(T)) bytes
/// for the ring, a slot being its 64-bit turn word and the element (16 bytes for a char, an
/// int or a pointer; a capacity that is not a multiple of 16 lines' worth of slots is padded
/// by less than that), plus 8 bytes per slot used only by close(), plus the object itself:
/// about 8 cache lines of counters and padding (960 bytes with 128-byte lines), so that
/// nothing next to it in memory shares a line with what its calls write or read.
///
/// When not to use: for an unbounded queue use async::queue; for one producer and one consumer
/// a single-producer single-consumer ring is cheaper (no fetch_add on shared counters).
///
/// Tickets and turns are 64-bit on every target. With a power-of-two capacity the counters
/// wrap around 2^64 correctly; with any other capacity each operation costs an integer
/// division and the counters must not wrap (2^64 operations: centuries at 10^9 per second).
///
/// Example:
/// @code
///   async::bounded_queue<std::string> q(1024);
///   std::thread producer([&] { q.blocking_enqueue("hello"); q.close(); });
///   std::string s;
///   while (q.blocking_dequeue(s)) { use(s); }   // returns false once closed and drained
///   producer.join();
/// @endcode
template <typename T, typename Traits = bounded_traits>
class bounded_queue : private detail::ticket_counters_for<Traits, bounded_traits> {
  static_assert(std::is_nothrow_destructible<T>::value,
                "bounded_queue<T>: T must be nothrow destructible, or a consumer could be left "
                "with a half-destroyed element and a slot that can never be reused.");
  static_assert(!std::is_reference<T>::value && !std::is_array<T>::value,
                "bounded_queue<T>: T must be an object type (not a reference or an array).");

  static constexpr bool noexcept_check = detail::knob_noexcept_check<Traits, bounded_traits>::value;
  static constexpr std::size_t line_size = detail::knob_cacheline<Traits, bounded_traits>::value;
  static constexpr unsigned spin_budget = detail::knob_spin_budget<Traits, bounded_traits>::value;
  static constexpr bool spread_tickets = detail::knob_spread_tickets<Traits, bounded_traits>::value;
  static_assert(line_size >= sizeof(std::uint64_t) && (line_size & (line_size - 1)) == 0,
                "bounded_queue: Traits::CachelineSize must be a power of two of at least 8.");
  static_assert(detail::sequence_type_ok<Traits>::value,
                "async::bounded_queue: the traits member sequence_type (the original library's "
                "ticket type) must be a 64-bit unsigned type, or be left out: tickets and turns "
                "are 64-bit here (see MIGRATION.md).");

  // The atomic type of the protocol words (std::atomic; a test seam, see detail/traits.h).
  template <typename V>
  using atom = typename detail::knob_atomic<Traits>::template type<V>;

  // The tickets, each on a line of its own (detail/ticket_counters.h).
  using counters = detail::ticket_counters_for<Traits, bounded_traits>;
  using counters::head_;
  using counters::tail_;

public:
  /// The element type T.
  using value_type = T;
  /// The traits struct the queue was made with.
  using traits_type = Traits;
  /// The type of capacities and counts.
  using size_type = std::size_t;
  /// The ticket type, as the original named it (a 64-bit unsigned type, see above).
  using seq_t = std::uint64_t;

  /// The false-sharing granule in bytes (Traits::CachelineSize), as the original named it.
  static constexpr std::size_t cacheline_size = line_size;

  /// Creates an empty queue holding at most `capacity` elements (any value >= 1; powers of two
  /// are fastest). The whole ring is allocated here: O(capacity). Not thread-safe
  /// (construction).
  /// @throws std::invalid_argument for a capacity of 0.
  /// @throws std::bad_alloc if memory runs out (or the capacity could not fit in memory at all,
  ///         such as SIZE_MAX).
  explicit bounded_queue(std::size_t capacity) : bounded_queue(capacity, detail::first_ticket{0}) {}

  /// Test seam, not part of the API: both counters start at `start.value`. Not thread-safe
  /// (construction).
  bounded_queue(std::size_t capacity, detail::first_ticket start)
      : counters(start.value), capacity_(checked_capacity(capacity)),
        layout_(capacity_, slots_per_line,
                spread_tickets ? std::size_t{detail::ring_layout::max_spread} : std::size_t{1}),
        ring_slots_(layout_.slot_count()), pow2_((capacity_ & (capacity_ - 1)) == 0),
        mask_(capacity_ - 1),
        sleepers_seen_(detail::fences_of<atom<std::uint64_t>>::type::available() ? &sleepers_
                                                                                 : nullptr) {
    ring_ =
        static_cast<slot*>(detail::aligned_allocate(ring_slots_ * sizeof(slot), ring_alignment));
    try {
      abandoned_ = static_cast<atom<std::uint64_t>*>(
          detail::aligned_allocate(capacity_ * sizeof(atom<std::uint64_t>), line_size));
    } catch (...) {
      detail::aligned_free(ring_); // no destructor runs for a constructor that throws
      throw;
    }
    for (std::size_t i = 0; i < ring_slots_; ++i) {
      ::new (static_cast<void*>(ring_ + i)) slot();
    }
    for (std::size_t i = 0; i < capacity_; ++i) {
      ::new (static_cast<void*>(abandoned_ + i)) atom<std::uint64_t>(0);
    }
    for (std::size_t k = 0; k < capacity_; ++k) {
      const std::uint64_t t = start.value + k;
      slot_of(t).state.store(turn::of(t, turn::free), std::memory_order_relaxed);
    }
  }

  bounded_queue(const bounded_queue&) = delete;
  bounded_queue& operator=(const bounded_queue&) = delete;
  bounded_queue(bounded_queue&&) = delete;
  bounded_queue& operator=(bounded_queue&&) = delete;

  /// Destroys the elements still inside, exactly once each, and frees the ring. O(capacity).
  /// Not thread-safe: no other thread may use the queue any more.
  ~bounded_queue() {
    for (std::size_t i = 0; i < capacity_; ++i) {
      slot& s = ring_[physical_index(i)];
      // relaxed: every call has returned, and what ended them (the owner's join, say) happens
      // before the destructor.
      if (turn::state(s.state.load(std::memory_order_relaxed)) == turn::full) {
        s.element.destroy();
      }
    }
    // The words' own lives end too (nothing for std::atomic; a test's atomic type counts them).
    for (std::size_t i = 0; i < ring_slots_; ++i) {
      ring_[i].~slot();
    }
    for (std::size_t i = 0; i < capacity_; ++i) {
      using word = atom<std::uint64_t>;
      abandoned_[i].~word();
    }
    detail::aligned_free(ring_);
    detail::aligned_free(abandoned_);
  }

  // ---- producers ------------------------------------------------------------------------------

  /// Constructs an element from `args` if there is room now. Never waits. O(1). Thread-safe
  /// (lock-free).
  /// @return true when the element went in; false when the queue is full or closed (nothing is
  ///         constructed, and the arguments are not moved from), or, with NOEXCEPT_CHECK, when
  ///         T's constructor threw. "Full" includes a slot whose consumer has taken its ticket
  ///         but not yet moved the element out (see the class comment).
  /// @throws anything T's constructor throws, without NOEXCEPT_CHECK: its slot becomes a hole
  ///         that consumers skip.
  template <typename... Args>
  ASYNC_NODISCARD bool enqueue(Args&&... args) {
    // The common case inline, in the steps of the plain per-slot sequence ring: the tail's slot
    // is free for the tail's ticket and the CAS takes it (weak: a spurious failure goes on to
    // the loop). Anything else (full, another producer first) goes to the loop, out of line.
    // The close is looked at before the CAS too, as in the loop: a try call that comes after
    // another has seen the queue closing (or after is_closed()) must not take a ticket that
    // close() has yet to place after the last one, and succeed. (BE0) acquire: pairs with the
    // close's (BC0), so that close() happens before a refusal (see close()), as in
    // claim_for_producer; the refusal itself needs only coherence (no later look of this
    // thread sees an older state).
    if (ASYNC_UNLIKELY(close_state_.load(std::memory_order_acquire) != open)) {
      return false;
    }
    std::uint64_t t = tail_.value.load(std::memory_order_relaxed);
    slot& s = slot_of(t);
    // (BE1) acquire, as in claim_for_producer.
    if (ASYNC_LIKELY(s.state.load(std::memory_order_acquire) == turn::of(t, turn::free))) {
      ASYNC_PERTURB();
      if (ASYNC_LIKELY(tail_.value.compare_exchange_weak(t, t + 1, std::memory_order_acquire,
                                                         std::memory_order_relaxed))) {
        if (ASYNC_UNLIKELY(producer_claimed(t, s) != claim::claimed)) {
          return false;
        }
        return construct_and_publish(s, t, std::forward<Args>(args)...);
      }
    }
    return enqueue_contended(std::forward<Args>(args)...);
  }

  /// Constructs an element from `args`, waiting politely while the queue is full. O(1) besides
  /// the wait. Thread-safe (may block).
  /// @return true when the element went in; false when the queue is (or gets) closed before
  ///         there is room, in which case nothing was constructed and the arguments were not
  ///         moved from. With NOEXCEPT_CHECK, false also reports that T's constructor threw.
  /// @throws anything T's constructor throws, without NOEXCEPT_CHECK: its slot becomes a hole
  ///         that consumers skip.
  template <typename... Args>
  bool blocking_enqueue(Args&&... args) {
    // The common case inline: no crowding, the queue open, and the ticket's slot already free.
    // Anything else goes out of line (blocking_enqueue_crowded, enqueue_on_ticket).
    // The close is looked at before the ticket is taken, as in the try calls: a call that comes
    // after another has seen the queue closing (or after is_closed()) must not take a ticket
    // that close() has yet to place after the last one, and succeed. The look after the ticket
    // (below) is the one that decides for a ticket taken while close() runs. acquire: as (BE0)
    // in enqueue.
    if (ASYNC_UNLIKELY(close_state_.load(std::memory_order_acquire) != open)) {
      return false;
    }
    const std::uint64_t crowded_at = producers_crowded_.load(std::memory_order_relaxed);
    if (ASYNC_UNLIKELY(crowded_at != 0)) {
      return blocking_enqueue_crowded(crowded_at, std::forward<Args>(args)...);
    }
    // (BP1) acquire: pairs with (BC1) in close(), so that a ticket taken after close() sees it.
    const std::uint64_t t = tail_.value.fetch_add(1, std::memory_order_acquire);
    // relaxed: (BP1) has made `closing` visible if this ticket came after the close's last
    // one, and ticket_after_close() acquires the close's end itself.
    if (ASYNC_LIKELY(close_state_.load(std::memory_order_relaxed) == open)) {
      ASYNC_PERTURB(); // ticket taken, its turn not yet awaited
      slot& s = slot_of(t);
      if (ASYNC_LIKELY(turn::own(s.state, turn::of(t, turn::free)))) {
        return construct_and_publish(s, t, std::forward<Args>(args)...);
      }
    }
    return enqueue_on_ticket(t, 0, std::forward<Args>(args)...);
  }

  /// Enqueues `value` (constructing T from it), waiting up to `timeout` for room. Any duration
  /// works: duration::max() (of any unit) waits for as long as it takes, without overflowing.
  /// The deadline is looked at when the call would park, after its spin (SPIN_BUDGET pauses and
  /// a few yields): a zero or negative timeout spins that long, then gives up without parking.
  /// Thread-safe (may block).
  /// @return true when the element went in; false on timeout or when the queue is closed
  ///         (`value` is then untouched), or, with NOEXCEPT_CHECK, when T's constructor threw.
  /// @throws anything T's constructor throws, without NOEXCEPT_CHECK, as enqueue.
  template <typename U, typename Rep, typename Period>
  ASYNC_NODISCARD bool enqueue_for(U&& value, const std::chrono::duration<Rep, Period>& timeout) {
    const auto deadline = detail::deadline_after(timeout);
    return enqueue_when_room(&deadline, std::forward<U>(value));
  }

  // ---- consumers ------------------------------------------------------------------------------

  /// Moves the oldest element into `out` (by assignment) if there is one now. Never waits.
  /// O(1), plus the holes it passes (slots left by throwing constructors). Thread-safe
  /// (lock-free).
  /// @return true when an element was moved into `out`; false when the queue is empty (or
  ///         closed and drained), and then `out` is not written. "Empty" includes an element
  ///         whose producer has taken its ticket but not yet published it (see the class
  ///         comment).
  /// @throws anything the assignment to `out` throws: the element is destroyed, its slot is
  ///         freed, and the queue stays usable.
  template <typename U>
  ASYNC_NODISCARD bool dequeue(U& out) {
    // The common case inline, as in enqueue: the head's element is published and the CAS takes
    // it. Anything else (empty, another consumer first, a hole, a close) goes out of line.
    std::uint64_t h = head_.value.load(std::memory_order_relaxed);
    slot& s = slot_of(h);
    // (BD2) acquire, as in claim_for_consumer.
    if (ASYNC_LIKELY(s.state.load(std::memory_order_acquire) == turn::of(h, turn::full))) {
      ASYNC_PERTURB();
      if (ASYNC_LIKELY(head_.value.compare_exchange_weak(h, h + 1, std::memory_order_relaxed,
                                                         std::memory_order_relaxed))) {
        take(s, h, out);
        return true;
      }
    }
    return dequeue_contended(out);
  }

  /// Moves the oldest element into `out`, waiting politely while the queue is empty. O(1)
  /// besides the wait. Thread-safe (may block).
  /// @return true when an element was moved into `out`; false only when the queue is closed and
  ///         every element enqueued before close() has been taken (`out` is then not written).
  /// @throws anything the assignment to `out` throws, as dequeue.
  template <typename U>
  bool blocking_dequeue(U& out) {
    // The common case inline, as in blocking_enqueue: no crowding and the ticket's element
    // already published. Anything else goes out of line.
    const std::uint64_t crowded_at = consumers_crowded_.load(std::memory_order_relaxed);
    if (ASYNC_UNLIKELY(crowded_at != 0)) {
      return blocking_dequeue_crowded(crowded_at, out);
    }
    // (BD1) relaxed: the ticket only names a slot; the element is acquired through its turn.
    const std::uint64_t h = head_.value.fetch_add(1, std::memory_order_relaxed);
    slot& s = slot_of(h);
    if (ASYNC_LIKELY(turn::own(s.state, turn::of(h, turn::full)))) {
      take(s, h, out);
      return true;
    }
    return dequeue_on_ticket(h, 0, out);
  }

  /// Moves the oldest element into `out`, waiting up to `timeout` for one. Timeouts as in
  /// enqueue_for. Thread-safe (may block).
  /// @return true when an element was moved into `out`; false on timeout, or when the queue is
  ///         closed and drained (`out` is then not written).
  /// @throws anything the assignment to `out` throws, as dequeue.
  template <typename U, typename Rep, typename Period>
  ASYNC_NODISCARD bool dequeue_for(U& out, const std::chrono::duration<Rep, Period>& timeout) {
    const auto deadline = detail::deadline_after(timeout);
    return dequeue_when_ready(&deadline, out);
  }

  // ---- closing --------------------------------------------------------------------------------

  /// Closes the queue: every enqueue call that has not yet found room, blocked or future,
  /// returns false without consuming its arguments; consumers keep receiving the elements that
  /// went in before, then their blocking and timed calls return false. Idempotent; there is no
  /// reopening. O(capacity): it wakes every parked thread, looking at each slot. Thread-safe
  /// (may block): a close() that races another waits for that one's few steps (it returns
  /// once the queue is closed), so it is not lock-free. What the thread that closes the queue
  /// (the first close()) did before it happens before every call that returns false because
  /// of it, and before an is_closed() that returns true (a flag set before close() needs no
  /// fence of its own). A close() that finds the queue closing or closed orders nothing of its
  /// own caller's: only one closer can publish its writes this way.
  void close() noexcept {
    std::uint32_t expected = open;
    // (BC0) release: what the caller did before close() happens before every call that sees
    // the queue closing (the (BE0) looks). No total order is needed: a producer whose ticket
    // comes after (BC1) sees `closing` through (BP1); the waiters' handshake is with (BC2).
    // A close() that loses waits for the winner's end (acquire in wait_until_closed).
    if (!close_state_.compare_exchange_strong(expected, closing, std::memory_order_release,
                                              std::memory_order_relaxed)) {
      wait_until_closed();
      return;
    }
    // (BC1) release: the last value of the tail that producers may use. A producer whose
    // fetch_add comes later in the tail's modification order acquires this (BP1) and sees
    // `closing`, so it compares its ticket with final_ticket_ and gives up.
    // Between `closing` and `closed` only these two steps, whatever the capacity: a producer
    // that must know where the close fell waits for them (blocking calls), or refuses its
    // ticket without waiting (try and timed calls, claim_for_producer).
    // release only: the producers' operations on the tail release nothing that this needs.
    const std::uint64_t last = tail_.value.fetch_add(0, std::memory_order_release);
    final_ticket_.store(last, std::memory_order_relaxed);
    // (BC2) seq_cst: publishes final_ticket_ (pairs with the acquire loads in
    // wait_until_closed and size_approx), and orders this store before the sleeper-bit reads
    // below (pairs with (TW4): a waiter either sees `closed` or is woken here).
    close_state_.store(closed, std::memory_order_seq_cst);
    ASYNC_PERTURB(); // closed, nobody woken yet
    for (std::size_t i = 0; i < capacity_; ++i) {
      turn::wake(ring_[physical_index(i)].state);
    }
  }

  /// True once close() has been called (and then close() happens before the return). Thread-safe
  /// (lock-free).
  bool is_closed() const noexcept {
    // acquire: pairs with (BC0).
    return close_state_.load(std::memory_order_acquire) != open;
  }

  // ---- observers ------------------------------------------------------------------------------

  /// The capacity given to the constructor. Thread-safe (lock-free).
  std::size_t capacity() const noexcept { return capacity_; }

  /// The capacity, as in the original library (drop-in compatibility): not the element count.
  /// Use size_approx() for that. Thread-safe (lock-free).
  std::size_t size() const noexcept { return capacity_; }

  /// The number of elements inside, or about to be (tickets taken on the producer side minus
  /// those on the consumer side, clamped to [0, capacity]). Tickets that hold no element do
  /// not count: holes left by throwing constructors, tickets producers gave up at close(), and
  /// after close() the tickets from its last one on. Exact when no call is in progress (but
  /// for a try or timed enqueue that took its ticket while close() ran and refused it: that
  /// ticket counts until a consumer passes it). O(1). Thread-safe (lock-free).
  std::size_t size_approx() const noexcept {
    const std::uint64_t h = head_.value.load(std::memory_order_relaxed);
    std::uint64_t t = tail_.value.load(std::memory_order_relaxed);
    // A blocking_enqueue takes its ticket before it looks at the close, and consumers stop at
    // final_ticket_: without this the refused tickets would count for good.
    // acquire: pairs with (BC2), so final_ticket_ is the close's.
    if (ASYNC_UNLIKELY(close_state_.load(std::memory_order_acquire) == closed)) {
      const std::uint64_t last = final_ticket_.load(std::memory_order_relaxed);
      if (static_cast<std::int64_t>(t - last) > 0) {
        t = last;
      }
    }
    // relaxed: a count, exact once the calls that changed it have returned to whoever asks.
    const auto d = static_cast<std::int64_t>(t - h - unfilled_.load(std::memory_order_relaxed));
    if (d <= 0) {
      return 0;
    }
    return static_cast<std::uint64_t>(d) >= capacity_ ? capacity_ : static_cast<std::size_t>(d);
  }

private:
  static constexpr std::uint32_t open = 0;
  static constexpr std::uint32_t closing = 1;
  static constexpr std::uint32_t closed = 2;

  // A slot's state word is its turn: detail::turn owns its encoding and its hand-over.
  using slot = detail::slot<T, std::uint64_t, atom>;
  using turn = detail::turn;
  using waited = turn::waited;

  static constexpr std::size_t ring_alignment = alignof(slot) > line_size ? alignof(slot)
                                                                          : line_size;

  enum class claim { claimed, unavailable, closed };

  static std::size_t checked_capacity(std::size_t capacity) {
    if (capacity == 0) {
      throw std::invalid_argument("async::bounded_queue: capacity must be at least 1");
    }
    // Beyond this the sizes below would wrap around (the ring has up to a block more slots
    // than the capacity): no memory holds such a queue.
    constexpr std::size_t largest_entry =
        sizeof(slot) > sizeof(atom<std::uint64_t>) ? sizeof(slot) : sizeof(atom<std::uint64_t>);
    if (capacity > (std::numeric_limits<std::size_t>::max)() / 2 / largest_entry) {
      throw std::bad_alloc();
    }
    return capacity;
  }

  // Slots per cache line (a power of two): detail::ring_layout sends consecutive tickets to
  // different lines, in blocks of a few lines (see there).
  static constexpr std::size_t slots_per_line = detail::slots_per_line(sizeof(slot), line_size);

  std::size_t physical_index(std::size_t i) const noexcept { return layout_.physical(i); }

  std::size_t logical_index(std::uint64_t ticket) const noexcept {
    return pow2_ ? static_cast<std::size_t>(ticket & mask_)
                 : static_cast<std::size_t>(ticket % capacity_);
  }

  slot& slot_of(std::uint64_t ticket) const noexcept {
    const std::size_t k = logical_index(ticket);
    return ring_[spread_tickets ? layout_.physical(k) : k];
  }

  // True when the slot of the next ticket on `side` (the tail or the head) has not yet reached
  // `state` for that ticket: the queue looks full (tail_, turn::free) or empty (head_,
  // turn::full). A hint only (relaxed loads): it picks how a blocking call waits, never what it
  // does.
  bool looks_behind(const atom<std::uint64_t>& side, std::uint64_t state) const noexcept {
    const std::uint64_t t = side.load(std::memory_order_relaxed);
    return turn::before(slot_of(t).state.load(std::memory_order_relaxed), turn::of(t, state));
  }

  // Crowding, for the blocking calls of one side: a ticket taken where the ring is full (or
  // empty) can only be served by the thread holding the previous turn of its slot, and where
  // threads outnumber cores that thread is often not running. So once a ticket holder has
  // waited past its spin (it yields or parks), the side is marked crowded: its blocking calls
  // then look at the ring before taking a ticket and wait for room without one (a CAS claim,
  // as the timed calls always do). Otherwise they take the ticket at once: the look reads the
  // counter line that the other callers keep writing, which costs a second transfer of that
  // line per call where all of them run. The mark is 1 + the ticket's number (0: not crowded),
  // forgotten crowding_memory tickets later. A hint only (relaxed): it picks how a blocking
  // call waits, never what it does.
  static constexpr std::uint64_t crowding_memory = std::uint64_t(1) << 16;

  // The holder of ticket t waits for its turn, as await() does, then marks its side (`mark`)
  // crowded if it waited past its spin.
  template <typename Ready, typename Interrupted>
  waited await_turn(atom<std::uint64_t>& mark, std::uint64_t t, atom<std::uint64_t>& word,
                    Ready ready, Interrupted interrupted) {
    detail::backoff active(spin_budget);
    const waited w = turn::await(word, sleepers_seen_, ready, interrupted, nullptr, active);
    if (ASYNC_UNLIKELY(active.spun_out()) && mark.load(std::memory_order_relaxed) == 0) {
      mark.store(t + 1 == 0 ? 1 : t + 1, std::memory_order_relaxed);
    }
    return w;
  }

  static void forget_crowding(atom<std::uint64_t>& mark, std::uint64_t at,
                              std::uint64_t t) noexcept {
    if (ASYNC_UNLIKELY(at != 0) &&
        static_cast<std::int64_t>(t - at) > static_cast<std::int64_t>(crowding_memory)) {
      mark.compare_exchange_strong(at, 0, std::memory_order_relaxed);
    }
  }

  // The try-and-wait loop of the timed calls, and of the blocking ones while their side is
  // crowded: claims a slot with compare-and-swap through claim_slot(ticket, slot, seen)
  // (claim_for_consumer or claim_for_producer), and while it reports the queue empty or full,
  // sleeps until the slot it names changes (its producer publishes, or its consumer frees
  // it), interrupted(ticket) holds, or *deadline (if not null) passes. No ticket is held while
  // waiting, so whichever thread runs when the slot changes takes it. use(slot, ticket) ends
  // the call once a slot is claimed. False when closed (and, for consumers, drained) or timed
  // out.
  template <typename Claim, typename Interrupted, typename Use>
  bool claim_when_ready(const detail::wait_clock::time_point* deadline, Claim claim_slot,
                        Interrupted interrupted, Use use) {
    for (;;) {
      std::uint64_t t = 0;
      slot* s = nullptr;
      std::uint64_t seen = 0;
      switch (claim_slot(t, s, seen)) {
      case claim::claimed:
        return use(*s, t);
      case claim::closed:
        return false;
      case claim::unavailable:
        break;
      }
      const waited w = await(
          s->state, [seen](std::uint64_t v) { return turn::value(v) != seen; },
          [&interrupted, t] { return interrupted(t); }, deadline);
      if (w == waited::timed_out) {
        return false;
      }
    }
  }

  // Takes the head element once it is published, sleeping while the queue is empty.
  template <typename U>
  bool dequeue_when_ready(const detail::wait_clock::time_point* deadline, U& out) {
    return claim_when_ready(
        deadline,
        [this](std::uint64_t& h, slot*& s, std::uint64_t& seen) {
          return claim_for_consumer(h, s, seen);
        },
        [this](std::uint64_t h) { return consumer_ticket_is_dead(h); },
        [this, &out](slot& s, std::uint64_t h) {
          take(s, h, out);
          return true;
        });
  }

  // Claims a free slot and constructs the element there, sleeping while the queue is full.
  // False also when (NOEXCEPT_CHECK) T's constructor threw.
  template <typename... Args>
  bool enqueue_when_room(const detail::wait_clock::time_point* deadline, Args&&... args) {
    return claim_when_ready(
        deadline,
        [this](std::uint64_t& t, slot*& s, std::uint64_t& seen) {
          return claim_for_producer(t, s, seen);
        },
        [this](std::uint64_t) { return close_state_.load(std::memory_order_seq_cst) != open; },
        [&](slot& s, std::uint64_t t) {
          return construct_and_publish(s, t, std::forward<Args>(args)...);
        });
  }

  // blocking_enqueue() while producers are crowded (see await_turn): a full queue is waited
  // on without a ticket. A producer holding one can only go when its own slot frees, so where
  // threads outnumber cores, tickets queued behind a full ring make every hand-off wait for
  // one particular thread to be scheduled (the funnel benchmark shows it; docs/benchmarks.md,
  // "Blocking calls take their ticket at once"); a side that is not crowded takes its ticket
  // at once, without a look at the tail (blocking_enqueue). Out of line, as the rest of the
  // blocking calls past their common case.
  template <typename... Args>
  ASYNC_NOINLINE bool blocking_enqueue_crowded(std::uint64_t crowded_at, Args&&... args) {
    if (looks_behind(tail_.value, turn::free)) { // full
      return enqueue_when_room(nullptr, std::forward<Args>(args)...);
    }
    // (BP1), as in blocking_enqueue.
    const std::uint64_t t = tail_.value.fetch_add(1, std::memory_order_acquire);
    return enqueue_on_ticket(t, crowded_at, std::forward<Args>(args)...);
  }

  // A blocking producer holds ticket t (taken at fetch_add, when its side was marked crowded
  // at crowded_at, 0 for not): refused if taken after close(), else it waits for its slot to
  // free, and gives the ticket up if the queue closes first.
  template <typename... Args>
  ASYNC_NOINLINE bool enqueue_on_ticket(std::uint64_t t, std::uint64_t crowded_at, Args&&... args) {
    // relaxed: as the look after the ticket in blocking_enqueue.
    if (ASYNC_UNLIKELY(close_state_.load(std::memory_order_relaxed) != open) &&
        ticket_after_close(t)) {
      return false;
    }
    ASYNC_PERTURB(); // ticket taken, its turn not yet awaited
    forget_crowding(producers_crowded_, crowded_at, t);
    slot& s = slot_of(t);
    const std::uint64_t wanted = turn::of(t, turn::free);
    if (!turn::own(s.state, wanted)) {
      const waited w = await_turn(
          producers_crowded_, t, s.state,
          [wanted](std::uint64_t v) { return turn::value(v) == wanted; },
          [this] { return close_state_.load(std::memory_order_seq_cst) != open; });
      if (w != waited::ready) {
        abandon(t, s);
        return false;
      }
    }
    return construct_and_publish(s, t, std::forward<Args>(args)...);
  }

  // blocking_dequeue() while consumers are crowded: an empty queue is waited on without a
  // ticket, as a full one in blocking_enqueue_crowded.
  template <typename U>
  ASYNC_NOINLINE bool blocking_dequeue_crowded(std::uint64_t crowded_at, U& out) {
    if (looks_behind(head_.value, turn::full)) { // empty
      return dequeue_when_ready(nullptr, out);
    }
    // (BD1), as in blocking_dequeue.
    const std::uint64_t h = head_.value.fetch_add(1, std::memory_order_relaxed);
    return dequeue_on_ticket(h, crowded_at, out);
  }

  // A blocking consumer holds ticket h: it waits for the element of h, skips it if it turns
  // out a hole or a ticket given up at close() (and takes the next ticket), and returns false
  // once its ticket lies past the close.
  template <typename U>
  ASYNC_NOINLINE bool dequeue_on_ticket(std::uint64_t h, std::uint64_t crowded_at, U& out) {
    for (;;) {
      forget_crowding(consumers_crowded_, crowded_at, h);
      slot& s = slot_of(h);
      const std::uint64_t full = turn::of(h, turn::full);
      std::uint64_t v = full;
      if (!turn::own(s.state, full)) {
        const waited w = await_turn(
            consumers_crowded_, h, s.state,
            [h](std::uint64_t x) { return turn::settled(x, h); }, // full, a hole or refused
            [this, h] { return consumer_ticket_is_dead(h); });
        if (w != waited::ready) {
          if (ticket_after_close(h)) {
            return false; // closed, and nothing was enqueued at or after this ticket
          }
          passed_unfilled();
          // the producer of h gave up when the queue closed: skip its ticket
          h = head_.value.fetch_add(1, std::memory_order_relaxed); // (BD1)
          continue;
        }
        // relaxed: await() acquired this publish (TW3) when it found the word settled, and the
        // word holds it until this consumer hands the slot on (a wake() only clears the bit).
        v = turn::value(s.state.load(std::memory_order_relaxed));
      }
      if (ASYNC_LIKELY(v == full)) {
        take(s, h, out);
        return true;
      }
      skip_unfilled(s, h, v); // a hole left by a throwing constructor, or a refusal
      h = head_.value.fetch_add(1, std::memory_order_relaxed); // (BD1)
    }
  }

  // enqueue() past its inline case: the claim loop. Out of line, so that the inline case stays
  // small where it is called.
  template <typename... Args>
  ASYNC_NOINLINE bool enqueue_contended(Args&&... args) {
    std::uint64_t t = 0;
    slot* s = nullptr;
    std::uint64_t seen = 0;
    if (claim_for_producer(t, s, seen) != claim::claimed) {
      return false;
    }
    return construct_and_publish(*s, t, std::forward<Args>(args)...);
  }

  // dequeue() past its inline case, as enqueue_contended.
  template <typename U>
  ASYNC_NOINLINE bool dequeue_contended(U& out) {
    std::uint64_t h = 0;
    slot* s = nullptr;
    std::uint64_t seen = 0;
    if (claim_for_consumer(h, s, seen) != claim::claimed) {
      return false;
    }
    take(*s, h, out);
    return true;
  }

  // A try or timed producer has just taken ticket t with its CAS: claimed, unless close() got
  // there first.
  claim producer_claimed(std::uint64_t t, slot& s) {
    // acquire: a refusal here must come after close()'s (BC0), as (BE0) (see close()). (That a
    // ticket taken after the close's last one sees `closing` is the CAS's acquire, (BP1).)
    const std::uint32_t state = close_state_.load(std::memory_order_acquire);
    if (ASYNC_LIKELY(state == open)) {
      return claim::claimed;
    }
    return claimed_while_closed(t, s, state);
  }

  // producer_claimed() where close() has begun. Out of line: rare.
  ASYNC_NOINLINE claim claimed_while_closed(std::uint64_t t, slot& s, std::uint32_t state) {
    if (state == closing) {
      // close() is under way in another thread, and whether t came before its last ticket is
      // not known yet. A try call does not wait for the closer: the ticket is refused
      // (turn::refused), which its consumer skips as a hole if t came before the close.
      ASYNC_PERTURB(); // ticket taken while closing, its refusal not yet published
      turn::publish(s.state, turn::of(t, turn::refused), sleepers_seen_);
      return claim::closed;
    }
    return ticket_after_close(t) ? claim::closed : claim::claimed;
  }

  // Takes the tail ticket with a CAS if its slot is free. Reports unavailable (full) with the
  // slot and turn value to wait on, or closed.
  claim claim_for_producer(std::uint64_t& t, slot*& s, std::uint64_t& seen) {
    // (BE0) acquire, as in enqueue.
    if (ASYNC_UNLIKELY(close_state_.load(std::memory_order_acquire) != open)) {
      return claim::closed;
    }
    t = tail_.value.load(std::memory_order_relaxed);
    for (;;) {
      s = &slot_of(t);
      // (BE1) acquire: pairs with the consumer's publish in release_slot() (TW2): the previous
      // element has been moved out and destroyed before we construct over it.
      seen = turn::value(s->state.load(std::memory_order_acquire));
      const auto d = static_cast<std::int64_t>(seen - turn::of(t, turn::free));
      if (d == 0) {
        ASYNC_PERTURB();
        // acquire on success: as (BP1), a ticket taken after close() must see it.
        if (tail_.value.compare_exchange_weak(t, t + 1, std::memory_order_acquire,
                                              std::memory_order_relaxed)) {
          return producer_claimed(t, *s);
        }
      } else if (d < 0) {
        return claim::unavailable; // the slot still holds the previous lap: full
      } else {
        t = tail_.value.load(std::memory_order_relaxed); // another producer took t
      }
    }
  }

  // Takes the head ticket with a CAS if its element is published, skipping holes and the
  // tickets of producers that gave up at close(). Reports unavailable (empty) with the slot and
  // turn value to wait on, or closed (closed and drained).
  claim claim_for_consumer(std::uint64_t& h, slot*& s, std::uint64_t& seen) {
    h = head_.value.load(std::memory_order_relaxed);
    for (;;) {
      s = &slot_of(h);
      // (BD2) acquire: pairs with the producer's publish (TW2).
      seen = turn::value(s->state.load(std::memory_order_acquire));
      const std::uint64_t full = turn::of(h, turn::full);
      if (seen == full || seen == turn::of(h, turn::hole) || seen == turn::of(h, turn::refused)) {
        ASYNC_PERTURB();
        if (head_.value.compare_exchange_weak(h, h + 1, std::memory_order_relaxed,
                                              std::memory_order_relaxed)) {
          if (seen == full) {
            return claim::claimed;
          }
          skip_unfilled(*s, h, seen);
          ++h;
        }
        continue;
      }
      if (static_cast<std::int64_t>(seen - full) < 0) {
        // Not published yet. After close() the ticket may be dead: past the last producer
        // ticket (then the queue is drained) or given up by its producer (then skip it).
        // relaxed: consumer_ticket_is_dead() looks again, seq_cst, before it reads anything.
        if (ASYNC_UNLIKELY(close_state_.load(std::memory_order_relaxed) == closed) &&
            consumer_ticket_is_dead(h)) {
          if (ticket_after_close(h)) {
            return claim::closed;
          }
          if (head_.value.compare_exchange_weak(h, h + 1, std::memory_order_relaxed,
                                                std::memory_order_relaxed)) {
            passed_unfilled(); // a ticket its producer gave up
            ++h;
          }
          continue;
        }
        return claim::unavailable;
      }
      h = head_.value.load(std::memory_order_relaxed); // another consumer took h
    }
  }

  // Constructs the element of ticket t and publishes it; a throwing constructor publishes a
  // hole instead, which the consumer of t skips.
  template <typename... Args>
  bool construct_and_publish(slot& s, std::uint64_t t, Args&&... args) {
    if (!s.template emplace<noexcept_check>(
            [this, &s, t] {
              unfilled_.fetch_add(1, std::memory_order_relaxed); // before its consumer sees it
              turn::publish(s.state, turn::of(t, turn::hole), sleepers_seen_);
            },
            std::forward<Args>(args)...)) {
      return false;
    }
    ASYNC_PERTURB(); // constructed, not yet published
    turn::publish(s.state, turn::of(t, turn::full), sleepers_seen_);
    return true;
  }

  // A consumer passes a ticket that holds no element (a hole, or a ticket its producer gave up
  // at close()). Out of line: rare.
  ASYNC_NOINLINE void passed_unfilled() noexcept {
    unfilled_.fetch_sub(1, std::memory_order_relaxed);
  }

  // The consumer of ticket h passes its slot, whose turn word reads v: a hole (counted in
  // unfilled_) or a refusal (not counted). Out of line: rare.
  ASYNC_NOINLINE void skip_unfilled(slot& s, std::uint64_t h, std::uint64_t v) noexcept {
    if (v == turn::of(h, turn::hole)) {
      passed_unfilled();
    }
    release_slot(s, h);
  }

  // The element is gone: the slot belongs to the producer of h + capacity (its (BE1) or its
  // own() acquires this publish).
  void release_slot(slot& s, std::uint64_t h) noexcept {
    turn::publish(s.state, turn::of(h + capacity_, turn::free), sleepers_seen_);
  }

  // Moves the element of ticket h out; the slot is released even when the assignment throws.
  template <typename U>
  void take(slot& s, std::uint64_t h, U& out) {
    const auto done = detail::at_scope_exit([this, &s, h] {
      s.element.destroy();
      release_slot(s, h);
    });
    detail::assign_relocated(out, *s.element.get());
  }

  // Waits on a slot's turn word with the library's waiting policy (detail::backoff): spins for
  // SPIN_BUDGET pauses, yields briefly, then parks (SPIN_BUDGET == 0: parks at once).
  template <typename Ready, typename Interrupted>
  waited await(atom<std::uint64_t>& word, Ready ready, Interrupted interrupted,
               const detail::wait_clock::time_point* deadline) {
    detail::backoff active(spin_budget);
    return turn::await(word, sleepers_seen_, ready, interrupted, deadline, active);
  }

  void wait_until_closed() const noexcept {
    // close() is a short, non-blocking sequence in another thread: wait for its end.
    detail::spin_then_yield active;
    while (close_state_.load(std::memory_order_acquire) != closed) {
      active.wait();
    }
  }

  // True when `t` was taken after close() fixed the last ticket: nothing is or will be there.
  bool ticket_after_close(std::uint64_t t) const noexcept {
    wait_until_closed();
    const std::uint64_t last = final_ticket_.load(std::memory_order_relaxed);
    return static_cast<std::int64_t>(t - last) >= 0;
  }

  // Consumer side: no element will ever be published at ticket h. Only after close(): either h
  // is past the last producer ticket, or the producer of h (or of an earlier ticket of the same
  // slot, which stops the slot for good) gave up.
  bool consumer_ticket_is_dead(std::uint64_t h) const noexcept {
    if (close_state_.load(std::memory_order_seq_cst) != closed) {
      return false;
    }
    const std::uint64_t last = final_ticket_.load(std::memory_order_relaxed);
    if (static_cast<std::int64_t>(h - last) >= 0) {
      return true;
    }
    // The distance from the smallest abandoned ticket of h's slot to the last ticket (0: none).
    const std::uint64_t d = abandoned_[logical_index(h)].load(std::memory_order_seq_cst);
    return d != 0 && static_cast<std::int64_t>(h - (last - d)) >= 0;
  }

  // A producer holding ticket t (taken before close()) gives up: record it so that the
  // consumer of t skips it. Its slot then never advances (the consumer does not release a
  // skipped ticket), so every later producer ticket of this slot gives up too, and the record
  // keeps the smallest one.
  void abandon(std::uint64_t t, slot& s) noexcept {
    wait_until_closed();
    const std::uint64_t last = final_ticket_.load(std::memory_order_relaxed);
    // Recorded as the distance to the last ticket, at least 1 (t was taken before the close:
    // later tickets are refused, not abandoned), so that 0, the value from construction,
    // means "nobody gave up here" and close() has nothing to write per slot.
    const std::uint64_t d = last - t;
    unfilled_.fetch_add(1, std::memory_order_relaxed); // before its consumer can pass it
    atom<std::uint64_t>& from = abandoned_[logical_index(t)];
    std::uint64_t cur = from.load(std::memory_order_relaxed);
    // (BA1) seq_cst: ordered before the sleeper-bit read in turn::wake; pairs with (TW4).
    while (d > cur && !from.compare_exchange_weak(cur, d, std::memory_order_seq_cst,
                                                  std::memory_order_relaxed)) {
    }
    turn::wake(s.state);
  }

  // ---- data -----------------------------------------------------------------------------------
  // Written by the constructor only (read by every thread):
  std::size_t capacity_;
  detail::ring_layout layout_;
  std::size_t ring_slots_;
  bool pow2_;
  std::uint64_t mask_;
  slot* ring_ = nullptr;
  // The sleeper count below where hand-overs are plain stores, null where they are exchanges
  // (detail/bounded/turn.h; the kernel is asked when the queue is made).
  atom<std::uint64_t>* sleepers_seen_;
  // Per logical slot, written after close(): how far its smallest abandoned ticket lies before
  // the last ticket (0: none).
  atom<std::uint64_t>* abandoned_ = nullptr;
  // Written once by close(); read on the producers' path (a line that stays shared).
  atom<std::uint32_t> close_state_{open};
  atom<std::uint64_t> final_ticket_{0};
  // Written when a side gets crowded or stops being so (rarely); read by every blocking call.
  atom<std::uint64_t> producers_crowded_{0};
  atom<std::uint64_t> consumers_crowded_{0};
  // Written when a producer leaves a hole or gives its ticket up at close(), and when the
  // consumer of that ticket passes it (both rare): tickets before the last that hold no
  // element, which size_approx() does not count.
  atom<std::uint64_t> unfilled_{0};
  // Written by a waiter before it parks and after (rarely, at the cost of a syscall anyway);
  // read by every hand-over while hand-overs are plain stores: waiters about to park or
  // parked on any slot. On the line of the close state, which the blocking calls read too:
  // on a line of its own, a waiter's count took a second line from the publishers (blocking
  // calls, one producer and one consumer at capacity 65536: 0.59x on the 2-core VM).
  atom<std::uint64_t> sleepers_{0};
  // Nothing: padding that ends the queue, so that whatever the program keeps after the queue
  // in memory (a counter its threads write, say) shares no line with the words above, which
  // every call reads (a producer writing such a counter made one producer and one consumer
  // 2.3x slower). The counters' base pads the front.
  detail::padded<char, line_size> end_;
};

#if ASYNC_CPLUSPLUS < 17
// The definition that a use by reference (odr-use) needs before C++17's inline variables.
template <typename T, typename Traits>
constexpr std::size_t bounded_queue<T, Traits>::cacheline_size;
#endif

} // namespace async

#endif // ASYNC_BOUNDED_QUEUE_H
