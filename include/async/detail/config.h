// SPDX-License-Identifier: BSL-1.0
//
// Platform facts shared by every header of the library. All ASYNC_* macros live here (and only
// here) so that a user can see in one place what can be configured and what is detected.
//
// User-settable macros (define them before including any async header, or on the command line):
//   ASYNC_CACHE_LINE_SIZE  the false-sharing granule in bytes; must be a power of two. Default:
//                          128 on x86-64 (adjacent-line prefetch pairs two 64-byte lines) and
//                          AArch64 (several cores use 128-byte lines), 64 elsewhere.
//   ASYNC_NO_FUTEX         define to 1 to park waiters on a condition variable even on Linux.
//   ASYNC_NO_MEMBARRIER    define to 1 to make the bounded queue's hand-over an exchange on
//                          every call, as where Linux's membarrier is missing
//                          (detail/asymmetric_fence.h).
//   ASYNC_TEST_PERTURB     the library's tests only: define to 1 to turn every ASYNC_PERTURB()
//                          point into a random yield or short sleep (detail/perturb.h). Never
//                          in a user's build: it makes every operation slower.
//   ASYNC_TEST_FAULTS      the library's tests only: define to 1 to let a test make the pool's
//                          thread starts fail (detail/perturb.h).
//   ASYNC_TEST_POOL_LANES  the library's tests only: the number of lanes of every pool's shared
//                          queue (a power of two) instead of one per four hardware threads, so
//                          that a small machine runs the code of several lanes.
//
// Detected (read-only) macros:
//   ASYNC_ARCH_X86_64, ASYNC_ARCH_X86, ASYNC_ARCH_AARCH64, ASYNC_ARCH_ARM, ASYNC_ARCH_OTHER
//   ASYNC_ARCH_NAME        a string literal naming the detected architecture
//   ASYNC_CPLUSPLUS        14, 17 or 20 (the language version the header is compiled as)
//   ASYNC_HAS_FUTEX        1 where waiters park on a Linux futex
//   ASYNC_HAS_MEMBARRIER   1 where the system call for asymmetric fences may exist (Linux); the
//                          kernel is asked at run time
//   ASYNC_TSAN             1 when compiled with ThreadSanitizer
//   ASYNC_LIKELY(x), ASYNC_UNLIKELY(x), ASYNC_ALWAYS_INLINE, ASYNC_NOINLINE, ASYNC_HOT_INLINE,
//   ASYNC_PROCESS_WIDE, ASYNC_NODISCARD
//   ASYNC_PERTURB()        a schedule-perturbation point (defined in detail/perturb.h)
//   ASYNC_FAULT_THREAD_START()  a fault-injection point (defined in detail/perturb.h)
#ifndef ASYNC_DETAIL_CONFIG_H
#define ASYNC_DETAIL_CONFIG_H

// ---- language version -------------------------------------------------------------------------
#if defined(_MSVC_LANG) && _MSVC_LANG > __cplusplus
#define ASYNC_CPLUSPLUS_RAW _MSVC_LANG
#else
#define ASYNC_CPLUSPLUS_RAW __cplusplus
#endif

#if ASYNC_CPLUSPLUS_RAW >= 202002L
#define ASYNC_CPLUSPLUS 20
#elif ASYNC_CPLUSPLUS_RAW >= 201703L
#define ASYNC_CPLUSPLUS 17
#elif ASYNC_CPLUSPLUS_RAW >= 201402L
#define ASYNC_CPLUSPLUS 14
#else
#error "async requires C++14 or later (the original d36u9/async accepted C++11; see MIGRATION.md)"
#endif

// ---- architecture -----------------------------------------------------------------------------
#if defined(__x86_64__) || defined(_M_X64)
#define ASYNC_ARCH_X86_64 1
#define ASYNC_ARCH_NAME "x86-64"
#elif defined(__i386__) || defined(_M_IX86)
#define ASYNC_ARCH_X86 1
#define ASYNC_ARCH_NAME "x86"
#elif defined(__aarch64__) || defined(_M_ARM64)
#define ASYNC_ARCH_AARCH64 1
#define ASYNC_ARCH_NAME "aarch64"
#elif defined(__arm__) || defined(_M_ARM)
#define ASYNC_ARCH_ARM 1
#define ASYNC_ARCH_NAME "arm"
#else
#define ASYNC_ARCH_OTHER 1
#define ASYNC_ARCH_NAME "other"
#endif

// ---- exceptions -------------------------------------------------------------------------------
#if !defined(__cpp_exceptions) && !defined(__EXCEPTIONS) && !defined(_CPPUNWIND)
#error "async needs C++ exceptions: it reports bad input and exhausted memory by throwing"
#endif

// ---- cache line -------------------------------------------------------------------------------
#ifndef ASYNC_CACHE_LINE_SIZE
#if defined(ASYNC_ARCH_X86_64) || defined(ASYNC_ARCH_AARCH64)
#define ASYNC_CACHE_LINE_SIZE 128
#else
#define ASYNC_CACHE_LINE_SIZE 64
#endif
#endif

