// SPDX-License-Identifier: BSL-1.0
//
// worker_registry<Worker>: every worker the pool has had, in storage that never moves and is
// freed only with the registry, so that idle workers can look at the others' queues and next
// slots without a lock while the pool grows and shrinks. Entry i lives in chunk c at offset
// i + 1 - 2^c, where chunk c (holding 2^c entries) is the one with 2^c <= i + 1 < 2^(c+1): the
// chunks double, so any number of entries takes at most one chunk per bit of a size_t.
//
// A retired worker's entry stays (its queues are empty once its thread has handed its tasks
// over) and is reused by the next worker that starts, once the host has joined the thread.
// Lookers read size() (acquire) and the entries below it; entries are added and reused under
// the host's lock.
#ifndef ASYNC_DETAIL_POOL_WORKER_REGISTRY_H
#define ASYNC_DETAIL_POOL_WORKER_REGISTRY_H

#include "../config.h"

#include "../cache.h"

#include <atomic>
#include <cassert>
#include <cstddef>
#include <new>
#include <type_traits>

namespace async {
namespace detail {

/// Worker needs `vacant` (bool, true when built) and `index` (std::size_t), both written under
/// the host's lock; `index` once, when the entry is added, since others read it without that
/// lock. Thread-safe for lookers (size, operator[]); acquire and release need the
/// host's lock.
template <typename Worker, template <typename> class Atom = std::atomic>
class worker_registry {
public:
  worker_registry() noexcept {
    for (std::size_t c = 0; c < chunks; ++c) {
      chunk_[c].store(nullptr, std::memory_order_relaxed);
    }
  }
  worker_registry(const worker_registry&) = delete;
  worker_registry& operator=(const worker_registry&) = delete;
  ~worker_registry() {
    for (std::size_t c = 0; c < chunks; ++c) {
      Worker* chunk = chunk_[c].load(std::memory_order_relaxed);
      if (chunk != nullptr) {
        for (std::size_t k = 0; k < chunk_size(c); ++k) {
          chunk[k].~Worker();
        }
        aligned_free(chunk);
      }
    }
  }

  /// Entries added so far. (WR1) acquire: pairs with (WR2); the entries below it are built.
  std::size_t size() const noexcept { return size_.load(std::memory_order_acquire); }

  /// Entry i (i < size()).
  Worker& operator[](std::size_t i) const noexcept {
    std::size_t c = 0;
    while ((std::size_t(2) << c) <= i + 1) {
      ++c;
    }
    // relaxed: published by (WR2) before i was below size().
    return chunk_[c].load(std::memory_order_relaxed)[i + 1 - (std::size_t(1) << c)];
  }

  /// The host's lock held: a vacant entry (reused, or added), marked in use. Throws
  /// std::bad_alloc when a new chunk cannot be allocated (nothing changed).
  Worker& acquire() {
    const std::size_t n = size_.load(std::memory_order_relaxed);
    for (std::size_t i = 0; i < n; ++i) {
      Worker& w = (*this)[i];
      if (w.vacant) {
        // Its index is i since it was added, and thieves read it without the host's lock
        // (steal_many orders two locks by it): not written again.
        assert(w.index == i);
        w.vacant = false;
        return w;
      }
    }
    std::size_t c = 0;
    while ((std::size_t(2) << c) <= n + 1) {
      ++c;
    }
    if (n + 1 == (std::size_t(1) << c)) { // the first entry of chunk c
      void* memory = aligned_allocate(sizeof(Worker) * chunk_size(c), alignof(Worker));
      Worker* chunk = static_cast<Worker*>(memory);
      for (std::size_t k = 0; k < chunk_size(c); ++k) {
        ::new (static_cast<void*>(chunk + k)) Worker(); // noexcept (static_assert below)
      }
      chunk_[c].store(chunk, std::memory_order_relaxed); // published by (WR2)
    }
    Worker& w = (*this)[n];
    w.vacant = false;
    w.index = n;
    // (WR2) release: the entry (and its chunk) before the size that shows it; pairs with (WR1).
    size_.store(n + 1, std::memory_order_release);
    return w;
  }

  /// The host's lock held: the entry's thread is gone; a later acquire() may reuse it.
  void release(Worker& w) noexcept { w.vacant = true; }

private:
  static_assert(std::is_nothrow_default_constructible<Worker>::value,
                "worker_registry: the entries are built in a loop that must not throw.");
  static constexpr std::size_t chunks = sizeof(std::size_t) * 8;
  static constexpr std::size_t chunk_size(std::size_t c) noexcept { return std::size_t(1) << c; }

  Atom<Worker*> chunk_[chunks];
  Atom<std::size_t> size_{0};
};

} // namespace detail
} // namespace async

#endif // ASYNC_DETAIL_POOL_WORKER_REGISTRY_H
