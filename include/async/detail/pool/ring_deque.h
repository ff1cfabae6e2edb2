// SPDX-License-Identifier: BSL-1.0
//
// ring_deque<T>: a double-ended queue in one circular buffer whose capacity (a power of two)
// doubles when it is full. The pool keeps its queues of tasks in it.
//
// Why not std::deque: std::deque allocates a 512-byte block every few elements as the queue
// moves along and frees the block behind it, so a queue that tasks pass through costs a
// malloc and a free every 6 tasks (80-byte tasks) for as long as they pass. The ring allocates
// only when it grows, and gives its buffer back when it runs empty from more than
// `keep_capacity` elements, so that a burst does not hold memory for good.
#ifndef ASYNC_DETAIL_POOL_RING_DEQUE_H
#define ASYNC_DETAIL_POOL_RING_DEQUE_H

#include "../config.h"

#include <cstddef>
#include <memory>
#include <new>
#include <type_traits>
#include <utility>

namespace async {
namespace detail {

/// Elements are indexed from the front (0) to the back (size() - 1). Growing moves the
/// elements (T's move constructor must not throw). Not thread-safe.
template <typename T>
class ring_deque {
  static_assert(std::is_nothrow_move_constructible<T>::value &&
                    std::is_nothrow_destructible<T>::value,
                "ring_deque<T>: T must be nothrow move constructible and destructible.");

public:
  /// An empty ring whose buffer exceeds this many elements is freed.
  static constexpr std::size_t keep_capacity = 1024;

  ring_deque() noexcept = default;
  ring_deque(const ring_deque&) = delete;
  ring_deque& operator=(const ring_deque&) = delete;
  ~ring_deque() {
    clear();
    release();
  }

  bool empty() const noexcept { return size_ == 0; }
  std::size_t size() const noexcept { return size_; }
  std::size_t capacity() const noexcept { return capacity_; }

  /// The element i places from the front (i < size()).
  T& operator[](std::size_t i) noexcept { return buffer_[(head_ + i) & (capacity_ - 1)]; }
  T& front() noexcept { return (*this)[0]; }
  T& back() noexcept { return (*this)[size_ - 1]; }

  /// Appends at the back. Throws std::bad_alloc when growing fails (nothing appended, the
  /// argument untouched).
  void push_back(T&& value) {
    if (size_ == capacity_) {
      grow(size_ + 1);
    }
    ::new (static_cast<void*>(buffer_ + ((head_ + size_) & (capacity_ - 1)))) T(std::move(value));
    ++size_;
  }

  /// Inserts at the front. Throws as push_back.
  void push_front(T&& value) {
    if (size_ == capacity_) {
      grow(size_ + 1);
    }
    const std::size_t at = (head_ + capacity_ - 1) & (capacity_ - 1);
    ::new (static_cast<void*>(buffer_ + at)) T(std::move(value));
    head_ = at;
    ++size_;
  }

  /// Removes the front element (the ring must not be empty).
  void pop_front() noexcept { drop_front(1); }

  /// Removes the back element (the ring must not be empty).
  void pop_back() noexcept {
    back().~T();
    --size_;
    if (size_ == 0) {
      emptied();
    }
  }

  /// Removes the first n elements (n <= size()).
  void drop_front(std::size_t n) noexcept {
    for (std::size_t i = 0; i < n; ++i) {
      buffer_[head_].~T();
      head_ = (head_ + 1) & (capacity_ - 1);
    }
    size_ -= n;
    if (size_ == 0) {
      emptied();
    }
  }

  /// Removes every element.
  void clear() noexcept { drop_front(size_); }

  /// Makes room for `n` elements in all, so that pushes up to that size cannot throw. Throws
  /// std::bad_alloc (nothing changed).
  void reserve(std::size_t n) {
    if (n > capacity_) {
      grow(n);
    }
  }

  void swap(ring_deque& other) noexcept {
    std::swap(buffer_, other.buffer_);
    std::swap(capacity_, other.capacity_);
    std::swap(head_, other.head_);
    std::swap(size_, other.size_);
  }

private:
  // At least `needed` elements' room, a power of two; the elements move to the new buffer's
  // start.
  void grow(std::size_t needed) {
    std::size_t capacity = capacity_ == 0 ? 8 : capacity_;
    while (capacity < needed) {
      capacity *= 2;
    }
    T* fresh = std::allocator<T>().allocate(capacity);
    for (std::size_t i = 0; i < size_; ++i) {
      T& from = (*this)[i];
      ::new (static_cast<void*>(fresh + i)) T(std::move(from));
      from.~T();
    }
    release();
    buffer_ = fresh;
    capacity_ = capacity;
    head_ = 0;
  }

  void emptied() noexcept {
    head_ = 0;
    if (capacity_ > keep_capacity) {
      release();
    }
  }

  void release() noexcept {
    if (buffer_ != nullptr) {
      std::allocator<T>().deallocate(buffer_, capacity_);
      buffer_ = nullptr;
      capacity_ = 0;
    }
  }

  T* buffer_ = nullptr;
  std::size_t capacity_ = 0; // 0 or a power of two
  std::size_t head_ = 0;     // index in buffer_ of the front element
  std::size_t size_ = 0;
};

#if ASYNC_CPLUSPLUS < 17
template <typename T>
constexpr std::size_t ring_deque<T>::keep_capacity;
#endif

} // namespace detail
} // namespace async

#endif // ASYNC_DETAIL_POOL_RING_DEQUE_H
