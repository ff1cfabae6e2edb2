// SPDX-License-Identifier: BSL-1.0
#ifndef ASYNC_QUEUE_H
#define ASYNC_QUEUE_H

#include "detail/config.h"

#include "detail/backoff.h"
#include "detail/cache.h"
#include "detail/compat.h"
#include "detail/deadline.h"
#include "detail/element.h"
#include "detail/perturb.h"
#include "detail/relocate.h"
#include "detail/scope_exit.h"
#include "detail/traits.h"
#include "detail/unbounded/core.h"
#include "detail/unbounded/event_count.h"
#include "detail/unbounded/segment_list.h"
#include "detail/unbounded/slot_state.h"
#include "detail/unbounded/tagged_index.h"

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
  /// What happens when T's constructor throws inside enqueue or bulk_enqueue, or its move
  /// (an element whose slot a consumer skipped moves to a later one). Either way the slot that
  /// was reserved for the element is marked void or left (consumers skip it), nothing leaks,
  /// and the queue stays usable.
  ///   true:  the exception is caught; enqueue returns false, bulk_enqueue skips the element
  ///          and goes on with the next one (its return value counts the elements that went in).
  ///   false: the exception propagates to the caller (bulk_enqueue voids the slots it reserved
  ///          for the rest of the range; the elements before the throwing one are in).
  static constexpr bool NOEXCEPT_CHECK = false;

  /// The false-sharing granule in bytes (a power of two, at least 16). Consecutive tickets of a
  /// segment are spread over different lines of this size, and the shared counters are this far
  /// apart. The default is detail::cache_line_size (ASYNC_CACHE_LINE_SIZE).
  static constexpr std::size_t CachelineSize = detail::cache_line_size;

  /// Slots per node (a power of two from 2 to 2^20). A node carries a segment of this many
  /// consecutive tickets; one node is linked, and one recycled, per SEGMENT_SIZE elements. Larger:
  /// fewer segment changes; smaller: a smaller empty queue. Memory of a node: two cache lines plus
  /// SEGMENT_SIZE slots of about 1 + sizeof(T) bytes (slots share groups of up to 64 bytes,
  /// states first; where a group holds one slot, its state is padded to alignof(T)).
  static constexpr std::size_t SEGMENT_SIZE = 256;

  /// Where consecutive tickets of a segment lie.
  ///   true:  on different cache lines, so that threads holding neighbouring tickets (several
  ///          threads making single calls at once) never write the same line.
  ///   false: side by side, as many to a line as fit (7 elements of 8 bytes): a bulk call of n
  ///          elements touches about n / 7 lines instead of n, and a consumer behind its
  ///          producer reads whole lines; threads that make single calls at once then write
  ///          shared lines. For bulk calls, or one producer with one consumer
  ///          (docs/benchmarks.md, "Tickets side by side for bulk calls").
  static constexpr bool SPREAD_TICKETS = true;

  /// The top level of the node storage, which has three: a node index i lives in leaf block
  /// [i / (L2 * L3)][(i / L3) % L2] at position i % L3. The top level (L1 pointers) is part of
  /// the queue object, a middle block (L2 pointers) is allocated when the first of its nodes is,
  /// a leaf block holds L3 nodes. The queue holds at most L1 x L2 x L3 nodes (defaults: 2^21),
  /// each the slots of one segment of SEGMENT_SIZE tickets, and enqueue throws
  /// std::length_error once every node is in use, before it takes a ticket: the newest node's
  /// slots after the first are not counted on, nor those of the tail's node before the tail.
  /// So with N nodes and S = SEGMENT_SIZE, between (N - 2) x S + 2 and (N - 1) x S + 1 elements
  /// fit, by where the tail lies in its segment (defaults: about 2^29). Each level is at least
  /// 1; L1 x L2 x L3 must be at least 2 and below 2^INDEX_BITS - 1 (the all-ones index means
  /// "no node"). Raise them for a larger backlog (an empty queue holds the L1 pointers, one
  /// middle block and one leaf block).
  static constexpr std::size_t NODE_LEVEL1 = 512;
  /// The middle level of the node storage: pointers per middle block (see NODE_LEVEL1).
  static constexpr std::size_t NODE_LEVEL2 = 1024;
  /// The bottom level of the node storage: nodes per leaf block (see NODE_LEVEL1).
  static constexpr std::size_t NODE_LEVEL3 = 4;

  /// The bits of a link's node index. A link is one 64-bit word: a node index of INDEX_BITS bits
  /// and a tag of TAG_BITS bits (INDEX_BITS + TAG_BITS <= 64, each from 1 to 32). The tag of a link
  /// is the low bits of the segment number it names; the free list's tag counts its pushes and
  /// pops. A stale CAS on the free list could succeed only if a multiple of 2^TAG_BITS pushes and
  /// pops happened while one thread stalled between its read and its CAS; a stale "no next node"
  /// link could be mistaken only for one of a segment whose number differs by a multiple of
  /// 2^TAG_BITS (that many segments, SEGMENT_SIZE x 2^TAG_BITS elements, passing during one stall),
  /// and the appender re-checks the node's 64-bit id after its CAS anyway. Tests use small tags to
  /// exercise the wrap; keep 32 in production.
  static constexpr unsigned INDEX_BITS = 32;
  /// The bits of a link's ABA tag (see INDEX_BITS): keep 32 in production.
  static constexpr unsigned TAG_BITS = 32;

  /// How many pause instructions a consumer spends waiting for the producer that holds the
  /// same ticket to publish, before it marks the slot as skipped (the producer then moves its
  /// element to a later ticket), and how long blocking_dequeue spins before it parks.
  static constexpr unsigned SPIN_BUDGET = 256;
};

