// SPDX-License-Identifier: BSL-1.0
//
// Asymmetric fences, for a store-then-load handshake (Dekker's) between a side that runs on
// every operation and a side that runs rarely:
//
//   frequent side:  store A;  fence_light();  load B
//   rare side:      store B;  fence_heavy();  load A
//
// Either the rare side's load sees A, or the frequent side's load sees B (or both). A full
// fence on each side gives that too, but costs the frequent side a locked instruction per
// operation. Here the frequent side pays a compiler barrier only, and the rare side asks the
// kernel (Linux's membarrier, private expedited) to run a full barrier on every CPU that is
// running a thread of this process: a frequent-side thread that had done its store before that
// point has made it visible by the time fence_heavy() returns, and one that loads after that
// point sees B, which was stored before it.
//
// Whether the kernel offers this is checked once per process (Linux 4.14 and later register a
// process for it; a seccomp filter, qemu-user or an old kernel may refuse). Where it is not
// offered, or with ASYNC_NO_MEMBARRIER=1, asymmetric_fences_available() is false and callers
// keep a symmetric protocol: they must not call the fences then. A heavy fence that the kernel
// refuses later (a sandbox installed after the first queue was made) returns false: the caller
// must then make its protocol symmetric for good (detail/bounded/turn.h shows how), and
// asymmetric_fences_available() is false from then on.
#ifndef ASYNC_DETAIL_ASYMMETRIC_FENCE_H
#define ASYNC_DETAIL_ASYMMETRIC_FENCE_H

#include "config.h"

#include <atomic>
#include <type_traits>

#if ASYNC_HAS_MEMBARRIER
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace async {
namespace detail {

/// Test seam, not part of the API: set to true before a queue is constructed, it makes that
/// queue keep the symmetric protocol, as where the kernel offers no asymmetric fence.
ASYNC_PROCESS_WIDE inline std::atomic<bool>& asymmetric_fences_refused() noexcept {
  static std::atomic<bool> refused{false};
  return refused;
}

/// Set when the kernel refused a heavy fence after it had registered the process.
ASYNC_PROCESS_WIDE inline std::atomic<bool>& asymmetric_fences_lost() noexcept {
  static std::atomic<bool> lost{false};
  return lost;
}

#if ASYNC_HAS_MEMBARRIER && defined(SYS_membarrier)

// The membarrier commands (linux/membarrier.h; their values are the kernel's ABI, spelled out
// here so that older kernel headers do).
constexpr int membarrier_private_expedited = 1 << 3;
constexpr int membarrier_register_private_expedited = 1 << 4;

inline long membarrier_call(int command) noexcept { return syscall(SYS_membarrier, command, 0); }

/// Whether this process may use the asymmetric fences: asked of the kernel once, at the first
/// call, by registering the process (a kernel without the command answers EINVAL or ENOSYS, a
/// sandbox may answer EPERM). Thread-safe.
ASYNC_PROCESS_WIDE inline bool membarrier_registered() noexcept {
  static const bool registered = membarrier_call(membarrier_register_private_expedited) == 0;
  return registered;
}

inline bool asymmetric_fences_available() noexcept {
  return !asymmetric_fences_refused().load(std::memory_order_relaxed) &&
         !asymmetric_fences_lost().load(std::memory_order_relaxed) && membarrier_registered();
}

/// The frequent side's fence: the compiler keeps the store before the load; the processor may
/// not, and fence_heavy() makes up for that.
inline void asymmetric_fence_light() noexcept {
  std::atomic_signal_fence(std::memory_order_seq_cst);
}

/// The rare side's fence: a full barrier on every CPU running a thread of this process, and on
/// this one. Only after asymmetric_fences_available() said true. False when the kernel refused
/// it (the registration survives fork(), but a seccomp filter installed since, or a process
/// restored from a checkpoint, may refuse): then no fence was made.
inline bool asymmetric_fence_heavy() noexcept {
  if (ASYNC_LIKELY(membarrier_call(membarrier_private_expedited) == 0)) {
    return true;
  }
  asymmetric_fences_lost().store(true, std::memory_order_relaxed);
  return false;
}

#else

inline bool asymmetric_fences_available() noexcept { return false; }
inline void asymmetric_fence_light() noexcept {
  std::atomic_thread_fence(std::memory_order_seq_cst);
}
inline bool asymmetric_fence_heavy() noexcept {
  std::atomic_thread_fence(std::memory_order_seq_cst);
  return true;
}

#endif

/// The fences above, as the type that fences_of<Word> names by default.
struct system_fences {
  static bool available() noexcept { return asymmetric_fences_available(); }
  static void light() noexcept { asymmetric_fence_light(); }
  static bool heavy() noexcept { return asymmetric_fence_heavy(); }
};

/// Test seam: the asymmetric fences that go with the atomic type Word. system_fences, unless
/// Word has a member type `asymmetric_fences` with the same three functions (a memory-model
/// checker's atomic brings fences that the checker sees).
template <typename Word, typename = void>
struct fences_of {
  using type = system_fences;
};
template <typename Word>
struct fences_of<Word,
                 typename std::conditional<true, void, typename Word::asymmetric_fences>::type> {
  using type = typename Word::asymmetric_fences;
};

} // namespace detail
} // namespace async

#endif // ASYNC_DETAIL_ASYMMETRIC_FENCE_H
