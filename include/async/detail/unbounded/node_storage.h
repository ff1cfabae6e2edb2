// SPDX-License-Identifier: BSL-1.0
//
// node_storage: type-stable storage for the nodes of the unbounded queue, addressed by a 32-bit
// index through three levels of arrays:
//
//   index i  ->  top_[i / (L2*L3)]  ->  middle block[(i / L3) % L2]  ->  leaf block[i % L3]
//
// The top level is a fixed array inside the object; middle and leaf blocks are allocated on
// first use and published with one release CAS (a thread that loses the race frees its block
// and uses the winner's), so the storage grows lock-free. Every node of a leaf block is
// constructed when the block is, and no node is destroyed or freed before the storage itself:
// a thread holding a stale index can always read the node it names (what it reads may belong to
// a later use of the node; tags tell it so). Memory: L1 pointers up front, then L2 pointers per
// middle block and L3 nodes per leaf block as the index range grows.
#ifndef ASYNC_DETAIL_UNBOUNDED_NODE_STORAGE_H
#define ASYNC_DETAIL_UNBOUNDED_NODE_STORAGE_H

#include "../config.h"

#include "../cache.h"

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <new>
#include <stdexcept>
#include <type_traits>

namespace async {
namespace detail {

/// Grow-only, type-stable storage of default-constructed Node objects, at most L1 * L2 * L3 of
/// them. allocate() is thread-safe and lock-free; operator[] is thread-safe and wait-free for
/// any index that allocate() returned (to this or, through a release/acquire chain, to another
/// thread). Not copyable or movable.
/// Atom is the atomic type template of its words (std::atomic; a test seam, see traits.h).
template <typename Node, std::size_t L1, std::size_t L2, std::size_t L3,
          template <typename> class Atom = std::atomic>
class node_storage {
  static_assert(L1 >= 1 && L2 >= 1 && L3 >= 1, "node_storage: every level needs a size >= 1.");
  static_assert(static_cast<double>(L1) * L2 * L3 <= 4294967295.0,
                "node_storage: L1 * L2 * L3 must fit in a 32-bit index.");
  static_assert(std::is_nothrow_destructible<Node>::value,
                "node_storage: Node must be nothrow destructible.");

public:
  static constexpr std::uint64_t capacity = std::uint64_t(L1) * L2 * L3;

  node_storage() noexcept {
    for (auto& m : top_) {
      m.store(nullptr, std::memory_order_relaxed);
    }
  }

  node_storage(const node_storage&) = delete;
  node_storage& operator=(const node_storage&) = delete;

  /// Destroys every node. Not thread-safe: nobody may use the storage any more.
  ~node_storage() {
    for (auto& m : top_) {
      Atom<Node*>* middle = m.load(std::memory_order_acquire);
      if (middle == nullptr) {
        continue;
      }
      for (std::size_t j = 0; j < L2; ++j) {
        Node* leaf = middle[j].load(std::memory_order_acquire);
        if (leaf != nullptr) {
          destroy_leaf(leaf);
        }
      }
      destroy_middle(middle);
    }
  }

  /// A fresh index whose node exists. Throws std::length_error when all `capacity` indices
  /// are taken, std::bad_alloc when memory runs out (the index is then lost, the storage stays
  /// usable). Thread-safe (lock-free).
  std::uint32_t allocate() {
    // relaxed: the counter only hands out distinct numbers; the node's memory is published by
    // the release CAS in leaf_for (or was published earlier) and read with acquire loads.
    const std::uint64_t i = next_.fetch_add(1, std::memory_order_relaxed);
    if (i >= capacity) {
      throw std::length_error("async: node storage exhausted (raise the level sizes in traits)");
    }
    leaf_for(static_cast<std::uint32_t>(i));
    return static_cast<std::uint32_t>(i);
  }

  /// The node at index i, which allocate() returned. Thread-safe (wait-free).
  ASYNC_HOT_INLINE Node& operator[](std::uint32_t i) const noexcept {
    // acquire: pairs with the release CASes that published the blocks (see leaf_for).
    Atom<Node*>* middle = top_[i / (L2 * L3)].load(std::memory_order_acquire);
    Node* leaf = middle[(i / L3) % L2].load(std::memory_order_acquire);
    return leaf[i % L3];
  }