namespace detail {
// Declared only: a test defines a specialization of it to look inside a queue (the weak-memory
// tests check its segment list once their threads are done).
template <typename Tag>
struct inspect;
} // namespace detail

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
/// @tparam T       the element type: nothrow-destructible, move- or copy-constructible, and
///                 constructible from the arguments given to enqueue; move-only, copy-only (its
///                 move deleted: it is copied where others are moved) and throwing constructors
///                 are fine.
/// @tparam Traits  async::traits or a struct with some of the same members.
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
///     Consumers that race each other may take tickets past the tail (skipped, for producers
///     to pass); where the node storage has no room left for their segments, such a consumer
///     waits inside its call until producers come for those tickets, or until close(): a
///     ticket past the closed end is given up (reachable with a node storage of a few nodes
///     and consumers polling an empty queue, not with the default storage). A bulk_dequeue
///     that waits so holds the elements it has already taken until it returns.
///   - close() makes every later enqueue return false; consumers drain what went in before.
///
/// Memory: per element, its slot (sizeof(T) plus a one-byte state: slots come in groups of up to
/// 64 bytes, their states first, then their elements; where only one fits, the state is padded
/// to alignof(T)); per node SEGMENT_SIZE slots plus two cache lines; per queue the L1 top-level
/// pointers and a few cache lines (8-byte elements: about 10.5 bytes each, bench_memory). An empty
/// queue holds one middle block and one leaf block (L3 nodes). After draining, nodes are reused, so
/// a steady load does not grow memory; memory is given back by ~queue only.
///
/// When not to use: for a fixed capacity with blocking producers use async::bounded_queue; for
/// one producer and one consumer a single-producer ring is cheaper.
///
/// Example:
/// @code
///   async::queue<std::string> q;
///   std::thread producer([&] { q.enqueue("hello"); q.close(); });
///   std::string s;
///   while (q.blocking_dequeue(s)) { use(s); }   // false once closed and drained
///   producer.join();
/// @endcode
template <typename T, typename Traits = traits>
class queue : private detail::unbounded_core<T, Traits, traits> {
  static_assert(std::is_nothrow_destructible<T>::value,
                "async::queue<T>: T must be nothrow destructible.");
  static_assert(std::is_move_constructible<T>::value || std::is_copy_constructible<T>::value,
                "async::queue<T>: T must be move or copy constructible (a producer whose slot "
                "was skipped moves its element to a later slot; a copy-only T is copied).");
  static_assert(!std::is_reference<T>::value && !std::is_array<T>::value,
                "async::queue<T>: T must be an object type (not a reference or an array).");

