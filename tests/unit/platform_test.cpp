// SPDX-License-Identifier: BSL-1.0
// The platform facts of detail/config.h and detail/cache.h, checked on every architecture the
// project is built for (natively on x86-64, and ARMv7/ARMv8 under qemu-user).
#include <async/bounded_queue.h>
#include <async/detail/backoff.h>
#include <async/detail/cache.h>
#include <async/detail/config.h>
#include <async/detail/ticket_counters.h>
#include <async/queue.h>

#include "async_catch.h"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#if defined(__linux__)
#include <sys/utsname.h>
#endif

namespace {

using async::detail::aligned_allocate;
using async::detail::aligned_free;
using async::detail::cache_line_size;
using async::detail::is_aligned;
using async::detail::padded;

// The value config.h must pick, derived here from the compiler's own macros rather than from
// ASYNC_ARCH_*, so that a wrong detection cannot agree with itself.
constexpr std::size_t expected_line_size() {
#if defined(__x86_64__) || defined(__aarch64__)
  return 128;
#else
  return 64;
#endif
}

} // namespace

TEST_CASE("the architecture is detected as the compiler targets it", "[platform]") {
  const std::string name = ASYNC_ARCH_NAME;
#if defined(__x86_64__)
  CHECK(name == "x86-64");
#elif defined(__aarch64__)
  CHECK(name == "aarch64");
  CHECK(sizeof(void*) == 8);
#elif defined(__arm__)
  CHECK(name == "arm");
  CHECK(sizeof(void*) == 4);
#endif

#if defined(__linux__)
  // The kernel (or qemu-user, which reports the emulated machine) must agree with the build:
  // this is what proves that a cross-built test really executes on the target architecture.
  utsname u{};
  REQUIRE(uname(&u) == 0);
  const std::string machine = u.machine;
  std::printf("platform_test: built for %s, running on %s, cache line %zu, C++%d\n",
              ASYNC_ARCH_NAME, u.machine, cache_line_size, ASYNC_CPLUSPLUS);
#if defined(__x86_64__)
  CHECK(machine == "x86_64");
#elif defined(__aarch64__)
  CHECK(machine == "aarch64");
#elif defined(__arm__)
  CHECK(machine.compare(0, 4, "armv") == 0);
#endif
#endif
}

TEST_CASE("cache_line_size has the per-architecture value", "[platform]") {
  STATIC_REQUIRE(cache_line_size == expected_line_size());
  STATIC_REQUIRE((cache_line_size & (cache_line_size - 1)) == 0);
  STATIC_REQUIRE(cache_line_size == ASYNC_CACHE_LINE_SIZE);
}

TEST_CASE("padded keeps a line free on each side of its value", "[platform]") {
  // A whole line before the value and a whole line after it (before 2026-11-28 the line after
  // was short by the value's size: a line could hold an 8-byte value's last byte and the next
  // member's first).
  constexpr std::size_t line = cache_line_size;
  STATIC_REQUIRE(async::detail::padded_value_at<char, line>(0) == line);
  STATIC_REQUIRE(sizeof(padded<char>) == 2 * line + 1);
  STATIC_REQUIRE(async::detail::padded_value_at<std::atomic<std::uint64_t>, line>(0) == line);
  STATIC_REQUIRE(sizeof(padded<std::atomic<std::uint64_t>>) == 2 * line + 8);
  STATIC_REQUIRE(sizeof(padded<char[cache_line_size]>) == 3 * line);
  STATIC_REQUIRE(async::detail::padded_value_at<std::uint32_t, 64>(0) == 64);
  STATIC_REQUIRE(sizeof(padded<std::uint32_t, 64>) == 132);
  // Not over-aligned: `new` of a class holding one is correct in C++14 too.
  STATIC_REQUIRE(alignof(padded<std::atomic<std::uint64_t>>) <= alignof(std::max_align_t));

  struct two_counters {
    padded<std::atomic<std::uint64_t>> a;
    padded<std::atomic<std::uint64_t>> b;
  };
  two_counters c;
  const auto a_at = reinterpret_cast<std::uintptr_t>(&c.a.value);
  const auto b_at = reinterpret_cast<std::uintptr_t>(&c.b.value);
  CHECK(b_at - (a_at + sizeof(c.a.value)) >= cache_line_size); // a whole line between them
  CHECK(c.a.value.load() == 0);                                // value-initialized

  padded<int> forwarded(42);
  CHECK(forwarded.value == 42);
}

