// SPDX-License-Identifier: BSL-1.0
//
// Cache-line facts and the tools that keep hot data apart:
//   cache_line_size          the false-sharing granule (ASYNC_CACHE_LINE_SIZE, see config.h)
//   padded<V, Line>          a V with a line of padding on each side
//   aligned_allocate/free    over-aligned heap memory that also works in C++14, where operator
//                            new ignores alignments above alignof(std::max_align_t)
#ifndef ASYNC_DETAIL_CACHE_H
#define ASYNC_DETAIL_CACHE_H

#include "config.h"

#include <atomic>
#include <cassert>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <new>
#include <type_traits>
#include <utility>

namespace async {
namespace detail {

/// The distance in bytes that keeps two independently written variables from sharing a line.
/// Deliberately not std::hardware_destructive_interference_size: that is C++17-only, differs
/// between compilers for the same target, and g++ warns when it is used in a header.
constexpr std::size_t cache_line_size = ASYNC_CACHE_LINE_SIZE;

static_assert((cache_line_size & (cache_line_size - 1)) == 0,
              "cache_line_size must be a power of two.");
static_assert(cache_line_size >= alignof(std::max_align_t),
              "cache_line_size must be at least the fundamental alignment.");

/// True when `p` is a multiple of `alignment` (a power of two). Thread-safe.
inline bool is_aligned(const void* p, std::size_t alignment) noexcept {
  return (reinterpret_cast<std::uintptr_t>(p) & (alignment - 1)) == 0;
}

/// Allocates `size` bytes aligned to `alignment` (a power of two, any size). Throws
/// std::bad_alloc when memory is exhausted; an alignment that is not a power of two is a
/// programming error caught by assert. Release with aligned_free. Thread-safe.
///
/// Works in C++14, where `new` ignores over-alignment: it over-allocates with malloc and keeps
/// the original pointer in the word just below the returned block.
inline void* aligned_allocate(std::size_t size, std::size_t alignment) {
  assert(alignment != 0 && (alignment & (alignment - 1)) == 0 && "alignment must be 2^k");
  if (alignment < alignof(void*)) {
    alignment = alignof(void*);
  }
  const std::size_t overhead = alignment - 1 + sizeof(void*);
  if (size > (std::numeric_limits<std::size_t>::max)() - overhead) {
    throw std::bad_alloc();
  }
  void* raw = std::malloc(size + overhead);
  if (raw == nullptr) {
    throw std::bad_alloc();
  }
  const std::uintptr_t first = reinterpret_cast<std::uintptr_t>(raw) + sizeof(void*);
  const std::uintptr_t aligned = (first + alignment - 1) & ~(std::uintptr_t(alignment) - 1);
  void* result = reinterpret_cast<void*>(aligned);
  static_cast<void**>(result)[-1] = raw;
  assert(is_aligned(result, alignment));
  return result;
}

/// Releases memory from aligned_allocate; nullptr is ignored. Thread-safe.
inline void aligned_free(void* p) noexcept {
  if (p != nullptr) {
    std::free(static_cast<void**>(p)[-1]);
  }
}

/// A V with at least one cache line of padding on each side, so that nothing another thread
/// writes shares a line with it (the library's one padding type: counters, hints, test and
/// benchmark variables). Padding rather than alignas: an over-aligned member would make the
/// enclosing class over-aligned, and `new` of such a class ignores the alignment in C++14
/// (g++ warns under -Waligned-new). `Line` is the granule (a queue's Traits may set its own).
template <typename V, std::size_t Line = cache_line_size>
struct padded {
  static_assert(Line != 0 && (Line & (Line - 1)) == 0, "padded: Line must be a power of two.");

  padded() : value() {}
  template <typename... Args>
  explicit padded(Args&&... args) : value(std::forward<Args>(args)...) {}

  char before[Line];
  V value;
  // A whole line: the next member starts at least Line bytes after the value ends, so no
  // aligned line holds both (the earlier Line - sizeof(V) % Line left 120 bytes after an
  // 8-byte value: a line could hold its last byte and the next member's first).
  char after[Line];
};

/// Where the value of a padded<V, Line> member that starts at byte `offset` of its class lies:
/// for the layout checks of the classes whose padding is the point (a static_assert on the
/// distance between their hot counters, as rigtorp's MPMCQueue makes between its head and
/// tail).
template <typename V, std::size_t Line>
constexpr std::size_t padded_value_at(std::size_t offset) noexcept {
  using whole = padded<V, Line>; // offsetof is a macro: no comma in its first argument
  return offset + offsetof(whole, value);
}

} // namespace detail
} // namespace async

#endif // ASYNC_DETAIL_CACHE_H
