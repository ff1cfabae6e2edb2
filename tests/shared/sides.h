// SPDX-License-Identifier: BSL-1.0
// What the two shared libraries of tests/shared export. Each is built with hidden visibility
// (CMake's CXX_VISIBILITY_PRESET hidden and VISIBILITY_INLINES_HIDDEN), so each holds its own
// copy of every inline function of the library that is not marked process-wide.
#ifndef ASYNC_TESTS_SHARED_SIDES_H
#define ASYNC_TESTS_SHARED_SIDES_H

#include <async/bounded_queue.h>
#include <async/queue.h>
#include <async/threadpool.h>

#include <chrono>

#define ASYNC_TEST_EXPORT __attribute__((visibility("default")))

ASYNC_TEST_EXPORT bool side_a_dequeue(async::bounded_queue<int>& q, int& out,
                                      std::chrono::milliseconds limit);
ASYNC_TEST_EXPORT bool side_a_dequeue(async::queue<int>& q, int& out,
                                      std::chrono::milliseconds limit);
ASYNC_TEST_EXPORT bool side_a_in_pool(async::threadpool& pool);
ASYNC_TEST_EXPORT bool side_a_wait_idle_throws(async::threadpool& pool);

ASYNC_TEST_EXPORT void side_b_enqueue(async::bounded_queue<int>& q, int v);
ASYNC_TEST_EXPORT void side_b_enqueue(async::queue<int>& q, int v);

#endif // ASYNC_TESTS_SHARED_SIDES_H