// Both queues keep their tickets in detail::ticket_counters, which static_asserts that head and
// tail have lines of their own, with offsetof: it can do so only where it is a standard-layout
// class (with std::atomic; a test's atomic type may make it otherwise, and is then not checked).
// This keeps the check from switching itself off unnoticed, or the queues from leaving it.
TEST_CASE("both queues hold their tickets where the layout check runs", "[platform]") {
  using unbounded = async::detail::ticket_counters_for<async::traits, async::traits>;
  using bounded = async::detail::ticket_counters_for<async::bounded_traits, async::bounded_traits>;
  STATIC_REQUIRE(std::is_standard_layout<unbounded>::value);
  STATIC_REQUIRE(std::is_standard_layout<bounded>::value);
  STATIC_REQUIRE(std::is_base_of<unbounded, async::queue<std::string>>::value);
  STATIC_REQUIRE(std::is_base_of<unbounded, async::queue<std::uint64_t>>::value);
  STATIC_REQUIRE(std::is_base_of<bounded, async::bounded_queue<std::string>>::value);
  STATIC_REQUIRE(std::is_base_of<bounded, async::bounded_queue<std::uint64_t>>::value);
}

TEST_CASE("aligned_allocate honours any power-of-two alignment", "[platform]") {
  std::vector<void*> blocks;
  for (std::size_t alignment = 1; alignment <= 4096; alignment *= 2) {
    for (std::size_t size : {std::size_t(0), std::size_t(1), std::size_t(13), std::size_t(64),
                             std::size_t(1000), std::size_t(1) << 16}) {
      void* p = aligned_allocate(size, alignment);
      REQUIRE(p != nullptr);
      CHECK(is_aligned(p, alignment));
      std::memset(p, 0xA5, size); // the whole block is usable (ASan checks the bounds)
      blocks.push_back(p);
    }
  }
  for (void* p : blocks) {
    aligned_free(p);
  }
  aligned_free(nullptr); // a no-op, like free(nullptr)
}

TEST_CASE("aligned_allocate reports an impossible size instead of wrapping", "[platform]") {
  CHECK_THROWS_AS(aligned_allocate(static_cast<std::size_t>(-1), 64), std::bad_alloc);
}

TEST_CASE("is_aligned tells aligned from misaligned addresses", "[platform]") {
  alignas(64) unsigned char buffer[128];
  CHECK(is_aligned(buffer, 64));
  CHECK(is_aligned(buffer + 32, 32));
  CHECK_FALSE(is_aligned(buffer + 1, 2));
  CHECK_FALSE(is_aligned(buffer + 32, 64));
}

TEST_CASE("cpu_pause returns and lets a spin loop observe another thread", "[platform]") {
  // The primitive must be a real instruction on this architecture that returns (an illegal
  // encoding would kill the process under qemu with SIGILL), and a loop built on it must see a
  // store from another thread.
  for (int i = 0; i < 1000; ++i) {
    async::detail::cpu_pause();
  }

  std::atomic<bool> flag{false};
  std::uint64_t spins = 0;
  std::thread setter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    flag.store(true, std::memory_order_release);
  });
  const auto start = std::chrono::steady_clock::now();
  while (!flag.load(std::memory_order_acquire)) {
    async::detail::cpu_pause();
    ++spins;
  }
  const auto waited = std::chrono::steady_clock::now() - start;
  setter.join();
  // The loop ends, so the pause lets the load see the other thread's store (a loop that did
  // not would hang until the ctest TIMEOUT). How many rounds it took is not checked: on a
  // loaded machine this thread can be descheduled for the whole 5 ms and spin zero times.
  CHECK(waited < std::chrono::seconds(30));
  INFO(spins << " spins");
}

TEST_CASE("cpu_pause_name names this architecture's hint, and 64-bit atomics are lock-free",
          "[platform]") {
  // Derived from the compiler's macros again; the benchmarks print this line on every board.
  const std::string hint = async::detail::cpu_pause_name();
#if defined(__x86_64__) || defined(__i386__)
  CHECK(hint == "pause");
#elif defined(__aarch64__)
  CHECK(hint == "isb");
#elif defined(__arm__) && defined(__ARM_ARCH) && __ARM_ARCH >= 7
  CHECK(hint == "yield");
#else
  CHECK(hint == "none");
#endif
  // The queues' tagged links are 64-bit words on every target, ARMv7 included (ldrexd/strexd):
  // a library call there (libatomic's lock table) would make them locking. (The compile-time
  // answer: clang turns a run-time is_lock_free() into a libatomic call that nothing links.)
  STATIC_REQUIRE(ATOMIC_LLONG_LOCK_FREE == 2);
}
