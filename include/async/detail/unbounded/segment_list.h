// SPDX-License-Identifier: BSL-1.0
//
// segment_list: the unbounded queue's list of segments. Ticket t of either side lives in slot
// t % SegmentSize of segment t / SegmentSize; each segment is a node of a node_pool, and the
// nodes are linked in segment order by 64-bit {index, tag} words:
//
//   anchor -> [node: segment 7] -> [node: segment 8] -> [node: segment 9] -> nil
//             id, next, claimed, finished, groups        ^ a hint per side (producers, consumers)
//
//   find(side, hint, s)   the node of segment s, linking new segments as needed
//   slot(i, t)            the slot of ticket t in node i: its state and its element's storage.
//                         A node's slots come in groups of up to 64 bytes, the group's states
//                         first, then its elements, so that a slot of an 8-byte element takes
//                         about 9 bytes, not 16 (a state beside each element would be padded to
//                         the element's alignment), and its state and element share a line
//   finish(i, n)          n slots of node i are done with (both sides have left them); a node
//                         whose every slot is done is recycled once it is the oldest segment
//
// Invariants:
//   - A node's id is its segment number while it is linked, and free_flag | (last segment + 1)
//     while it is not: ids never repeat, so a thread that reads the id it expects knows that
//     everything else it read from the node (before that read) was of that lifetime.
//   - Segments are recycled in order, only from the anchor, only when all their slots are done
//     and the next segment is linked. A thread holding a ticket in segment s keeps s (and every
//     later segment) alive, and the anchor stays at or before s: every segment such a thread
//     may need is reachable from the anchor.
//   - A link's tag is the low bits of the segment number it names; a node's "no next node"
//     value is tagged with the node's own segment, so an appender that saw an earlier life of
//     the node fails its CAS.
#ifndef ASYNC_DETAIL_UNBOUNDED_SEGMENT_LIST_H
#define ASYNC_DETAIL_UNBOUNDED_SEGMENT_LIST_H

#include "../config.h"

#include "../cache.h"
#include "../element.h"
#include "../perturb.h"
#include "../spread.h"
#include "node_pool.h"
#include "tagged_index.h"

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <thread>