  // The machinery (detail/unbounded/core.h): knobs, types, steps and data used below.
  using core = detail::unbounded_core<T, Traits, traits>;
  using core::index_bits;
  using core::level1;
  using core::level2;
  using core::level3;
  using core::line_size;
  using core::segment_size;
  using finish_batch = typename core::finish_batch;
  using list = typename core::list;
  using slot = typename core::slot;
  using state = typename core::state;
  using walk = typename core::walk;
  using word = typename core::word;

  static_assert(line_size >= 16 && (line_size & (line_size - 1)) == 0,
                "async::queue: CachelineSize must be a power of two, at least 16.");
  static_assert(segment_size >= 2 && (segment_size & (segment_size - 1)) == 0 &&
                    segment_size <= (std::size_t(1) << 20),
                "async::queue: SEGMENT_SIZE must be a power of two between 2 and 2^20.");
  // The original library's traits members (d36u9/async v1.1.0): no meaning here, so a struct
  // that sets one does not compile (MIGRATION.md), instead of being silently ignored.
  static_assert(!detail::sets_tagbits<Traits>::value,
                "async::queue: the traits member Tagbits (the original library's link layout) is "
                "not used here; set TAG_BITS (the ABA tag bits of a link, at most 32) instead, "
                "see MIGRATION.md.");
  static_assert(!detail::sets_level1_bits<Traits>::value &&
                    !detail::sets_level2_bits<Traits>::value &&
                    !detail::sets_level3_bits<Traits>::value,
                "async::queue: the traits members L1bits, L2bits and L3bits (the original "
                "library's level widths, one element per node) are not used here; size the node "
                "storage with NODE_LEVEL1, NODE_LEVEL2 and NODE_LEVEL3 (nodes per level) instead, "
                "see MIGRATION.md.");
  static_assert(!detail::sets_basebits<Traits>::value,
                "async::queue: the traits member Basebits (the original library's leaf width) is "
                "not used here; a node holds SEGMENT_SIZE elements and a leaf block NODE_LEVEL3 "
                "nodes: set those instead, see MIGRATION.md.");
  static_assert(static_cast<double>(level1) * level2 * level3 >= 2,
                "async::queue: NODE_LEVEL1 x NODE_LEVEL2 x NODE_LEVEL3 must be at least 2 (a "
                "segment's node is recycled only once the next segment is linked: a storage of "
                "one node would refuse every enqueue).");
  static_assert(static_cast<double>(level1) * level2 * level3 <
                    static_cast<double>((std::uint64_t(1) << index_bits) - 1),
                "async::queue: NODE_LEVEL1 x NODE_LEVEL2 x NODE_LEVEL3 must be below "
                "2^INDEX_BITS - 1 (the all-ones index means 'no node').");

public:
  /// The element type T.
  using value_type = T;
  /// The traits struct the queue was made with.
  using traits_type = Traits;

  /// The false-sharing granule in bytes (Traits::CachelineSize), as the original named it.
  static constexpr std::size_t cacheline_size = line_size;

  /// An empty queue with one node. Throws std::bad_alloc when memory runs out. Not thread-safe
  /// (construction).
  queue() : queue(0, detail::first_ticket{0}) {}

  /// An empty queue with room for at least `reserve` elements before it allocates again.
  /// Not explicit, as in the original library (a size converts to a queue where one is
  /// expected; `async::queue<int> q = 1000;` compiles from C++17, the move constructor being
  /// deleted). O(reserve / SEGMENT_SIZE): the nodes are allocated here. Not thread-safe
  /// (construction).
  /// @throws std::length_error when the node storage cannot hold that many (for example
  ///         reserve == SIZE_MAX with the default traits).
  /// @throws std::bad_alloc when memory runs out.
  queue(std::size_t reserve) : queue(reserve, detail::first_ticket{0}) {}

