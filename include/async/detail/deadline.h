// SPDX-License-Identifier: BSL-1.0
//
// Deadlines for the timed calls: the waiting clock, now + any std::chrono duration (saturating
// where it would overflow, so that duration::max() waits for ever), a time point of any clock on
// that clock, and a condition-variable wait that takes the "no deadline" value.
#ifndef ASYNC_DETAIL_DEADLINE_H
#define ASYNC_DETAIL_DEADLINE_H

#include "config.h"

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <ratio>
#include <type_traits>

namespace async {
namespace detail {

using wait_clock = std::chrono::steady_clock;

/// The deadline that park() reads as "no deadline at all".
constexpr wait_clock::time_point no_deadline() noexcept { return (wait_clock::time_point::max)(); }

// d on the waiting clock, for a d that fits there: duration_cast where the conversion only
// multiplies or only divides (no step then exceeds the result), long double where it does both.
template <typename Rep, typename Period>
wait_clock::duration to_wait_duration(const std::chrono::duration<Rep, Period>& d, std::true_type) {
  return std::chrono::duration_cast<wait_clock::duration>(d);
}

template <typename Rep, typename Period>
wait_clock::duration to_wait_duration(const std::chrono::duration<Rep, Period>& d,
                                      std::false_type) {
  using precise = std::chrono::duration<long double, wait_clock::period>;
  return std::chrono::duration_cast<wait_clock::duration>(std::chrono::duration_cast<precise>(d));
}

/// now + timeout on the waiting clock (timed calls take any std::chrono duration, integral or
/// floating). A timeout too large to add to now (duration::max() of any unit, hours::max(), a
/// huge floating count) saturates to no_deadline(): the call waits as long as it must, it does
/// not overflow into the past and give up at once. Zero and negative timeouts give now.
template <typename Rep, typename Period>
wait_clock::time_point deadline_after(const std::chrono::duration<Rep, Period>& timeout) {
  const wait_clock::time_point now = wait_clock::now();
  if (timeout <= std::chrono::duration<Rep, Period>::zero()) {
    return now;
  }
  // Compared in floating point, where no unit conversion can overflow; the margin of a
  // millisecond covers the rounding of a double near 2^63 nanoseconds.
  using seconds_f = std::chrono::duration<long double>;
  const seconds_f room = std::chrono::duration_cast<seconds_f>(no_deadline() - now);
  if (std::chrono::duration_cast<seconds_f>(timeout) >= room - seconds_f(1e-3L)) {
    return no_deadline();
  }
  // Where the conversion both multiplies and divides (a unit such as 1001/30000 s), duration_cast
  // multiplies first and can overflow for a timeout that fits: that one goes through long double.
  using factor = std::ratio_divide<Period, wait_clock::period>;
  using exact = std::integral_constant<bool, factor::num == 1 || factor::den == 1>;
  return now + to_wait_duration(timeout, exact{});
}

/// The deadline on the waiting clock for the time point `until` of any clock. Computed in
/// floating point, so that time points far away of any unit saturate as deadline_after's
/// timeouts do: max() waits as long as it must, min() (or any past point) only looks.
template <typename Clock, typename Duration>
wait_clock::time_point deadline_at(const std::chrono::time_point<Clock, Duration>& until) {
  using seconds_f = std::chrono::duration<long double>;
  const seconds_f left = std::chrono::duration_cast<seconds_f>(until.time_since_epoch()) -
                         std::chrono::duration_cast<seconds_f>(Clock::now().time_since_epoch());
  return deadline_after(left);
}

/// cv.wait_until(lock, deadline), where no_deadline() waits without a timeout:
/// wait_until(time_point::max()) overflows inside some standard libraries. Returns false on
/// timeout. (Like wait_until, it may also return on a spurious wake-up.)
inline bool cv_wait_until(std::condition_variable& cv, std::unique_lock<std::mutex>& lock,
                          wait_clock::time_point deadline) {
  if (deadline == no_deadline()) {
    cv.wait(lock);
    return true;
  }
  return cv.wait_until(lock, deadline) == std::cv_status::no_timeout;
}

} // namespace detail
} // namespace async

#endif // ASYNC_DETAIL_DEADLINE_H