namespace async {
namespace detail {

/// The numbers of a slot_group_shape (below), as one value.
struct slot_group_layout {
  std::size_t count;       ///< slots per group
  bool whole_lines;        ///< each group is one GroupLine-aligned line
  std::size_t alignment;   ///< of a group
  std::size_t group_bytes; ///< the size of a group
  /// Groups per line of the spread (detail/spread.h): 1 for whole lines or side by side,
  /// otherwise as many groups as fit in Granule bytes (a power of two).
  std::size_t per_line;
  std::size_t groups; ///< per segment: enough for Segment slots, a multiple of `per_line`
  std::size_t spread; ///< lines the segment's groups spread over: groups / per_line
};

/// How the slots of a segment are grouped: `count` slots per group, the group's states (one
/// Atom<State> each) and then its elements, the most that fit in GroupLine bytes (at least one),
/// and at most Segment of them. Groups of two slots or more whose padding to GroupLine is at
/// most an eighth of it are aligned to GroupLine: each is one line. Other groups follow one
/// another unpadded (a group of one slot is the element with its state, padded to alignof(T)),
/// and lines may then hold parts of several groups; so that consecutive tickets do not share a
/// line, the groups of consecutive tickets are spread over lines (at(), detail/spread.h: as
/// many groups to a line as fit in Granule bytes, the padding granule). With SideBySide,
/// tickets are not spread: ticket k is slot k % count of group k / count, and `per_line` is 1.
template <typename T, typename State, std::size_t GroupLine, std::size_t Granule,
          std::size_t Segment, template <typename> class Atom, bool SideBySide = false>
struct slot_group_shape {
  static constexpr std::size_t round_up(std::size_t x, std::size_t to) noexcept {
    return (x + to - 1) / to * to;
  }
  static constexpr std::size_t floor_pow2(std::size_t x) noexcept {
    std::size_t p = 1;
    while (p * 2 <= x) {
      p *= 2;
    }
    return p;
  }
  static constexpr std::size_t natural_alignment() noexcept {
    return alignof(element_storage<T>) > alignof(Atom<State>) ? alignof(element_storage<T>)
                                                              : alignof(Atom<State>);
  }
  /// The bytes of a group of g slots, unpadded.
  static constexpr std::size_t bytes(std::size_t g) noexcept {
    return round_up(round_up(g * sizeof(Atom<State>), alignof(element_storage<T>)) +
                        g * sizeof(element_storage<T>),
                    natural_alignment());
  }
  static constexpr slot_group_layout make() noexcept {
    slot_group_layout l{};
    l.count = 1;
    while (l.count < Segment && bytes(l.count + 1) <= GroupLine) {
      ++l.count;
    }
    const std::size_t b = bytes(l.count);
    l.whole_lines = l.count >= 2 && b <= GroupLine && (GroupLine - b) * 8 <= GroupLine;
    l.alignment = l.whole_lines ? GroupLine : natural_alignment();
    l.group_bytes = l.whole_lines ? GroupLine : b;
    l.per_line = SideBySide || l.whole_lines || l.group_bytes >= Granule
                     ? 1
                     : floor_pow2(Granule / l.group_bytes);
    l.groups = round_up((Segment + l.count - 1) / l.count, l.per_line);
    l.spread = l.groups / l.per_line;
    return l;
  }
  static constexpr slot_group_layout value = make();
  /// Where the g-th group of a segment's tickets (g < groups) lies: line g % spread, position
  /// g / spread on it, so that groups g and g + 1 are `per_line` groups apart.
  static constexpr std::size_t at(std::size_t g) noexcept {
    return spread_index(g, value.spread, value.per_line);
  }
};

#if ASYNC_CPLUSPLUS < 17
// The definition that a use by reference (odr-use) needs before C++17's inline variables.
template <typename T, typename S, std::size_t G, std::size_t P, std::size_t N,
          template <typename> class A, bool B>
constexpr slot_group_layout slot_group_shape<T, S, G, P, N, A, B>::value;
#endif

/// A group of slots (slot_group_shape): N states, then the storage of N elements.
template <typename T, typename State, std::size_t N, std::size_t Alignment,
          template <typename> class Atom>
struct alignas(Alignment) slot_group {
  Atom<State> states[N] = {};
  element_storage<T> elements[N];
};

/// The segments of an unbounded queue: SegmentSize slots each, a slot being an Atom<State> (the
/// value 0 means "empty") and the storage of one T, in nodes of a node_pool of L1 x L2 x L3,
/// linked by tagged_index<IndexBits, TagBits> words. Atom is the atomic type template of the
/// protocol words. Consecutive tickets of a segment lie on different lines, or with SideBySide
/// side by side in their groups (slot()). Every member is thread-safe and lock-free unless it
/// says otherwise.
template <typename T, typename State, std::size_t SegmentSize, std::size_t L1, std::size_t L2,
          std::size_t L3, unsigned IndexBits, unsigned TagBits, std::size_t Line,
          template <typename> class Atom, bool SideBySide = false>
class segment_list {
public:
  using link = tagged_index<IndexBits, TagBits>;
  using word = typename link::word;
  static constexpr std::size_t segment_size = SegmentSize;
  /// The most nodes that can exist at once.
  static constexpr std::uint64_t capacity = std::uint64_t(L1) * L2 * L3;

  /// Each side (producers, consumers) keeps a hint: a recent segment, where its threads start
  /// looking.
  enum side : unsigned { producers = 0, consumers = 1 };

  /// A slot: the state of one ticket and the storage of its element (two places in the node).
  /// Copied freely; it names the slot, it does not own it.
  struct slot_ref {
    Atom<State>& state;
    element_storage<T>& element;

    /// Constructs the element from `args` (construct_or_hole, detail/element.h).
    template <bool Catch, typename Hole, typename... Args>
    bool emplace(Hole&& hole, Args&&... args) const {
      return construct_or_hole<Catch>(element, hole, std::forward<Args>(args)...);
    }
  };

