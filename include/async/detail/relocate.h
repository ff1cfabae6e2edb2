// SPDX-License-Identifier: BSL-1.0
//
// Moving an element from one place to another when T may be copy-only: a type whose move
// constructor or move assignment is deleted while its copy is usable (the original library's
// tests use one). Such a T is copied where the queues would move it; every other T is moved.
#ifndef ASYNC_DETAIL_RELOCATE_H
#define ASYNC_DETAIL_RELOCATE_H

#include "config.h"

#include <new>
#include <type_traits>
#include <utility>

namespace async {
namespace detail {

/// Constructs a T at `where` from `from`, moving if T can be built from an rvalue, copying
/// otherwise. Returns the new object.
template <typename T>
T* construct_relocated(void* where, T& from, std::true_type /*movable*/) {
  return ::new (where) T(std::move(from));
}
template <typename T>
T* construct_relocated(void* where, T& from, std::false_type /*copy-only*/) {
  return ::new (where) T(static_cast<const T&>(from));
}
template <typename T>
T* construct_relocated(void* where, T& from) {
  return detail::construct_relocated(where, from, std::is_constructible<T, T&&>());
}

/// `to = from`, moving when the target takes an rvalue and T is movable, copying otherwise (a
/// copy-only T goes through a back_inserter by copy too). A T that can be neither copied nor
/// move-constructed, only move-assigned (bounded_queue accepts one, as the original did), is
/// moved.
template <typename To, typename T>
void assign_relocated(To&& to, T& from, std::true_type /*move*/) {
  std::forward<To>(to) = std::move(from);
}
template <typename To, typename T>
void assign_relocated(To&& to, T& from, std::false_type /*copy*/) {
  std::forward<To>(to) = static_cast<const T&>(from);
}
template <typename To, typename T>
void assign_relocated(To&& to, T& from) {
  using move = std::integral_constant<bool, std::is_assignable<To&&, T&&>::value &&
                                                (std::is_constructible<T, T&&>::value ||
                                                 !std::is_assignable<To&&, const T&>::value)>;
  detail::assign_relocated(std::forward<To>(to), from, move());
}

} // namespace detail
} // namespace async

#endif // ASYNC_DETAIL_RELOCATE_H
