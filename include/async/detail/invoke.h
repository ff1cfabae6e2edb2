// SPDX-License-Identifier: BSL-1.0
//
// invoke / invoke_result_t / is_invocable: C++14 versions of std::invoke and its traits (member
// function and data pointers called through an object, a reference_wrapper, a raw or a smart
// pointer), used to give post() exactly the semantics and result type of std::async.
#ifndef ASYNC_DETAIL_INVOKE_H
#define ASYNC_DETAIL_INVOKE_H

#include "config.h"

#include "traits.h"

#include <functional>
#include <type_traits>
#include <utility>

namespace async {
namespace detail {

// ---- invoke -------------------------------------------------------------------------------------

template <typename T>
struct is_reference_wrapper : std::false_type {};
template <typename U>
struct is_reference_wrapper<std::reference_wrapper<U>> : std::true_type {};

// Pointer to member function, called on an object of (a class derived from) C.
template <typename C, typename Pointer, typename Object, typename... Args,
          typename std::enable_if<std::is_member_function_pointer<Pointer C::*>::value &&
                                      std::is_base_of<C, typename std::decay<Object>::type>::value,
                                  int>::type = 0>
auto invoke_member(Pointer C::*pm, Object&& obj, Args&&... args)
    -> decltype((std::forward<Object>(obj).*pm)(std::forward<Args>(args)...)) {
  return (std::forward<Object>(obj).*pm)(std::forward<Args>(args)...);
}

// ... through a reference_wrapper.
template <
    typename C, typename Pointer, typename Object, typename... Args,
    typename std::enable_if<std::is_member_function_pointer<Pointer C::*>::value &&
                                is_reference_wrapper<typename std::decay<Object>::type>::value,
                            int>::type = 0>
auto invoke_member(Pointer C::*pm, Object&& obj, Args&&... args)
    -> decltype((obj.get().*pm)(std::forward<Args>(args)...)) {
  return (obj.get().*pm)(std::forward<Args>(args)...);
}

// ... through a raw or smart pointer.
template <
    typename C, typename Pointer, typename Object, typename... Args,
    typename std::enable_if<std::is_member_function_pointer<Pointer C::*>::value &&
                                !std::is_base_of<C, typename std::decay<Object>::type>::value &&
                                !is_reference_wrapper<typename std::decay<Object>::type>::value,
                            int>::type = 0>
auto invoke_member(Pointer C::*pm, Object&& obj, Args&&... args)
    -> decltype(((*std::forward<Object>(obj)).*pm)(std::forward<Args>(args)...)) {
  return ((*std::forward<Object>(obj)).*pm)(std::forward<Args>(args)...);
}

// Pointer to data member.
template <typename C, typename Pointer, typename Object,
          typename std::enable_if<!std::is_member_function_pointer<Pointer C::*>::value &&
                                      std::is_base_of<C, typename std::decay<Object>::type>::value,
                                  int>::type = 0>
auto invoke_member(Pointer C::*pm, Object&& obj) -> decltype(std::forward<Object>(obj).*pm) {
  return std::forward<Object>(obj).*pm;
}

template <
    typename C, typename Pointer, typename Object,
    typename std::enable_if<!std::is_member_function_pointer<Pointer C::*>::value &&
                                is_reference_wrapper<typename std::decay<Object>::type>::value,
                            int>::type = 0>
auto invoke_member(Pointer C::*pm, Object&& obj) -> decltype(obj.get().*pm) {
  return obj.get().*pm;
}

template <
    typename C, typename Pointer, typename Object,
    typename std::enable_if<!std::is_member_function_pointer<Pointer C::*>::value &&
                                !std::is_base_of<C, typename std::decay<Object>::type>::value &&
                                !is_reference_wrapper<typename std::decay<Object>::type>::value,
                            int>::type = 0>
auto invoke_member(Pointer C::*pm, Object&& obj) -> decltype((*std::forward<Object>(obj)).*pm) {
  return (*std::forward<Object>(obj)).*pm;
}

template <typename F, typename... Args,
          typename std::enable_if<std::is_member_pointer<typename std::decay<F>::type>::value,
                                  int>::type = 0>
auto invoke(F&& f, Args&&... args)
    -> decltype(detail::invoke_member(f, std::forward<Args>(args)...)) {
  return detail::invoke_member(f, std::forward<Args>(args)...);
}

template <typename F, typename... Args,
          typename std::enable_if<!std::is_member_pointer<typename std::decay<F>::type>::value,
                                  int>::type = 0>
auto invoke(F&& f, Args&&... args) -> decltype(std::forward<F>(f)(std::forward<Args>(args)...)) {
  return std::forward<F>(f)(std::forward<Args>(args)...);
}

template <typename F, typename... Args>
using invoke_result_t = decltype(detail::invoke(std::declval<F>(), std::declval<Args>()...));

template <typename Void, typename F, typename... Args>
struct invocable_impl : std::false_type {};
template <typename F, typename... Args>
struct invocable_impl<void_t<invoke_result_t<F, Args...>>, F, Args...> : std::true_type {};

/// Whether detail::invoke(F, Args...) is well-formed.
template <typename F, typename... Args>
using is_invocable = invocable_impl<void, F, Args...>;

} // namespace detail
} // namespace async

#endif // ASYNC_DETAIL_INVOKE_H