  /// The list holding segment `first_segment`, and at least `reserve` slots' worth of nodes on
  /// the free list. Throws std::length_error when the storage cannot hold that many. Not
  /// thread-safe (construction).
  segment_list(std::uint64_t first_segment, std::size_t reserve) : pool_(tag_of(first_segment)) {
    const std::uint32_t first = pool_.allocate();
    node& n = pool_[first];
    n.id.store(first_segment, std::memory_order_relaxed);
    n.next.store(nil_after(first_segment), std::memory_order_relaxed);
    const word w = link::make(first, tag_of(first_segment));
    anchor_.value.store(w, std::memory_order_relaxed);
    for (auto& h : hints_) {
      h.value.store(w, std::memory_order_relaxed);
    }
    // Written without reserve + segment_size - 1, which wraps for reserve near SIZE_MAX.
    const std::uint64_t nodes = reserve / segment_size + (reserve % segment_size != 0 ? 1 : 0);
    if (nodes > capacity - 1) {
      throw std::length_error("async::queue: cannot reserve more elements than the node storage "
                              "holds (raise NODE_LEVEL1..3)");
    }
    for (std::uint64_t k = 0; k < nodes; ++k) {
      pool_.give_back(pool_.allocate());
    }
  }

  segment_list(const segment_list&) = delete;
  segment_list& operator=(const segment_list&) = delete;

  /// The side's hint, to read before taking a ticket: it then names a segment at or before the
  /// ticket's (or a node recycled since, which find() notices).
  word hint(side which) const noexcept {
    // (SL0) relaxed: a hint is only a guess, trusted once the node it names is seen with the
    // segment's id (holds() and locate(), (SL1), whose acquire pairs with the naming (SL2)).
    return hints_[which].value.load(std::memory_order_relaxed);
  }

  /// What find_consumer() returns when the consumer gave its ticket up (no node is that).
  static constexpr std::uint32_t no_node = link::null_index;

  /// The node of segment s, for a thread that holds a ticket in s (read `seen` from hint()
  /// before taking it). Links new segments as needed. The ticket cannot be given back (the
  /// other side of its slot depends on it), so when the segment cannot be created because
  /// memory or the storage is exhausted, this waits for another thread to create it or for
  /// memory. Lock-free otherwise.
  ASYNC_HOT_INLINE std::uint32_t find(side which, word seen, std::uint64_t s) noexcept {
    // The hint's node is segment s (the usual case): holds() is locate()'s first check, (SL1).
    if (ASYNC_LIKELY(holds(link::index(seen), s))) {
      return link::index(seen);
    }
    return find_elsewhere(which, seen, s);
  }

  /// find() once the hint's node is not segment s: out of line, so that the check above is all
  /// that the callers' loops carry.
  ASYNC_NOINLINE std::uint32_t find_elsewhere(side which, word seen, std::uint64_t s) noexcept {
    for (;;) {
      try {
        return locate(which, seen, s);
      } catch (...) {
        std::this_thread::yield();
      }
    }
  }

  /// find() for a consumer: returns no_node instead of waiting when its segment lies wholly
  /// past the closed end (abandon_from()), where no producer will ever use the slot. A
  /// function of its own: a test inside find() changed what the compiler inlined into the
  /// producers' loops (their single-call 1p1c fell to about half in alternating rounds).
  ASYNC_HOT_INLINE std::uint32_t find_consumer(word seen, std::uint64_t s) noexcept {
    if (ASYNC_LIKELY(holds(link::index(seen), s))) { // as in find()
      return link::index(seen);
    }
    return find_consumer_elsewhere(seen, s);
  }

  /// find_consumer() once the hint's node is not segment s (out of line, as find_elsewhere()).
  ASYNC_NOINLINE std::uint32_t find_consumer_elsewhere(word seen, std::uint64_t s) noexcept {
    for (;;) {
      try {
        return locate(consumers, seen, s);
      } catch (...) {
        ASYNC_PERTURB(); // no node for the segment now
        // acquire: pairs with the release in abandon_from().
        if (s >= abandoned_.load(std::memory_order_acquire)) {
          return no_node;
        }
        std::this_thread::yield();
      }
    }
  }

  /// The owner closed the list at ticket `end`: no producer will take a ticket from there on.
  /// A consumer holding a ticket in a segment that begins at or after `end` and has no node
  /// gives it up (find_consumer() returns no_node) instead of waiting for a node. In the segment of
  /// `end` itself (when it does not begin there) producers of earlier tickets link the node,
  /// so its consumers wait for that as usual. Called once.
  void abandon_from(std::uint64_t end) noexcept {
    abandoned_.store(end / segment_size + (end % segment_size != 0 ? 1 : 0),
                     std::memory_order_release);
  }