  /// Test seam, not part of the API: both ticket counters start at `start` (rounded down to a
  /// segment boundary), so tests can put segment numbers, and the tags derived from them, near
  /// a wrap point. Not thread-safe (construction).
  queue(std::size_t reserve, detail::first_ticket start) : core(reserve, start) {}

  queue(const queue&) = delete;
  queue& operator=(const queue&) = delete;
  queue(queue&&) = delete;
  queue& operator=(queue&&) = delete;

  /// Destroys the elements still inside and frees every node. O(elements + nodes). Not
  /// thread-safe: no call may be running.
  ~queue() = default;

  // ---- producers ------------------------------------------------------------------------------

  /// Constructs an element from `args` at the tail. The queue has no capacity of its own: only
  /// its traits' node storage bounds it (see traits::NODE_LEVEL1). O(1), plus a node linked once
  /// per SEGMENT_SIZE elements. Thread-safe (lock-free).
  /// @return true when the element went in; false when the queue is closed, or, with
  ///         NOEXCEPT_CHECK, when T's constructor threw (or its move, for an element whose slot
  ///         was skipped). (In the rare case that the element's slot was skipped and the queue
  ///         closed before it could move on, the element is destroyed and false is returned.)
  /// @throws std::length_error before taking a ticket, when every node of the storage is in
  ///         use, unless consumers already hold tickets past the tail (they raced past it and
  ///         skipped those slots; only producers can finish them) or the queue is closed
  ///         (false). When memory runs out after the ticket was taken, the call waits for
  ///         memory instead (the ticket's slot must be settled).
  /// @throws anything T's constructor throws (or its move, for an element whose slot was
  ///         skipped), without NOEXCEPT_CHECK: the slot is voided and nothing leaks.
  template <typename... Args>
  bool enqueue(Args&&... args) {
    word hint = 0;
    std::uint64_t t = 0;
    if (ASYNC_UNLIKELY(!take_tickets(1, hint, t))) {
      return false;
    }
    const std::uint32_t i = segments_.find(list::producers, hint, t / segment_size);
    const slot s = segments_.slot(i, t);
    if (!emplace(i, s, std::forward<Args>(args)...)) {
      return false;
    }
    ASYNC_PERTURB(); // constructed, not yet published
    if (ASYNC_LIKELY(state::publish(s.state))) {
      waiting_.notify();
      return true;
    }
    return relocate(i, s);
  }

  /// Enqueues n elements constructed from *first, *(first + 1), ... (an input iterator is read
  /// exactly n times, in order), taking n tickets with one fetch_add. The elements keep their
  /// order. n == 0 does nothing. O(n). Thread-safe (lock-free).
  /// @return how many went in: n, fewer when the queue was closed (the rest of the range is
  ///         not read) or, with NOEXCEPT_CHECK, when constructors threw (those elements are
  ///         skipped).
  /// @throws std::length_error before reading the range or taking a ticket, when n exceeds
  ///         max_bulk() (n tickets could need more nodes than the storage has), when every
  ///         node of the storage is in use (as enqueue), or when the n tickets from the tail on
  ///         need more nodes than the storage has free now (the segments from the oldest queued
  ///         element's to the last ticket's must all exist at once). Once elements of the range
  ///         are in, the call waits for a node instead (as it may when producers racing it took
  ///         the last free nodes).
  /// @throws anything that reading or advancing the iterator, or T's constructor (without
  ///         NOEXCEPT_CHECK), throws: the elements before are in, the slots this call reserved
  ///         for the rest are voided.
  template <typename InputIt>
  std::size_t bulk_enqueue(InputIt first, std::size_t n) {
    if (ASYNC_UNLIKELY(n > max_bulk())) {
      throw std::length_error("async::queue: bulk_enqueue of more elements than the node "
                              "storage can ever hold at once (see max_bulk())");
    }
    if (n > 0 && ASYNC_UNLIKELY(!segments_.fresh_nodes_for(n))) {
      refuse_short_of_nodes(n);
    }
    std::size_t in = 0;
    detail::holder<T> carry; // an element whose slot was skipped: it goes in the next slot
    bool first_round = true;
    while (n > 0) {
      word hint = 0;
      std::uint64_t t0 = 0;
      // Only the first round may be refused for want of room: a later one (after a consumer
      // skipped a slot) has elements of this call in already, and perhaps one in hand, so it
      // waits for a node rather than throw.
      if (ASYNC_UNLIKELY(!take_tickets(n, hint, t0, /*check=*/first_round))) {
        break; // closed: `carry` (if any) is destroyed, the rest of the range is not read
      }
      first_round = false;
      walk round(segments_, list::producers, hint, t0, t0 + n);
      n -= fill(round, first, carry, in);
    }
    return in;
  }

