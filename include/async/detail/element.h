// SPDX-License-Identifier: BSL-1.0
//
// The element side of both queues, written once:
//   element_storage<T>   raw storage for one T, constructed and destroyed by hand
//   slot<T, Word, Atom>  a state word (the queue defines its values) and an element_storage
//   construct_or_hole    construction that leaves a hole for the consumer when T's constructor
//                        throws, and then rethrows or (NOEXCEPT_CHECK) reports false
//                        (slot::emplace for a slot)
//   holder<T>            an element held aside in storage of its own
#ifndef ASYNC_DETAIL_ELEMENT_H
#define ASYNC_DETAIL_ELEMENT_H

#include "config.h"

#include "relocate.h"

#include <atomic>
#include <new>
#include <type_traits>
#include <utility>

namespace async {
namespace detail {

/// Uninitialized storage for one T. Whoever owns the storage at the moment (by the queue's
/// protocol) constructs, reads and destroys the element. Not thread-safe by itself.
template <typename T>
class element_storage {
public:
  template <typename... Args>
  T* construct(Args&&... args) {
    return ::new (static_cast<void*>(bytes_)) T(std::forward<Args>(args)...);
  }

  /// Constructs the element from `from`, moved, or copied when T is copy-only.
  T* relocate_from(T& from) {
    return detail::construct_relocated(static_cast<void*>(bytes_), from);
  }

  /// The element (constructed). Under C++17 laundered: the storage is reused by many elements.
  T* get() noexcept {
#if ASYNC_CPLUSPLUS >= 17
    return std::launder(reinterpret_cast<T*>(bytes_));
#else
    return reinterpret_cast<T*>(bytes_);
#endif
  }

  void destroy() noexcept { get()->~T(); }

private:
  alignas(T) unsigned char bytes_[sizeof(T)];
};

template <bool Catch, typename T, typename Hole, typename... Args>
bool construct_or_hole_as(std::true_type /*nothrow*/, element_storage<T>& storage, Hole&,
                          Args&&... args) noexcept {
  storage.construct(std::forward<Args>(args)...);
  return true;
}

template <bool Catch, typename T, typename Hole, typename... Args>
bool construct_or_hole_as(std::false_type /*may throw*/, element_storage<T>& storage, Hole& hole,
                          Args&&... args) {
  try {
    storage.construct(std::forward<Args>(args)...);
  } catch (...) {
    hole();
    if (Catch) {
      return false;
    }
    throw;
  }
  return true;
}

/// Constructs an element in `storage` from `args`. True when it was built. When T's constructor
/// throws, hole() runs first (the queue marks the element's slot so that its consumer passes
/// it), then the exception propagates or, with Catch (the traits' NOEXCEPT_CHECK), the call
/// returns false.
template <bool Catch, typename T, typename Hole, typename... Args>
bool construct_or_hole(element_storage<T>& storage, Hole&& hole, Args&&... args) {
  return construct_or_hole_as<Catch>(
      std::integral_constant<bool, std::is_nothrow_constructible<T, Args&&...>::value>(), storage,
      hole, std::forward<Args>(args)...);
}

/// A slot of a queue: a state word that says who owns the element storage next to it, written
/// with the atomic type template Atom (std::atomic; tests put a scheduled one in).
template <typename T, typename Word, template <typename> class Atom = std::atomic>
struct slot {
  Atom<Word> state{Word(0)};
  element_storage<T> element;

  /// Constructs the element from `args`: see construct_or_hole above.
  template <bool Catch, typename Hole, typename... Args>
  bool emplace(Hole&& hole, Args&&... args) {
    return construct_or_hole<Catch>(element, hole, std::forward<Args>(args)...);
  }
};

/// An element held aside, in storage of its own (a producer of the unbounded queue carries the
/// element of a slot that its consumer skipped to a later slot). Not thread-safe.
template <typename T>
class holder {
public:
  holder() = default;
  holder(const holder&) = delete;
  holder& operator=(const holder&) = delete;
  ~holder() { reset(); }

  bool engaged() const noexcept { return value_ != nullptr; }
  T& get() noexcept { return *value_; }

  /// Holds an element relocated (moved, or copied if T is copy-only) from `from`.
  void take_from(T& from) {
    reset();
    value_ = storage_.relocate_from(from);
  }

  void reset() noexcept {
    if (value_ != nullptr) {
      value_->~T();
      value_ = nullptr;
    }
  }

private:
  // The element when there is one: the pointer that construction returned (reading through it,
  // rather than through the raw storage, also keeps g++ -O2 from a false "maybe uninitialized"
  // warning).
  T* value_ = nullptr;
  element_storage<T> storage_;
};

} // namespace detail
} // namespace async

#endif // ASYNC_DETAIL_ELEMENT_H