  /// The node of segment s, the successor of segment s - 1 in node i (a thread walking
  /// consecutive tickets).
  std::uint32_t find_after(side which, std::uint32_t i, std::uint64_t s) noexcept {
    // Node i is segment s - 1, so find()'s first check would fail: straight to the walk.
    return find_elsewhere(which, link::make(i, tag_of(s - 1)), s);
  }

  /// find_after() for a consumer: find_consumer() (may return no_node).
  std::uint32_t find_after_consumer(std::uint32_t i, std::uint64_t s) noexcept {
    return find_consumer_elsewhere(link::make(i, tag_of(s - 1)), s);
  }

  /// The slot of ticket t in node i (which is t's segment). Ticket k of a segment is in the
  /// group of rank k % G (G: the groups of a node), at position k / G within it; consecutive
  /// ranks are one line apart (slot_group_shape::at), so consecutive tickets are too. With
  /// SideBySide, ticket k is at position k % N of group k / N (N: the slots of a group).
  ASYNC_HOT_INLINE slot_ref slot(std::uint32_t i, std::uint64_t t) const noexcept {
    const std::size_t k = static_cast<std::size_t>(t % segment_size);
    if (SideBySide) {
      group& g = pool_[i].groups[k / shape::value.count];
      return slot_ref{g.states[k % shape::value.count], g.elements[k % shape::value.count]};
    }
    group& g = pool_[i].groups[shape::at(k % shape::value.groups)];
    return slot_ref{g.states[k / shape::value.groups], g.elements[k / shape::value.groups]};
  }

  /// Whether node i is segment s right now (a guess: it may change before the caller acts).
  ASYNC_HOT_INLINE bool holds(std::uint32_t i, std::uint64_t s) const noexcept {
    // (SL1) acquire: pairs with (SL2), the release that made the node segment s.
    return pool_[i].id.load(std::memory_order_acquire) == s;
  }

  /// `slots` slots of node i are done with: the last party of each (producer or consumer) has
  /// left it. The node is recycled once all of its slots are, in segment order.
  ASYNC_HOT_INLINE void finish(std::uint32_t i, std::uint32_t count = 1) noexcept {
    ASYNC_PERTURB(); // the slot is left, not yet counted
    // (SF1) seq_cst (acq_rel for the counting: the last finisher sees everything done in the
    // node's slots); seq_cst orders it before the anchor and link loads in try_recycle,
    // against (SR2) and (SA1).
    const std::uint32_t before = pool_[i].finished.fetch_add(count, std::memory_order_seq_cst);
    if (ASYNC_UNLIKELY(before + count == segment_size)) {
      try_recycle();
    }
  }

  /// Whether every node of the storage is in use and none is free (a guess: it may change).
  bool exhausted() const noexcept { return pool_.exhausted(); }

  /// Throws std::length_error when every node of the storage is in use and none is free: a
  /// producer calls it before taking a ticket, which it then might not be able to serve.
  void check_room() const {
    if (ASYNC_UNLIKELY(pool_.exhausted())) {
      throw std::length_error("async::queue: node storage exhausted (raise NODE_LEVEL1..3)");
    }
  }

  /// Whether the nodes never taken from the storage are enough for any n > 0 consecutive
  /// tickets (they span at most (n - 1) / SEGMENT_SIZE + 2 segments): true for any storage that
  /// is not nearly full, and then n tickets never wait for a node unless other threads take the
  /// nodes first.
  bool fresh_nodes_for(std::uint64_t n) const noexcept {
    return pool_.allocated() + (n - 1) / segment_size + 2 <= capacity;
  }

  /// Whether tickets t .. t + n - 1 (n > 0) need more nodes than the storage can give now:
  /// every segment from the oldest live one (the anchor) to the last of those tickets must
  /// exist at once, so a producer holding them waits until consumers recycle some. A guess (the
  /// tail and the anchor move), which says false when the anchor moved between its two loads.
  bool short_of_nodes(std::uint64_t t, std::uint64_t n) const noexcept {
    const std::uint64_t last = (t + n - 1) / segment_size;
    // acquire: pairs with (SR2) and (SL2), as in anchor_node().
    const word a = anchor_.value.load(std::memory_order_acquire);
    const std::uint64_t oldest = pool_[link::index(a)].id.load(std::memory_order_acquire);
    if (is_free(oldest) || link::tag(a) != tag_of(oldest) || oldest > last) {
      return false;
    }
    return last - oldest + 1 > capacity;
  }