  /// How many indices have been handed out (may exceed capacity after failed calls).
  std::uint64_t allocated() const noexcept { return next_.load(std::memory_order_relaxed); }

  /// Bytes held by the blocks allocated so far (not counting this object). Thread-safe.
  std::size_t bytes() const noexcept { return bytes_.load(std::memory_order_relaxed); }

private:
  using link = Atom<Node*>;

  static constexpr std::size_t leaf_alignment = alignof(Node) > cache_line_size ? alignof(Node)
                                                                                : cache_line_size;

  // Makes sure the middle and leaf blocks for index i exist; returns the leaf.
  Node* leaf_for(std::uint32_t i) {
    Atom<Atom<Node*>*>& top = top_[i / (L2 * L3)];
    Atom<Node*>* middle = top.load(std::memory_order_acquire);
    if (middle == nullptr) {
      Atom<Node*>* fresh = make_middle();
      // release: publishes the zeroed block; acquire on failure: we use the winner's block.
      if (top.compare_exchange_strong(middle, fresh, std::memory_order_acq_rel,
                                      std::memory_order_acquire)) {
        middle = fresh;
      } else {
        destroy_middle(fresh);
      }
    }
    Atom<Node*>& slot = middle[(i / L3) % L2];
    Node* leaf = slot.load(std::memory_order_acquire);
    if (leaf == nullptr) {
      Node* fresh = make_leaf();
      // release: publishes the constructed nodes (pairs with the acquire in operator[]).
      if (slot.compare_exchange_strong(leaf, fresh, std::memory_order_acq_rel,
                                       std::memory_order_acquire)) {
        leaf = fresh;
      } else {
        destroy_leaf(fresh);
      }
    }
    return leaf;
  }

  Atom<Node*>* make_middle() {
    void* raw = aligned_allocate(L2 * sizeof(Atom<Node*>), cache_line_size);
    auto* block = static_cast<Atom<Node*>*>(raw);
    for (std::size_t j = 0; j < L2; ++j) {
      ::new (static_cast<void*>(block + j)) Atom<Node*>(nullptr);
    }
    bytes_.fetch_add(L2 * sizeof(Atom<Node*>), std::memory_order_relaxed);
    return block;
  }

  void destroy_middle(Atom<Node*>* block) noexcept {
    for (std::size_t j = 0; j < L2; ++j) {
      block[j].~link(); // nothing for std::atomic; a test's atomic type counts its words
    }
    aligned_free(block);
    bytes_.fetch_sub(L2 * sizeof(Atom<Node*>), std::memory_order_relaxed);
  }

  Node* make_leaf() {
    void* raw = aligned_allocate(L3 * sizeof(Node), leaf_alignment);
    Node* block = static_cast<Node*>(raw);
    std::size_t built = 0;
    try {
      for (; built < L3; ++built) {
        ::new (static_cast<void*>(block + built)) Node();
      }
    } catch (...) {
      while (built > 0) {
        block[--built].~Node();
      }
      aligned_free(raw);
      throw;
    }
    bytes_.fetch_add(L3 * sizeof(Node), std::memory_order_relaxed);
    return block;
  }

  void destroy_leaf(Node* block) noexcept {
    for (std::size_t k = 0; k < L3; ++k) {
      block[k].~Node();
    }
    aligned_free(block);
    bytes_.fetch_sub(L3 * sizeof(Node), std::memory_order_relaxed);
  }

  // Written once per slot by the CAS that publishes a middle block; read by every access.
  Atom<Atom<Node*>*> top_[L1];
  // Written by allocate(): the next fresh index.
  Atom<std::uint64_t> next_{0};
  // Written when blocks come and go: bookkeeping for bytes().
  Atom<std::size_t> bytes_{0};
};

#if ASYNC_CPLUSPLUS < 17
// The definition that a use by reference (odr-use) needs before C++17's inline variables.
template <typename Node, std::size_t L1, std::size_t L2, std::size_t L3,
          template <typename> class Atom>
constexpr std::uint64_t node_storage<Node, L1, L2, L3, Atom>::capacity;
#endif

} // namespace detail
} // namespace async

#endif // ASYNC_DETAIL_UNBOUNDED_NODE_STORAGE_H
