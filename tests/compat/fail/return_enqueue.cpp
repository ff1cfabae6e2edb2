// expect: (return-statement with a value|should not return a value)
// MIGRATION.md M10: enqueue returns bool (the original's returned void), so `return q.enqueue(v);`
// in a function returning void does not compile.
#include "queue.h"

void produce(async::queue<int>& q, int v) { return q.enqueue(v); }

int main() {
  async::queue<int> q;
  produce(q, 1);
  return 0;
}