  /// Calls f(i, s) for each linked segment s (node i) from the oldest on. Not thread-safe: no
  /// other call may run (the queue's destructor).
  template <typename F>
  void for_each_segment(F f) const {
    // relaxed: every other call's end happens before the caller.
    std::uint32_t i = link::index(anchor_.value.load(std::memory_order_relaxed));
    for (;;) {
      const std::uint64_t id = pool_[i].id.load(std::memory_order_relaxed);
      f(i, id);
      const word next = pool_[i].next.load(std::memory_order_relaxed);
      if (link::is_null(next) ||
          pool_[link::index(next)].id.load(std::memory_order_relaxed) != id + 1) {
        return;
      }
      i = link::index(next);
    }
  }

  /// Nodes taken from the storage so far (in use plus free).
  std::uint64_t nodes_allocated() const noexcept { return pool_.allocated(); }
  /// Bytes of node storage held.
  std::size_t bytes() const noexcept { return pool_.bytes(); }

  /// With no call under way: whether the oldest segment is done with and linked to the next,
  /// yet not recycled. Each race to recycle it ends with one thread recycling it (the seq_cst
  /// pairs of try_recycle), so this is false whenever the queue is at rest; the weak-memory
  /// tests check it once their threads are done. relaxed: at rest, every store is seen.
  bool recycle_overdue() const noexcept {
    const node& n = pool_[link::index(anchor_.value.load(std::memory_order_relaxed))];
    return n.finished.load(std::memory_order_relaxed) == segment_size &&
           !link::is_null(n.next.load(std::memory_order_relaxed));
  }

  /// Counts finished slots of one node at a time (a bulk consumer): one fetch_add per node
  /// instead of one per element. Flushed when the node changes, before a walk moves on to the
  /// next segment, and at the end. Not thread-safe (one per call).
  class finish_batch {
  public:
    explicit finish_batch(segment_list& list) noexcept : list_(list) {}
    finish_batch(const finish_batch&) = delete;
    finish_batch& operator=(const finish_batch&) = delete;
    ~finish_batch() { flush(); }

    void add(std::uint32_t i) noexcept {
      if (count_ != 0 && i != node_) {
        flush();
      }
      node_ = i;
      ++count_;
    }
    void flush() noexcept {
      if (count_ != 0) {
        list_.finish(node_, count_);
        count_ = 0;
      }
    }

  private:
    segment_list& list_;
    std::uint32_t node_ = 0;
    std::uint32_t count_ = 0;
  };

  /// Consecutive tickets [next, end) taken by one fetch_add of a bulk call, walked in order
  /// across segments. A consumer's walk flushes its finish_batch before it moves on (the node
  /// it leaves may then be recycled; otherwise the storage could run out under it). Not
  /// thread-safe (one per call).
  class walk {
  public:
    walk(segment_list& list, side which, word seen, std::uint64_t first, std::uint64_t last,
         finish_batch* batch = nullptr) noexcept
        : next(first), end(last), list_(list), side_(which), batch_(batch),
          segment_(first / segment_size), node_(list.find(which, seen, segment_)) {}

    /// A consumer's walk: its nodes come from find_consumer(), and reach() says when it gave
    /// its tickets up.
    struct consumer_tag {};
    walk(segment_list& list, consumer_tag, word seen, std::uint64_t first, std::uint64_t last,
         finish_batch* batch) noexcept
        : next(first), end(last), list_(list), side_(consumers), batch_(batch),
          segment_(first / segment_size), node_(list.find_consumer(seen, segment_)) {}

    /// Finds the node of ticket `next`. False when it was given up (find_consumer()): that ticket
    /// and every later one of the walk lie past the closed end and have no slot. Producers
    /// need not call it (they never give up): slot() finds the node itself.
    bool reach() noexcept {
      if (ASYNC_UNLIKELY(node_ == no_node)) {
        return false;
      }
      const std::uint64_t s = next / segment_size;
      if (s != segment_) {
        if (batch_ != nullptr) {
          batch_->flush();
        }
        node_ = list_.find_after_consumer(node_, s);
        segment_ = s;
      }
      return node_ != no_node;
    }

