// expect: ignoring return value of .*nodiscard
// flags: -std=c++17 -Werror=unused-result
// clean: -std=c++14 -Wall -Wextra -Wpedantic -Werror
// MIGRATION.md M22: from C++17 on, the result of a try call may not be dropped. The original's
// bounded_queue::enqueue returned bool too, and a program that ignored it lost the element
// whenever the queue was full; now that program warns (an error here, with -Werror). As C++14
// the same source compiles without a warning (compat.clean.nodiscard_enqueue).
#include "bounded_queue.h"

int main() {
  async::bounded_queue<int> q(1);
  q.enqueue(1);
  return 0;
}