  // ---- consumers ------------------------------------------------------------------------------

  /// Moves the oldest element into `out` (by assignment) if there is one now. Never waits for
  /// long: only at a slot whose producer is moving its element in (see the class comment).
  /// O(1). Thread-safe (lock-free).
  /// @return true when an element was moved into `out`; false when the queue is empty (or
  ///         closed and drained), and then `out` is not written.
  /// @throws anything the assignment to `out` throws: the element is destroyed, and the queue
  ///         stays usable.
  template <typename U>
  ASYNC_NODISCARD bool dequeue(U& out) {
    for (;;) {
      const std::uint64_t h = head_.value.load(std::memory_order_relaxed);
      const word hint = segments_.hint(list::consumers);
      // Not empty if the slot at the head already holds an element (a look at a line we are
      // about to use anyway); otherwise compare with the tail, whose line producers keep
      // writing. A wrong guess (the head moved meanwhile) costs one skipped ticket.
      if (!looks_full(hint, h) && h >= effective_tail()) {
        return false;
      }
      ASYNC_PERTURB(); // looked, no ticket yet
      // (UD1) relaxed: the ticket orders nothing. The element comes with the slot's state
      // (UT1), and a waiter's second look that must follow its registration is the tail's
      // (effective_tail(), seq_cst; see wait_dequeue).
      const std::uint64_t mine = head_.value.fetch_add(1, std::memory_order_relaxed);
      ASYNC_PERTURB(); // ticket taken, its slot not yet found
      const std::uint32_t i = segments_.find_consumer(hint, mine / segment_size);
      if (ASYNC_UNLIKELY(i == list::no_node)) {
        continue; // past the closed end, where no producer comes: the next look says empty
      }
      finish_batch finished(segments_);
      if (take(i, segments_.slot(i, mine), mine, finished,
               [&out](T& v) { detail::assign_relocated(out, v); })) {
        return true;
      }
    }
  }

  /// Moves up to n of the oldest elements to `out` (an output iterator such as a pointer into
  /// an array or std::back_inserter), in queue order, taking tickets with one fetch_add. As in
  /// the original library, an iterator passed as a modifiable lvalue is advanced past what was
  /// written (a pointer or an inserter kept by the caller continues where this call stopped);
  /// an rvalue (moved), a const or volatile iterator or an array is written through a copy.
  /// O(n). Thread-safe (lock-free).
  /// @return how many were written: fewer than n when the queue held fewer (0 when it is
  ///         empty, or n == 0).
  /// @throws anything writing to `out` throws: the elements of the tickets this call had taken
  ///         but not written are destroyed (those written stay written).
  template <typename OutputIt>
  ASYNC_NODISCARD std::size_t bulk_dequeue(OutputIt&& out, std::size_t n) {
    using it = typename std::remove_reference<OutputIt>::type;
    using in_place =
        std::integral_constant<bool, std::is_lvalue_reference<OutputIt>::value &&
                                         !std::is_const<it>::value &&
                                         !std::is_volatile<it>::value && !std::is_array<it>::value>;
    return bulk_dequeue_through(caller_iterator(std::forward<OutputIt>(out), in_place{}), n);
  }