    /// The slot of ticket `next` (for a consumer, after reach() said true); its node goes to
    /// `i`.
    slot_ref slot(std::uint32_t& i) noexcept {
      const std::uint64_t s = next / segment_size;
      if (s != segment_) { // the next segment: walks only move forward, one segment at a time
        if (batch_ != nullptr) {
          batch_->flush();
        }
        node_ = list_.find_after(side_, node_, s);
        segment_ = s;
      }
      i = node_;
      return list_.slot(node_, next);
    }

    std::uint64_t next; // the first ticket of the walk that the caller has not settled
    std::uint64_t end;  // one past the walk's last ticket

  private:
    segment_list& list_;
    side side_;
    finish_batch* batch_;
    std::uint64_t segment_;
    std::uint32_t node_;
  };

private:
  // A node's id while it is not linked: free_flag | (one more than its last segment number,
  // 0 for a fresh node).
  static constexpr std::uint64_t free_flag = std::uint64_t(1) << 63;

  // A group fills at most 64 bytes (or Line, if smaller): the coherence unit of x86-64 and of
  // most ARM cores, even where Line (the padding between hot variables) is 128. Groups of 128
  // bytes let two 64-byte halves carry the states of 14 tickets spread over the whole segment,
  // and bulk(16) at 1p1c ran at half the speed (7.3 M/s against 14.6 M/s for the slots of
  // 16 bytes before groups; 64-byte groups: level).
  static constexpr std::size_t group_line = Line < 64 ? Line : 64;
  using shape = slot_group_shape<T, State, group_line, Line, SegmentSize, Atom, SideBySide>;
  using group = slot_group<T, State, shape::value.count, shape::value.alignment, Atom>;
  static_assert(sizeof(group) == shape::value.group_bytes, "slot_group_shape: a group's size");

  struct node {
    // Line 1, read by every operation and written once per lifetime of the node.
    // Written when the node is linked (segment number) and when it is recycled (free_flag).
    Atom<std::uint64_t> id{free_flag};
    // Written once per lifetime by the CAS that links the next segment (from the "nil" link).
    Atom<word> next{link::make(link::null_index, 0)};
    // Written by the one thread that wins the right to recycle the node: last segment + 1.
    Atom<std::uint64_t> claimed{0};
    // Written by the thread that pushes the node on the free list.
    Atom<std::uint32_t> free_next{link::null_index};
    char pad1[Line - (3 * sizeof(Atom<std::uint64_t>) + sizeof(Atom<std::uint32_t>)) % Line];
    // Line 2. Written by the last party to leave each slot: how many slots are finished.
    Atom<std::uint32_t> finished{0};
    char pad2[Line - sizeof(Atom<std::uint32_t>) % Line];
    // The slots, written by the producer and the consumer of each ticket.
    group groups[shape::value.groups];
  };

  using pool_type = node_pool<node, L1, L2, L3, link, Line, Atom>;

  static constexpr std::uint32_t tag_of(std::uint64_t segment) noexcept {
    return static_cast<std::uint32_t>(segment) & link::tag_mask;
  }
  // The "no next node" value of a node that is segment s: tagged with s, so that a stale
  // appender (who saw the node as an earlier segment) fails its CAS.
  static constexpr word nil_after(std::uint64_t s) noexcept {
    return link::make(link::null_index, tag_of(s));
  }
  static constexpr bool is_free(std::uint64_t id) noexcept { return (id & free_flag) != 0; }

