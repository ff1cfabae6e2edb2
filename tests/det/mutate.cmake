# SPDX-License-Identifier: BSL-1.0
# Writes a copy of include/async with one fix undone (a "mutant"), so that a test binary built
# against it shows that the deterministic-schedule tests find the defect the fix removed (the
# relacy-* mutants: that the weak-memory tests find a memory order made weaker):
#
#   cmake -DMUTANT=<name> -DSOURCE=<repo>/include -DOUT=<dir> -P mutate.cmake
#
# Each mutant replaces one exact passage; if the passage is not found (the code changed), the
# build fails here, so that the mutant is updated rather than silently testing nothing.
file(REMOVE_RECURSE "${OUT}")
file(COPY "${SOURCE}/async" DESTINATION "${OUT}")

if(MUTANT STREQUAL "bulk-double-void")
  # Issue 12, defect 1 (fixed in 079e7d3): bulk_enqueue counted a slot as settled only after
  # the element's constructor returned, so a constructor that threw after a consumer skipped
  # the slot had it voided twice (by the constructor's hole and by the round's clean-up):
  # counted finished twice, the node was recycled with elements inside.
  set(file "async/detail/unbounded/core.h")
  set(old "        ++round.next;\n        const bool made = emplace(i, s, std::forward<decltype(source)>(source));\n")
  set(new "        const bool made = emplace(i, s, std::forward<decltype(source)>(source));\n        ++round.next;\n")
elseif(MUTANT STREQUAL "close-aba-wakeup")
  # Issue 12, defect 6 (fixed in 77fcff4): a waiter that left on close() did not pass on a
  # wake-up, although its sleeper bit could have gone in after close() cleared another
  # waiter's (an ABA on the turn word); that other waiter then slept for good.
  set(file "async/detail/bounded/turn.h")
  set(old "        // leaves on interrupted() with a bit in the word passes the wake-up on.\n        wake(word);\n")
  set(new "        // leaves on interrupted() with a bit in the word passes the wake-up on.\n")
elseif(MUTANT STREQUAL "store-hand-over-no-second-look")
  # Issue 51: a hand-over by plain store that does not read the sleeper count again after its
  # store leaves a waiter that counted itself and looked at the word just before the store
  # asleep for good.
  set(file "async/detail/bounded/turn.h")
  set(old "      if (ASYNC_UNLIKELY(sleepers->load(std::memory_order_relaxed) != 0)) {\n        unpark_all(&word);\n      }\n      return;\n")
  set(new "      return;\n")
elseif(MUTANT STREQUAL "close-past-storage")
  # Fixed on 2026-11-27: a consumer whose ticket lay past the tail, in a segment that a full
  # node storage had no room for, waited inside its call for producers to come; after close()
  # none come, so it never returned. It now gives up a ticket past the closed end.
  set(file "async/detail/unbounded/segment_list.h")
  set(old "        if (s >= abandoned_.load(std::memory_order_acquire)) {\n")
  set(new "        if (false && s >= abandoned_.load(std::memory_order_acquire)) {\n")
elseif(MUTANT STREQUAL "pool-no-fairness-look")
  # Issue 45: a worker never looked beyond its next slot and its own queue while they held
  # tasks, so a task that re-posted itself kept an outside post waiting for ever.
  set(file "async/detail/pool/scheduler.h")
  set(old "    if (self.ticks - self.fair_look < pool_fairness::shared_every) {\n      return false;\n")
  set(new "    if (true) {\n      return false;\n")
elseif(MUTANT STREQUAL "pool-last-searcher-silent")
  # The rule that the last searcher to find a task wakes another: without it, a post that
  # counted on that searcher (and woke nobody) waits while its worker runs another task.
  set(file "async/detail/pool/idle_workers.h")
  set(old "    if (searching(state_.fetch_sub(1, std::memory_order_seq_cst)) == 1) {\n      notify();\n    }\n")
  set(new "    state_.fetch_sub(1, std::memory_order_seq_cst);\n")
elseif(MUTANT STREQUAL "pool-park-without-last-look")
  # The last searcher's look after it registers to park, the partner of a poster's look at
  # the idle workers: without it, a post made between its last search and its registration
  # is left with every worker asleep.
  set(file "async/detail/pool/scheduler.h")
  set(old "    bool look_again = searchers_left == 0; // else a searcher left will look after us\n")
  set(new "    bool look_again = false && searchers_left == 0;\n")
elseif(MUTANT STREQUAL "pool-silent-failed-claim")
  # A thief that counted a next slot's task and then failed to claim it took its count back
  # without telling the host, which may have been the last count (helper-2): wait_idle() and
  # the destructor waited for ever.
  set(file "async/detail/pool/scheduler.h")
  set(old "    if (self != nullptr) {\n      finish(1);\n    } else {\n")
  set(new "    if (self != nullptr && false) {\n      finish(1);\n    } else {\n")
elseif(MUTANT STREQUAL "relacy-turn-publish-relaxed")
  # Weak memory (tests/relacy): the bounded queue's hand-over by exchange without its release
  # (TW2): a consumer may read the element before its construction happened before.
  set(file "async/detail/bounded/turn.h")
  set(old "word.exchange(value, std::memory_order_release)")
  set(new "word.exchange(value, std::memory_order_relaxed)")
elseif(MUTANT STREQUAL "relacy-free-list-push-relaxed")
  # Weak memory: the unbounded queue's free list push without its release (FL2): the node's
  # next free link and its last use need not happen before the pop that reuses it.
  set(file "async/detail/unbounded/node_pool.h")
  set(old "std::memory_order_release,\n                                               std::memory_order_relaxed));")
  set(new "std::memory_order_relaxed,\n                                               std::memory_order_relaxed));")
elseif(MUTANT STREQUAL "relacy-parker-token-relaxed")
  # Weak memory: the pool's parker hands its token over without the release (PK2) that the
  # owner's acquire (PK1) pairs with.
  set(file "async/detail/parker.h")
  set(old "word_.exchange(notified, std::memory_order_release)")
  set(new "word_.exchange(notified, std::memory_order_relaxed)")
else()
  message(FATAL_ERROR "mutate.cmake: unknown mutant '${MUTANT}'")
endif()

file(READ "${OUT}/${file}" text)
string(FIND "${text}" "${old}" at)
if(at EQUAL -1)
  message(FATAL_ERROR "mutate.cmake: the passage of mutant '${MUTANT}' is no longer in ${file}; "
                      "update the mutant to the current code")
endif()
string(REPLACE "${old}" "${new}" text "${text}")
file(WRITE "${OUT}/${file}" "${text}")
