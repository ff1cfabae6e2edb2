// SPDX-License-Identifier: BSL-1.0
// One of two shared libraries built with hidden visibility (tests/shared/shared_test.cpp): it
// waits, and asks the pool who it is.
#include "sides.h"

#include <stdexcept>

ASYNC_TEST_EXPORT bool side_a_dequeue(async::bounded_queue<int>& q, int& out,
                                      std::chrono::milliseconds limit) {
  return q.dequeue_for(out, limit);
}

ASYNC_TEST_EXPORT bool side_a_dequeue(async::queue<int>& q, int& out,
                                      std::chrono::milliseconds limit) {
  return q.dequeue_for(out, limit);
}

ASYNC_TEST_EXPORT bool side_a_in_pool(async::threadpool& pool) {
  return pool.running_in_this_thread();
}

ASYNC_TEST_EXPORT bool side_a_wait_idle_throws(async::threadpool& pool) {
  try {
    pool.wait_idle();
  } catch (const std::logic_error&) {
    return true;
  }
  return false;
}