  // The index of the node that is segment s, appending segments as needed, starting from the
  // node `seen` names. The caller's ticket keeps segment s alive: a node is recycled only after
  // both parties of each of its slots have left it, so once a node is seen with id == s it
  // stays segment s until the caller is done with its slot.
  std::uint32_t locate(side which, word seen, std::uint64_t s) {
    std::uint32_t i = link::index(seen);
    // (SL1) acquire: pairs with (SL2), the release that made the node segment id.
    std::uint64_t id = pool_[i].id.load(std::memory_order_acquire);
    if (ASYNC_LIKELY(id == s)) {
      return i;
    }
    ASYNC_PERTURB(); // the hint was stale
    if (is_free(id) || id > s) {
      anchor_node(s, i, id);
    }
    i = walk_to(i, id, s);
    // (SL4) relaxed: moves the hint forward; it publishes nothing (see (SL0)). A failure means
    // another thread moved it: fine either way.
    if (link::index(seen) != i) {
      hints_[which].value.compare_exchange_strong(
          seen, link::make(i, tag_of(s)), std::memory_order_relaxed, std::memory_order_relaxed);
    }
    return i;
  }

  // Loads the oldest live segment (the anchor): its node index and segment number. The anchor
  // is at or before every segment that a thread holding a ticket may still need.
  void anchor_node(std::uint64_t s, std::uint32_t& i, std::uint64_t& id) const noexcept {
    for (;;) {
      // (SL5) acquire: pairs with (SR2), the store that moved the anchor.
      const word a = anchor_.value.load(std::memory_order_acquire);
      i = link::index(a);
      id = pool_[i].id.load(std::memory_order_acquire);
      if (!is_free(id) && id <= s) {
        return;
      }
      // The anchor moved on and its old node was recycled between our two loads: reload.
    }
  }

