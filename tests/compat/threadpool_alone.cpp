// SPDX-License-Identifier: BSL-1.0
// The original library's threadpool.h included its queue.h: a program that includes only
// "threadpool.h" and uses async::queue and async::traits compiles (built, not run).
#include "threadpool.h"

int threadpool_alone_uses_the_queue() {
  async::queue<int> q;
  q.enqueue(async::traits::SEGMENT_SIZE > 0 ? 1 : 0);
  int out = 0;
  return q.dequeue(out) ? out : -1;
}
