// SPDX-License-Identifier: BSL-1.0
// The other shared library built with hidden visibility (tests/shared/shared_test.cpp): it
// produces.
#include "sides.h"

// The try call: the test's queue is empty, and its consumer on the other side sees whether the
// element went in.
ASYNC_TEST_EXPORT void side_b_enqueue(async::bounded_queue<int>& q, int v) {
  static_cast<void>(q.enqueue(v));
}

ASYNC_TEST_EXPORT void side_b_enqueue(async::queue<int>& q, int v) { q.enqueue(v); }