  // From node i (segment id <= s, live when read) to segment s, linking segments as needed.
  std::uint32_t walk_to(std::uint32_t i, std::uint64_t id, std::uint64_t s) {
    while (id < s) {
      node& n = pool_[i];
      // (SL3) acquire: pairs with (SA1), the CAS that linked the next node.
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
      ASYNC_PERTURB(); // read the link, not yet its node
      const std::uint32_t j = link::index(next);
      std::uint64_t jid = pool_[j].id.load(std::memory_order_acquire);
      ASYNC_PERTURB(); // read the next node's id, not yet validated
      // Validate: ids never repeat, so if n is still segment id, `next` was read from this
      // lifetime of n, and the node it names cannot have been recycled when jid was read
      // (segments are recycled in order, n first).
      if (n.id.load(std::memory_order_acquire) != id) {
        anchor_node(s, i, id);
        continue;
      }
      if (jid != id + 1) {
        if (is_free(jid)) {
          ASYNC_PERTURB(); // linked, but its linker has not named it yet: help
          set_id(pool_[j], jid, id + 1);
          jid = pool_[j].id.load(std::memory_order_acquire);
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

  // (SL2) release: makes the node segment `to` (its slots were reset before it was linked);
  // pairs with (SL1) and the other acquire loads of an id.
  static void set_id(node& n, std::uint64_t from, std::uint64_t to) noexcept {
    n.id.compare_exchange_strong(from, to, std::memory_order_acq_rel, std::memory_order_acquire);
  }

  // Links a fresh node after n (segment id) unless another thread did; returns n's next link
  // (or a nil link if n turned out to be recycled: the caller revalidates).
  word append(node& n, std::uint64_t id) {
    const std::uint32_t j = pool_.take();
    node& fresh = pool_[j];
    const std::uint64_t fresh_id = fresh.id.load(std::memory_order_relaxed);
    fresh.next.store(nil_after(id + 1), std::memory_order_relaxed);
    fresh.finished.store(0, std::memory_order_relaxed);
    for (auto& g : fresh.groups) {
      for (auto& state : g.states) {
        state.store(State(0), std::memory_order_relaxed);
      }
    }
    word expected = nil_after(id);
    ASYNC_PERTURB(); // the fresh node is reset, not yet linked
    // (SA1) seq_cst: publishes the reset node (pairs with (SL3)); seq_cst also orders it before
    // the anchor check in try_recycle below, against a finisher's (SF1).
    if (!n.next.compare_exchange_strong(expected, link::make(j, tag_of(id + 1)),
                                        std::memory_order_seq_cst, std::memory_order_acquire)) {
      pool_.give_back(j); // lost the race (or n was recycled): nobody saw this node
      return expected;
    }
    ASYNC_PERTURB(); // linked, not yet named
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
      pool_.give_back(j);
      return nil_after(id);
    }
    return link::make(j, tag_of(id + 1)); // real, and already named; the caller revalidates
  }

  // Recycles finished segments at the anchor, in order, while each has a successor. Safe to
  // call from any thread at any time: one thread wins the right to recycle each segment.
  ASYNC_NOINLINE void try_recycle() noexcept {
    for (;;) {
      const word a = anchor_.value.load(std::memory_order_seq_cst);
      const std::uint32_t i = link::index(a);
      node& n = pool_[i];
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
      ASYNC_PERTURB(); // finished and linked, not yet claimed
      // relaxed, these two looks and the claim: the claim only picks one recycler among the
      // threads that saw this life finished and linked. What the recycler must see came with
      // those looks (the finished count's and the link's loads above), and a stale look here
      // is caught by the claim, a read-modify-write of the latest value.
      std::uint64_t claimed = n.claimed.load(std::memory_order_relaxed);
      if (claimed > id || n.id.load(std::memory_order_relaxed) != id) {
        return; // already claimed, or recycled since we looked
      }
      // (SR1) the claim: `claimed` only grows, so a thread that looked at an earlier lifetime
      // of the node fails here.
      if (!n.claimed.compare_exchange_strong(claimed, id + 1, std::memory_order_relaxed,
                                             std::memory_order_relaxed)) {
        return;
      }
      ASYNC_PERTURB(); // claimed, the next node not yet named
      const std::uint32_t j = link::index(next);
      const std::uint64_t jid = pool_[j].id.load(std::memory_order_acquire);
      if (is_free(jid)) {
        set_id(pool_[j], jid, id + 1);
      }
      ASYNC_PERTURB(); // the next node named, the old one not yet freed
      // The old node stops being segment id before the anchor moves on (and so before the
      // next node can be recycled): a walker that read n.next and then the next node's id
      // re-checks n.id after that read, so it never trusts an id that the next node received
      // in a later life (it would "help" name a node that is back on the free list).
      n.id.store(free_flag | (id + 1), std::memory_order_release);
      ASYNC_PERTURB(); // the old node freed, the anchor not yet moved
      // (SR2) seq_cst: moves the anchor (pairs with (SL5)); seq_cst orders it before the check
      // of the next node's counter, against (SF1). Threads that find the anchor naming a free
      // node wait in anchor_node for this store.
      anchor_.value.store(link::make(j, tag_of(id + 1)), std::memory_order_seq_cst);
      ASYNC_PERTURB(); // the anchor moved, the old node not yet on the free list
      pool_.give_back(i);
    }
  }

  // ---- data -----------------------------------------------------------------------------------
  // The nodes and their free list.
  pool_type pool_;
  // Written by the thread that recycles the oldest segment: the oldest live segment.
  padded<Atom<word>, Line> anchor_;
  // Written by threads of each side that reach a new segment: where that side starts looking.
  padded<Atom<word>, Line> hints_[2];
  // Written once, when the owner closes: the first segment that lies wholly past the closed
  // end (abandon_from()). Read only by consumers that found no node for their segment; the
  // hints' padding keeps it off their lines.
  Atom<std::uint64_t> abandoned_{~std::uint64_t(0)};
};

#if ASYNC_CPLUSPLUS < 17
// The definitions that a use by reference (odr-use) needs before C++17's inline variables.
template <typename T, typename State, std::size_t S, std::size_t L1, std::size_t L2, std::size_t L3,
          unsigned I, unsigned G, std::size_t Line, template <typename> class Atom, bool B>
constexpr std::size_t segment_list<T, State, S, L1, L2, L3, I, G, Line, Atom, B>::segment_size;
template <typename T, typename State, std::size_t S, std::size_t L1, std::size_t L2, std::size_t L3,
          unsigned I, unsigned G, std::size_t Line, template <typename> class Atom, bool B>
constexpr std::uint64_t segment_list<T, State, S, L1, L2, L3, I, G, Line, Atom, B>::capacity;
template <typename T, typename State, std::size_t S, std::size_t L1, std::size_t L2, std::size_t L3,
          unsigned I, unsigned G, std::size_t Line, template <typename> class Atom, bool B>
constexpr std::uint32_t segment_list<T, State, S, L1, L2, L3, I, G, Line, Atom, B>::no_node;
#endif

} // namespace detail
} // namespace async

#endif // ASYNC_DETAIL_UNBOUNDED_SEGMENT_LIST_H
