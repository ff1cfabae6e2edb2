// SPDX-License-Identifier: BSL-1.0
//
// node_pool: the nodes of the unbounded queue and the tagged free list that recycles them.
//
//   take()          a node off the free list, or a fresh one from node_storage
//   give_back(i)    pushes node i on the free list
//   operator[](i)   the node at index i (wait-free; any index take() ever returned)
//
// Nodes are never returned to the allocator while the pool lives (node_storage is type-stable),
// so a thread holding a stale index always reads a live node. The free list is a Treiber stack
// whose top is one 64-bit {index, tag} word (tagged_index): every push and pop changes the tag,
// so a pop that read its `below` link before another thread popped and pushed the same node
// fails its CAS instead of installing a stale link (ABA). A stale CAS could succeed only if a
// multiple of 2^TagBits pushes and pops happened while one thread stalled between its read and
// its CAS.
#ifndef ASYNC_DETAIL_UNBOUNDED_NODE_POOL_H
#define ASYNC_DETAIL_UNBOUNDED_NODE_POOL_H

#include "../config.h"

#include "../cache.h"
#include "../perturb.h"
#include "node_storage.h"
#include "tagged_index.h"

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace async {
namespace detail {

/// Nodes of type Node (which has a member `Atom<std::uint32_t> free_next`, the link below it on
/// the free list) in a node_storage of L1 x L2 x L3, with a tagged free list. Link is the
/// tagged_index packing of the free list's top. take() and give_back() are thread-safe and
/// lock-free.
template <typename Node, std::size_t L1, std::size_t L2, std::size_t L3, typename Link,
          std::size_t Line, template <typename> class Atom>
class node_pool {
public:
  using word = typename Link::word;
  static constexpr std::uint64_t capacity = node_storage<Node, L1, L2, L3, Atom>::capacity;

  /// An empty free list whose tag starts at `first_tag` (tests start it near a wrap point).
  explicit node_pool(std::uint32_t first_tag) noexcept
      : top_(Link::make(Link::null_index, first_tag)) {}

  node_pool(const node_pool&) = delete;
  node_pool& operator=(const node_pool&) = delete;

  ASYNC_HOT_INLINE Node& operator[](std::uint32_t i) const noexcept { return storage_[i]; }

  /// A node nobody else uses: the top of the free list, or a fresh one. Throws
  /// std::length_error when the storage is full, std::bad_alloc when memory runs out.
  std::uint32_t take() {
    // (FL1) acquire: pairs with (FL2): the node's free_next, and everything its last user did,
    // happen before our use of it.
    word top = top_.value.load(std::memory_order_acquire);
    while (!Link::is_null(top)) {
      const std::uint32_t i = Link::index(top);
      // relaxed: a stale value (the node was popped and pushed again meanwhile) fails the CAS,
      // whose tag has moved on.
      const std::uint32_t below = storage_[i].free_next.load(std::memory_order_relaxed);
      ASYNC_PERTURB(); // read the top and its link, not yet popped
      if (top_.value.compare_exchange_weak(top, Link::make(below, Link::next_tag(Link::tag(top))),
                                           std::memory_order_acquire,
                                           std::memory_order_acquire)) { // (FL1)
        return i;
      }
    }
    return storage_.allocate();
  }

  /// A node fresh from the storage (the queue's first node). Throws as take().
  std::uint32_t allocate() { return storage_.allocate(); }

  /// Pushes node i, which nobody uses any more, on the free list.
  void give_back(std::uint32_t i) noexcept {
    word top = top_.value.load(std::memory_order_relaxed);
    do {
      storage_[i].free_next.store(Link::index(top), std::memory_order_relaxed);
      // (FL2) release: publishes free_next and the node's last use; pairs with (FL1).
    } while (!top_.value.compare_exchange_weak(top, Link::make(i, Link::next_tag(Link::tag(top))),
                                               std::memory_order_release,
                                               std::memory_order_relaxed));
  }

  /// Every node of the storage is in use and none is free: take() would throw. A guess (relaxed:
  /// nothing is read through the top, and an acquire would not make the look any fresher).
  bool exhausted() const noexcept {
    return storage_.allocated() >= capacity &&
           Link::is_null(top_.value.load(std::memory_order_relaxed));
  }

  /// Nodes taken from the storage so far (clamped: failed allocations count too).
  std::uint64_t allocated() const noexcept {
    const std::uint64_t n = storage_.allocated();
    return n < capacity ? n : capacity;
  }

  /// Bytes held by the storage's blocks.
  std::size_t bytes() const noexcept { return storage_.bytes(); }

private:
  // Blocks are added by whichever thread first needs them (lock-free).
  node_storage<Node, L1, L2, L3, Atom> storage_;
  // Written by give_back (push) and take (pop): the free list's top.
  padded<Atom<word>, Line> top_;
};

#if ASYNC_CPLUSPLUS < 17
// The definition that a use by reference (odr-use) needs before C++17's inline variables.
template <typename Node, std::size_t L1, std::size_t L2, std::size_t L3, typename Link,
          std::size_t Line, template <typename> class Atom>
constexpr std::uint64_t node_pool<Node, L1, L2, L3, Link, Line, Atom>::capacity;
#endif

} // namespace detail
} // namespace async

#endif // ASYNC_DETAIL_UNBOUNDED_NODE_POOL_H
