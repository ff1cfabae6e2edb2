// SPDX-License-Identifier: BSL-1.0
//
// next_slot: the pool's "next" slot of a worker. It holds the first task that the worker's
// running task posts, which then runs right after that task on the same thread, with no lock,
// no count and no wake-up, so a chain of tasks stays on its core. It is not private: a task
// that has waited there too long (its poster is busy, or blocked on that task's future) is
// claimed by an idle worker.
//
// The state word is (generation << 2) | empty/full/taking:
//
//   owner:  vacant() -> store(t) -> publish()          empty -> full, generation + 1
//           reclaim() -> move_out()                    full -> empty
//   thief:  claim(word) -> move out -> release         full -> taking -> empty
//
// Every fill changes the generation, so two looks that read the same full word some time apart
// saw one task wait all that time; a chain fills and empties the slot far faster, and stays
// where it is. The scheduler keeps the counting and the waking; this keeps the word.
#ifndef ASYNC_DETAIL_POOL_NEXT_SLOT_H
#define ASYNC_DETAIL_POOL_NEXT_SLOT_H

#include "../config.h"

#include "../cache.h"
#include "../deadline.h"
#include "../perturb.h"
#include "task.h"

#include <atomic>
#include <cstdint>
#include <utility>

namespace async {
namespace detail {

/// Thread-safe in the roles above: one owner, any number of thieves.
template <template <typename> class Atom = std::atomic>
class next_slot {
public:
  // ---- the owner --------------------------------------------------------------------------------

  /// Whether the slot is empty for a new task; `word` receives the state to publish() over.
  /// (NS1) acquire: pairs with (NS4): a thief that took the previous task has moved it out.
  bool vacant(std::uint64_t& word) const noexcept {
    word = state_.load(std::memory_order_acquire);
    return (word & mask) == empty;
  }

  /// Puts t in the vacant slot, not yet visible to thieves (runs t's move constructor).
  void store(task&& t) noexcept { task_ = std::move(t); }

  /// Makes the stored task visible. (NS2) seq_cst: publishes it (pairs with (NS3), a thief's
  /// claim), and orders it before the owner's look at the idle workers (see the scheduler).
  void publish(std::uint64_t word) noexcept {
    state_.exchange(word + generation + full, std::memory_order_seq_cst);
  }

  /// Takes the slot's task back (full -> empty); false when the slot is empty or a thief
  /// claimed it. Then move_out() gives the task. (NS3o) acquire, on success and on failure:
  /// pairs with (NS3) and (NS4): a thief's claim, and what it did before it, happen before.
  bool reclaim() noexcept {
    std::uint64_t s = state_.load(std::memory_order_acquire);
    if ((s & mask) != full) {
      return false;
    }
    ASYNC_PERTURB(); // seen full, not yet taken back
    return state_.compare_exchange_strong(s, s - full, std::memory_order_acquire,
                                          std::memory_order_acquire);
  }

  /// The task, after a successful reclaim() (runs its move constructor).
  void move_out(task& out) noexcept { out = std::move(task_); }

  // ---- idle workers -----------------------------------------------------------------------------

  /// The state word, for a look at the slot. seq_cst: pairs with (NS2) (see the scheduler).
  std::uint64_t word() const noexcept { return state_.load(std::memory_order_seq_cst); }
  static bool holds_task(std::uint64_t word) noexcept { return (word & mask) == full; }

  /// Takes the task that `word` (from word()) says is in the slot; false when the owner took
  /// it back first. (NS3) release: releases what the thief did before (its count of the task)
  /// to the owner's (NS3o). The task published by (NS2) was acquired by word()'s load of this
  /// very word (each fill has a generation of its own, so the CAS succeeds only on that fill).
  bool claim(std::uint64_t word, task& out) noexcept {
    if (!state_.compare_exchange_strong(word, word - full + taking, std::memory_order_release,
                                        std::memory_order_relaxed)) {
      return false;
    }
    out = std::move(task_);
    // (NS4) release: the slot is free for the owner's next store; pairs with (NS1).
    state_.store(word - full, std::memory_order_release);
    return true;
  }

  /// What idle workers' looks saw last, and since when: a look that reads another word than
  /// last_seen() notes it with the time of the look. Any number of idle workers look at once,
  /// each noting what it saw, relaxed: the pair can mix two lookers' values, which makes a task
  /// look older or younger than it is by the time between their looks (microseconds).
  /// Staleness is a heuristic for locality; a claim is correct whenever it succeeds.
  std::uint64_t last_seen() const noexcept { return seen_.load(std::memory_order_relaxed); }
  wait_clock::time_point seen_since() const noexcept {
    return wait_clock::time_point(
        wait_clock::duration(seen_since_.load(std::memory_order_relaxed)));
  }
  void note(std::uint64_t word, wait_clock::time_point now) noexcept {
    seen_.store(word, std::memory_order_relaxed);
    seen_since_.store(now.time_since_epoch().count(), std::memory_order_relaxed);
  }

private:
  // The word's fields (an enum: constants that need no definition outside the class in C++14).
  enum : std::uint64_t { empty = 0, full = 1, taking = 2, mask = 3, generation = 4 };

  Atom<std::uint64_t> state_{empty};
  task task_; // written by the owner, moved out by whoever takes it
  // Lookers write what follows, the owner the above (a chain, at every link): lines apart.
  char apart_[cache_line_size];
  // What idle workers' looks saw last, and since when (wait_clock ticks): see last_seen().
  Atom<std::uint64_t> seen_{empty};
  Atom<std::int64_t> seen_since_{0};
};

} // namespace detail
} // namespace async

#endif // ASYNC_DETAIL_POOL_NEXT_SLOT_H
