// SPDX-License-Identifier: BSL-1.0
// The reference ring: the plain bounded MPMC queue of Dmitry Vyukov's published algorithm (the
// family of rigtorp's MPMCQueue), written here from its description, as the yardstick of
// async::bounded_queue's fast path (issue #51). Every cell carries a sequence number; a caller
// claims a position with a CAS on its side's counter once the cell's number says the cell is
// its turn, then hands the cell over with one release store of the next number. Nothing else:
// no close, no parking, no holes for throwing constructors, cells side by side in memory. Its
// waiting calls spin on the try calls (the harness's retry), as atomic_queue's do.
#ifndef ASYNC_BENCH_ADAPTERS_REFERENCE_RING_H
#define ASYNC_BENCH_ADAPTERS_REFERENCE_RING_H

#include "retrying.h"

#include <async/detail/cache.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <type_traits>
#include <utility>

namespace async_bench {

/// Vyukov's bounded MPMC ring. The algorithm wants a power of two of at least 2 cells (a mask
/// picks the cell, and the turns of two laps must differ): another capacity is rounded up to
/// one, so at such capacities the reference holds a little more than the queues it is set
/// against. Thread-safe (lock-free).
template <typename T>
class reference_ring {
public:
  explicit reference_ring(std::size_t capacity)
      : mask_(cells_for(capacity) - 1), cells_(new cell[mask_ + 1]) {
    for (std::size_t i = 0; i <= mask_; ++i) {
      cells_[i].turn.store(i, std::memory_order_relaxed); // cell i: free for position i
    }
  }
  reference_ring(const reference_ring&) = delete;
  reference_ring& operator=(const reference_ring&) = delete;

  ~reference_ring() {
    // The full cells are those between the two counters.
    const std::size_t head = head_.value.load(std::memory_order_relaxed);
    const std::size_t tail = tail_.value.load(std::memory_order_relaxed);
    for (std::size_t p = head; p != tail; ++p) {
      cells_[p & mask_].value()->~T();
    }
  }

  template <typename U>
  bool try_push(U&& v) {
    std::size_t pos = tail_.value.load(std::memory_order_relaxed);
    for (;;) {
      cell& c = cells_[pos & mask_];
      // acquire: the consumer of the previous lap has moved its element out.
      const std::size_t turn = c.turn.load(std::memory_order_acquire);
      const auto d = static_cast<std::ptrdiff_t>(turn - pos);
      if (d == 0) {
        if (tail_.value.compare_exchange_weak(pos, pos + 1, std::memory_order_relaxed,
                                              std::memory_order_relaxed)) {
          // No hole on a throw: a constructor that threw here would leave the cell at its old
          // turn, and the ring would stop there. The bench's elements (an integer, a trivial
          // struct, a moved std::string) do not throw; bounded_queue pays for holes, this
          // yardstick does not.
          ::new (c.storage()) T(std::forward<U>(v));
          c.turn.store(pos + 1, std::memory_order_release); // full for position pos
          return true;
        }
      } else if (d < 0) {
        return false; // the cell still holds the previous lap: full
      } else {
        pos = tail_.value.load(std::memory_order_relaxed); // another producer took pos
      }
    }
  }

  bool try_pop(T& out) {
    std::size_t pos = head_.value.load(std::memory_order_relaxed);
    for (;;) {
      cell& c = cells_[pos & mask_];
      // acquire: the producer of pos has constructed its element.
      const std::size_t turn = c.turn.load(std::memory_order_acquire);
      const auto d = static_cast<std::ptrdiff_t>(turn - (pos + 1));
      if (d == 0) {
        if (head_.value.compare_exchange_weak(pos, pos + 1, std::memory_order_relaxed,
                                              std::memory_order_relaxed)) {
          T* v = c.value();
          out = std::move(*v);
          v->~T();
          c.turn.store(pos + mask_ + 1, std::memory_order_release); // free for the next lap
          return true;
        }
      } else if (d < 0) {
        return false; // not yet published: empty
      } else {
        pos = head_.value.load(std::memory_order_relaxed); // another consumer took pos
      }
    }
  }

private:
  static std::size_t cells_for(std::size_t capacity) {
    std::size_t n = 2;
    while (n < capacity) {
      n *= 2;
    }
    return n;
  }

  struct cell {
    std::atomic<std::size_t> turn{0};
    typename std::aligned_storage<sizeof(T), alignof(T)>::type bytes;
    void* storage() noexcept { return &bytes; }
    T* value() noexcept { return std::launder(reinterpret_cast<T*>(&bytes)); }
  };

  const std::size_t mask_;
  const std::unique_ptr<cell[]> cells_;
  async::detail::padded<std::atomic<std::size_t>> tail_;
  async::detail::padded<std::atomic<std::size_t>> head_;
};

/// The reference ring's try calls.
template <typename T>
struct reference_ring_try : retrying_adapter<reference_ring_try<T>, reference_ring<T>, T> {
  using queue = reference_ring<T>;
  static const char* name() { return "reference ring try"; }
  static constexpr bool bounded = true;
  static bool try_push(queue& q, T& v) { return q.try_push(std::move(v)); }
  static bool try_pop(queue& q, T& v) { return q.try_pop(v); }
};

/// The same ring with waiting calls that spin on the try calls: the peer of the blocking calls
/// (a waiting call of the plain algorithm, with no parking to pay for). It says `blocking`
/// although it waits in the harness's retry, not inside the queue as the registry defines the
/// word, so that the tables set it against our blocking calls.
template <typename T>
struct reference_ring_spin : retrying_adapter<reference_ring_spin<T>, reference_ring<T>, T> {
  using queue = reference_ring<T>;
  static const char* name() { return "reference ring"; }
  static constexpr bool bounded = true;
  static constexpr bool blocking = true;
  static constexpr bool primary = false;
  static bool try_push(queue& q, T& v) { return q.try_push(std::move(v)); }
  static bool try_pop(queue& q, T& v) { return q.try_pop(v); }
};

} // namespace async_bench

#define ASYNC_BENCH_QUEUES_REFERENCE_RING                                                          \
  async_bench::reference_ring_spin<T>, async_bench::reference_ring_try<T>,

#endif