  /// Moves the oldest element into `out`, waiting politely while the queue is empty (a short
  /// spin, then the thread parks). Thread-safe (may block).
  /// @return true when an element was moved into `out`; false only when the queue is closed and
  ///         every element that went in has been taken (`out` is then not written).
  /// @throws anything the assignment to `out` throws, as dequeue.
  template <typename U>
  bool blocking_dequeue(U& out) {
    return wait_dequeue(out, nullptr);
  }

  /// Like blocking_dequeue, but gives up after `timeout`. Any duration works: duration::max()
  /// (of any unit) waits for as long as it takes, without overflowing. The deadline is looked
  /// at when the call would park, after its spin (SPIN_BUDGET pauses and a few yields): a zero
  /// or negative timeout spins that long, then gives up without parking. Thread-safe (may
  /// block).
  /// @return true when an element was moved into `out`; false on timeout, or when the queue is
  ///         closed and drained (`out` is then not written).
  /// @throws anything the assignment to `out` throws, as dequeue.
  template <typename U, typename Rep, typename Period>
  ASYNC_NODISCARD bool dequeue_for(U& out, const std::chrono::duration<Rep, Period>& timeout) {
    const auto deadline = detail::deadline_after(timeout);
    return wait_dequeue(out, &deadline);
  }

  // ---- closing --------------------------------------------------------------------------------

  /// Closes the queue: every enqueue that takes its ticket afterwards returns false (and a bulk
  /// call stops); consumers still receive every element that went in before; blocked and timed
  /// dequeue calls return false once nothing is left. Idempotent; there is no reopening.
  /// Thread-safe (lock-free; wakes every parked consumer). What the thread that closes the
  /// queue (the first close()) did before it happens before every call that returns false
  /// because of it, and before an is_closed() that returns true. A close() of a closed queue
  /// changes nothing and orders nothing: a thread that must publish its writes to the
  /// consumers cannot rely on its own close() unless it is the only closer.
  void close() noexcept {
    // relaxed: the CAS below checks it (a second close() returns here, ordered after nothing).
    std::uint64_t t = tail_.value.load(std::memory_order_relaxed);
    while ((t & closed_bit) == 0) {
      // (UC1) release: after this CAS every producer's fetch_add sees the bit (a read-modify-
      // write reads the latest value), and what this thread did before happens before every
      // acquire that reads it: (UE1) refusing a ticket, (UC3), closed(). The value it replaced
      // is the exact number of tickets handed out before the close (relaxed on failure: a
      // count, checked again).
      if (tail_.value.compare_exchange_weak(t, t | closed_bit, std::memory_order_release,
                                            std::memory_order_relaxed)) {
        // (UC2) relaxed: read after the bit, the count orders nothing (effective_tail()); a
        // waiter sees it through (EC3), which follows.
        closed_at_.store(t, std::memory_order_relaxed);
        // A consumer that raced past the tail into a segment that the storage has no room for
        // waits for producers to come for those tickets; from here on none come, so such a
        // consumer whose segment lies wholly past the end gives its ticket up (its call then
        // sees a closed, drained queue). Every slot past the end stays unfinished, so those
        // segments are never recycled: a closed queue needs no more nodes.
        segments_.abandon_from(t);
        waiting_.wake_all();
        return;
      }
    }
  }

  /// Whether close() has been called. Thread-safe (lock-free).
  bool is_closed() const noexcept { return core::closed(); }

  // ---- observers ------------------------------------------------------------------------------

  /// The number of elements, give or take those in flight (the result may be stale before it
  /// is returned); exact when no call is running. O(1). Thread-safe (lock-free: wait-free).
  std::size_t size_approx() const noexcept {
    // relaxed, here and below: counts, exact once the calls that changed them have returned to
    // whoever asks. The void slots between the head and the tail hold no element.
    const std::uint64_t h = head_.value.load(std::memory_order_relaxed);
    const std::uint64_t t = effective_tail();
    const std::uint64_t v = void_slots_.load(std::memory_order_relaxed);
    const auto d = static_cast<std::int64_t>(t - h - v);
    return d > 0 ? static_cast<std::size_t>(d) : 0;
  }

