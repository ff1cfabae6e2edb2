// SPDX-License-Identifier: BSL-1.0
// The element types a queue scenario can move (--async_type): every value the harness sends
// carries a 64-bit key (its producer and its place in that producer's order), and each element
// type wraps that key in its own way, so that the same checks (sum, per-producer FIFO) run for
// all of them, and a torn or mixed-up element is caught too.
#ifndef ASYNC_BENCH_COMMON_ELEMENTS_H
#define ASYNC_BENCH_COMMON_ELEMENTS_H

#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>

namespace async_bench {

/// A 64-byte trivially copyable message: the key and seven words derived from it (a copy torn
/// between two messages, or a stale one, fails the check).
struct payload64 {
  std::uint64_t key;
  std::uint64_t check[7];
};
static_assert(sizeof(payload64) == 64, "payload64 is 64 bytes");
static_assert(std::is_trivially_copyable<payload64>::value, "payload64 is trivially copyable");

/// How an element type carries a key: make(key) builds one, key_of(element, key) reads it back
/// and says whether the element is whole.
template <typename T>
struct element;

template <>
struct element<std::uint64_t> {
  static const char* name() { return "uint64_t"; }
  static std::uint64_t make(std::uint64_t key) { return key; }
  static bool key_of(const std::uint64_t& e, std::uint64_t& key) {
    key = e;
    return true;
  }
};

template <>
struct element<payload64> {
  static const char* name() { return "64-byte struct"; }
  static std::uint64_t word(std::uint64_t key, int i) {
    return key * 0x9e3779b97f4a7c15ULL + static_cast<std::uint64_t>(i);
  }
  static payload64 make(std::uint64_t key) {
    payload64 p;
    p.key = key;
    for (int i = 0; i < 7; ++i) {
      p.check[i] = word(key, i);
    }
    return p;
  }
  static bool key_of(const payload64& e, std::uint64_t& key) {
    key = e.key;
    for (int i = 0; i < 7; ++i) {
      if (e.check[i] != word(key, i)) {
        return false;
      }
    }
    return true;
  }
};

/// A string of 24 characters: the key in 16 hex digits and a fixed tail. libstdc++ keeps up to
/// 15 characters inside the object (32 bytes), so each of these owns a heap block: a producer
/// allocates it, a consumer frees it, as with a real message text.
template <>
struct element<std::string> {
  static const char* name() { return "std::string"; }
  static constexpr std::size_t length = 24;
  static std::string make(std::uint64_t key) {
    static const char digits[] = "0123456789abcdef";
    std::string s(length, '.');
    for (int i = 0; i < 16; ++i) {
      s[static_cast<std::size_t>(15 - i)] = digits[(key >> (4 * i)) & 0xf];
    }
    s.replace(16, 8, "/message");
    return s;
  }
  static bool key_of(const std::string& e, std::uint64_t& key) {
    key = 0;
    if (e.size() != length || e.compare(16, 8, "/message") != 0) {
      return false;
    }
    for (std::size_t i = 0; i < 16; ++i) {
      const char c = e[i];
      const int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
      if (d < 0) {
        return false;
      }
      key = key << 4 | static_cast<std::uint64_t>(d);
    }
    return true;
  }
};

} // namespace async_bench

#endif
