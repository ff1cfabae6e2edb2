// SPDX-License-Identifier: BSL-1.0
// A consumer program: includes every public header of the installed or embedded library and
// uses it, so that a broken package (missing header, wrong include path, missing Threads link)
// fails to build or to run.
#include <async/bounded_queue.h>
#include <async/detail/cache.h>
#include <async/detail/config.h>
#include <async/queue.h>
#include <async/threadpool.h>

#include <cstdio>

int main() {
  void* p = async::detail::aligned_allocate(100, async::detail::cache_line_size);
  bool ok = async::detail::is_aligned(p, async::detail::cache_line_size);
  async::detail::aligned_free(p);

  async::bounded_queue<int> q(4);
  async::threadpool pool(2);
  auto produced = pool.post([&q] { return q.blocking_enqueue(42); });
  int v = 0;
  ok = ok && q.blocking_dequeue(v) && v == 42 && produced.get();

  async::queue<int> u;
  ok = ok && u.enqueue(7) && u.dequeue(v) && v == 7;

  std::printf("async consumer on %s, cache line %zu bytes: %s\n", ASYNC_ARCH_NAME,
              async::detail::cache_line_size, ok ? "ok" : "FAILED");
  return ok ? 0 : 1;
}