  /// Whether the queue looked empty (racy, like size_approx). O(1). Thread-safe (lock-free:
  /// wait-free).
  bool was_empty() const noexcept { return size_approx() == 0; }

  /// Whether the queue is lock-free on this platform: its links and counters are plain 64-bit
  /// atomics, lock-free on x86-64, AArch64 and ARMv7 (checked when compiling). A constant;
  /// thread-safe.
  static constexpr bool is_lock_free_v() { return ATOMIC_LLONG_LOCK_FREE == 2; }

  /// Bytes of node storage held (nodes in use and on the free list). Thread-safe (lock-free).
  std::size_t storage_bytes() const noexcept { return segments_.bytes(); }

  /// Nodes taken from the storage so far (in use plus free). Thread-safe (lock-free).
  std::size_t nodes_allocated() const noexcept {
    return static_cast<std::size_t>(segments_.nodes_allocated());
  }

  /// nodes_allocated() under the original library's name. A node here holds a segment of
  /// SEGMENT_SIZE elements, where the original's held one, so the count is smaller
  /// (MIGRATION.md M3). Thread-safe (lock-free).
  std::uint64_t getNodeCount() const noexcept { return segments_.nodes_allocated(); }

  /// The largest n that bulk_enqueue accepts, (L1 x L2 x L3 - 1) x SEGMENT_SIZE: n tickets may
  /// start anywhere in a segment and so span up to (n - 1) / SEGMENT_SIZE + 2 segments, whose
  /// nodes must all exist at once. That is on an empty queue: the nodes of queued elements
  /// count too, so with elements queued bulk_enqueue may refuse a smaller n
  /// (std::length_error) until consumers free nodes. A constant; thread-safe.
  static constexpr std::size_t max_bulk() noexcept {
    return static_cast<std::size_t>(std::min<std::uint64_t>(
        (list::capacity - 1) * segment_size, (std::numeric_limits<std::size_t>::max)()));
  }

private:
  // ---- waiting --------------------------------------------------------------------------------

  // The blocking and timed calls: spin, register with the event count, look again, park.
  template <typename U>
  bool wait_dequeue(U& out, const detail::wait_clock::time_point* deadline) {
    detail::backoff active(core::spin_budget); // the library's waiting policy
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
      // Registered before the second look (EC1); a producer's ticket (UE1) followed by its
      // waiter check (EC2) then either is seen here (effective_tail()) or sees us.
      const std::uint64_t epoch = waiting_.prepare_wait();
      const auto registered = detail::at_scope_exit([this] { waiting_.cancel_wait(); });
      if (dequeue(out)) {
        return true;
      }
      if (drained()) {
        return false;
      }
      ASYNC_PERTURB(); // registered, about to park
      if (!waiting_.wait(epoch, deadline)) {
        return dequeue(out); // timed out: one last look
      }
    }
  }

  using core::bulk_dequeue_through;
  using core::caller_iterator;
  using core::closed_at_;
  using core::closed_bit;
  using core::drained;
  using core::effective_tail;
  using core::emplace;
  using core::fill;
  using core::head_;
  using core::looks_full;
  using core::no_close;
  using core::refuse_short_of_nodes;
  using core::relocate;
  using core::segments_;
  using core::tail_;
  using core::take;
  using core::take_tickets;
  using core::void_slots_;
  using core::waiting_;

  template <typename>
  friend struct detail::inspect;
};

#if ASYNC_CPLUSPLUS < 17
// The definition that a use by reference (odr-use) needs before C++17's inline variables.
template <typename T, typename Traits>
constexpr std::size_t queue<T, Traits>::cacheline_size;
#endif

} // namespace async

#endif // ASYNC_QUEUE_H