#if (ASYNC_CACHE_LINE_SIZE) < 16 || ((ASYNC_CACHE_LINE_SIZE) & ((ASYNC_CACHE_LINE_SIZE)-1)) != 0
#error "ASYNC_CACHE_LINE_SIZE must be a power of two of at least 16"
#endif

// ---- parking ----------------------------------------------------------------------------------
#if defined(__linux__) && !(defined(ASYNC_NO_FUTEX) && ASYNC_NO_FUTEX)
#define ASYNC_HAS_FUTEX 1
#else
#define ASYNC_HAS_FUTEX 0
#endif
#if defined(__linux__) && !(defined(ASYNC_NO_MEMBARRIER) && ASYNC_NO_MEMBARRIER)
#define ASYNC_HAS_MEMBARRIER 1
#else
#define ASYNC_HAS_MEMBARRIER 0
#endif

// ---- sanitizers -------------------------------------------------------------------------------
#if defined(__SANITIZE_THREAD__)
#define ASYNC_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define ASYNC_TSAN 1
#endif
#endif
#ifndef ASYNC_TSAN
#define ASYNC_TSAN 0
#endif

// ---- test seam --------------------------------------------------------------------------------
#ifndef ASYNC_TEST_PERTURB
#define ASYNC_TEST_PERTURB 0
#endif
#ifndef ASYNC_TEST_FAULTS
#define ASYNC_TEST_FAULTS 0
#endif
#ifndef ASYNC_TEST_POOL_LANES
#define ASYNC_TEST_POOL_LANES 0
#endif

// ---- compiler hints ---------------------------------------------------------------------------
#if defined(__GNUC__) || defined(__clang__)
#define ASYNC_LIKELY(x) __builtin_expect(!!(x), 1)
#define ASYNC_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define ASYNC_ALWAYS_INLINE inline __attribute__((always_inline))
#define ASYNC_NOINLINE __attribute__((noinline))
#elif defined(_MSC_VER)
#define ASYNC_LIKELY(x) (x)
#define ASYNC_UNLIKELY(x) (x)
#define ASYNC_ALWAYS_INLINE __forceinline
#define ASYNC_NOINLINE __declspec(noinline)
#else
#define ASYNC_LIKELY(x) (x)
#define ASYNC_UNLIKELY(x) (x)
#define ASYNC_ALWAYS_INLINE inline
#define ASYNC_NOINLINE
#endif

// The functions whose local statics must be one per process (the parking table, the pool's
// thread_local identities) are visible outside their shared library even where the library is
// built with -fvisibility=hidden (CMake's CXX_VISIBILITY_PRESET hidden): otherwise each shared
// library of a program had its own copy, a consumer parked in one library's table was never
// woken by a producer in another, and a task called into another library was no task of its
// pool there. That holds for libraries linked at build time or loaded with RTLD_GLOBAL, not for
// plugins loaded with RTLD_LOCAL, linked with -Bsymbolic or hiding these symbols in a version
// script, and not for Windows DLLs. Cost: g++ makes such statics unique symbols
// (STB_GNU_UNIQUE), and glibc never unloads a library that has one (dlclose leaves a plugin
// mapped; -fno-gnu-unique avoids that). Define ASYNC_PROCESS_WIDE as empty, in every file, to
// keep each library's copy private instead.
#ifndef ASYNC_PROCESS_WIDE
#if (defined(__GNUC__) || defined(__clang__)) && !defined(_WIN32) && !defined(__CYGWIN__)
#define ASYNC_PROCESS_WIDE __attribute__((visibility("default")))
#else
#define ASYNC_PROCESS_WIDE
#endif
#endif

// [[nodiscard]] from C++17 on; nothing before (C++14 with -Wpedantic would warn about it). The
// rule: a result gets it when it can say "no" in a program that never calls close() and sets
// no NOEXCEPT_CHECK, that is, every try call and every timed call (a try enqueue that finds
// the queue full, a dequeue that finds it empty, a bulk_dequeue that takes fewer than asked,
// a wait that times out). A dropped "no" there is a lost element or an out-parameter never
// written. Calls that can only say "no" after close() (queue::enqueue, bulk_enqueue, the
// blocking calls) do not get it: a program that never closes may ignore them. Nor does
// threadpool::post: fire-and-forget callers drop its future (which, unlike std::async's, does
// not wait when destroyed).
#if ASYNC_CPLUSPLUS >= 17
#define ASYNC_NODISCARD [[nodiscard]]
#else
#define ASYNC_NODISCARD
#endif

// Forces inlining in optimized builds only. An unoptimized build (coverage, -O0 debugging)
// keeps one out-of-line copy, so that gcov counts a function's branches once and not once per
// call site.
#if defined(__OPTIMIZE__) || (defined(_MSC_VER) && !defined(_DEBUG))
#define ASYNC_HOT_INLINE ASYNC_ALWAYS_INLINE
#else
#define ASYNC_HOT_INLINE inline
#endif

#endif // ASYNC_DETAIL_CONFIG_H
