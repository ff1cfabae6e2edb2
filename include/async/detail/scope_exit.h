// SPDX-License-Identifier: BSL-1.0
//
// at_scope_exit(f): runs f when the scope ends, by return or by exception.
#ifndef ASYNC_DETAIL_SCOPE_EXIT_H
#define ASYNC_DETAIL_SCOPE_EXIT_H

#include "config.h"

#include <utility>

namespace async {
namespace detail {

/// Runs a function when the scope ends, by return or by exception: a slot is left (its
/// element destroyed, the slot handed on) whatever happens to the element on its way out.
template <typename F>
class scope_exit {
public:
  explicit scope_exit(F f) : f_(std::move(f)) {}
  scope_exit(scope_exit&& other) : f_(std::move(other.f_)), armed_(other.armed_) {
    other.armed_ = false;
  }
  scope_exit(const scope_exit&) = delete;
  scope_exit& operator=(const scope_exit&) = delete;
  scope_exit& operator=(scope_exit&&) = delete;
  ~scope_exit() {
    if (armed_) {
      f_();
    }
  }

private:
  F f_;
  bool armed_ = true;
};

template <typename F>
scope_exit<F> at_scope_exit(F f) {
  return scope_exit<F>(std::move(f));
}

} // namespace detail
} // namespace async

#endif // ASYNC_DETAIL_SCOPE_EXIT_H
