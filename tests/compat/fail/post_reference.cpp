// expect: pass std::ref\(x\) or std::cref\(x\) for a reference parameter
// MIGRATION.md M9: post() takes its arguments like std::async; an lvalue does not bind to an
// `int&` parameter (the original's std::bind passed it by reference).
#include "threadpool.h"

void increment(int& x) { ++x; }

int main() {
  async::threadpool tp(1);
  int v = 0;
  tp.post(increment, v);
  return v;
}
