// expect: ignoring return value of .*nodiscard
// flags: -std=c++17 -Werror=unused-result
// clean: -std=c++14 -Wall -Wextra -Wpedantic -Werror
// MIGRATION.md M22: from C++17 on, the result of a try call may not be dropped. A dequeue that
// found the queue empty left `out` as it was, and a program that ignored the result used it all
// the same; now that program warns (an error here, with -Werror). As C++14 the same source
// compiles without a warning (compat.clean.nodiscard_dequeue).
#include "queue.h"

int main() {
  async::queue<int> q;
  int out = 0;
  q.dequeue(out);
  return out;
}
