// SPDX-License-Identifier: BSL-1.0
//
// ring_layout: where a ring of slots keeps the slot of each logical index, so that tickets
// taken one after the other fall on different cache lines, and yet a short run of tickets
// stays within a few lines.
//
// The ring is cut into blocks of `spread` lines of `per_line` slots each, and each block is
// spread as detail/spread.h says: inside a block the logical index k lives on line k % spread,
// at position k / spread on that line, so `spread` threads holding neighbouring tickets write
// `spread` different lines, and a line is used again `spread` tickets later, while the core that
// used it last most likely still holds it. A ring whose length is not a multiple of the block
// transposes its last, partial block over `spread` lines as well (padded: a few unused slots).
//
// Why blocks: the first layout transposed the whole ring (index k on line k % lines), which
// spreads neighbours just as well but comes back to a line only after capacity / per_line
// tickets. With a ring larger than a core's cache, every operation then fetched a line from
// far away: one producer and one consumer at capacity 65536 ran at 0.65-0.72x atomic_queue on
// the 2-core VM, and at 1.0-1.3x with blocks of 16 lines; blocks of 8, 32 or 64 lines measured
// alike, 16 keeps 16 threads with neighbouring tickets apart (docs/implementation.md).
#ifndef ASYNC_DETAIL_BOUNDED_RING_LAYOUT_H
#define ASYNC_DETAIL_BOUNDED_RING_LAYOUT_H

#include "../config.h"

#include "../spread.h"

#include <cstddef>

namespace async {
namespace detail {

/// How many slots of `slot_bytes` a line of `line_bytes` holds, rounded down to a power of two
/// (at least 1).
constexpr std::size_t slots_per_line(std::size_t slot_bytes, std::size_t line_bytes) noexcept {
  std::size_t n = 1;
  while (n * 2 * slot_bytes <= line_bytes) {
    n *= 2;
  }
  return n;
}

/// The mapping from logical index (0 <= k < capacity) to physical slot. Immutable after
/// construction; thread-safe to read.
class ring_layout {
public:
  /// The most lines one block spreads over: as many threads holding neighbouring tickets write
  /// different lines.
  static constexpr std::size_t max_spread = 16;

  /// `capacity` >= 1 logical slots; `slots_per_line` (a power of two) slots fit in one line; a
  /// block spreads over at most `most_lines` lines (a power of two up to max_spread; 1: no
  /// spreading, index k in slot k).
  ring_layout(std::size_t capacity, std::size_t slots_per_line,
              std::size_t most_lines = max_spread) noexcept {
    // A ring shorter than a line has nothing to spread.
    per_line_ = slots_per_line <= capacity ? slots_per_line : 1;
    const std::size_t lines = (capacity + per_line_ - 1) / per_line_;
    spread_ = 1;
    while (spread_ * 2 <= most_lines && spread_ * 2 <= lines) {
      spread_ *= 2;
    }
    line_shift_ = log2_of(per_line_);
    spread_shift_ = log2_of(spread_);
    block_ = spread_ * per_line_;
    blocked_ = capacity - capacity % block_;
    // The partial block spreads over as many lines as a whole one would (or one per index),
    // padded if need be: less than a block of slots, for neighbours on different lines there
    // too.
    const std::size_t rest = capacity - blocked_;
    rest_lines_ = rest < spread_ ? rest : spread_;
    slots_ = blocked_ + rest_lines_ * per_line_;
  }

  /// How many physical slots the ring needs: at least the capacity, less than a block more.
  std::size_t slot_count() const noexcept { return slots_; }

  /// The physical slot of logical index k (k < capacity).
  std::size_t physical(std::size_t k) const noexcept {
    if (ASYNC_LIKELY(k < blocked_)) {
      return (k & ~(block_ - 1)) | spread_index_pow2(k & (block_ - 1), spread_shift_, line_shift_);
    }
    const std::size_t j = k - blocked_;
    return blocked_ + spread_index(j, rest_lines_, per_line_);
  }

  /// The line (counted from the ring's start, in lines of per_line slots) of physical slot p.
  std::size_t line_of(std::size_t p) const noexcept { return p >> line_shift_; }

private:
  static std::size_t log2_of(std::size_t x) noexcept {
    std::size_t n = 0;
    while ((std::size_t(1) << n) < x) {
      ++n;
    }
    return n;
  }

  std::size_t per_line_ = 1;
  std::size_t spread_ = 1;
  std::size_t line_shift_ = 0;
  std::size_t spread_shift_ = 0;
  std::size_t block_ = 1;
  std::size_t blocked_ = 0;    // logical indices below this are in whole blocks
  std::size_t rest_lines_ = 0; // lines of the partial block at the end
  std::size_t slots_ = 0;
};

} // namespace detail
} // namespace async

#endif // ASYNC_DETAIL_BOUNDED_RING_LAYOUT_H
