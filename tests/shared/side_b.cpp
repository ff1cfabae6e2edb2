// SPDX-License-Identifier: BSL-1.0
// The other shared library built with hidden visibility (tests/shared/shared_test.cpp): it
// produces.
#include "sides.h"

ASYNC_TEST_EXPORT void side_b_enqueue(async::bounded_queue<int>& q, int v) { q.enqueue(v); }

ASYNC_TEST_EXPORT void side_b_enqueue(async::queue<int>& q, int v) { q.enqueue(v); }
