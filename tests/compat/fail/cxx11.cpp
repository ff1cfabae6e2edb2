// expect: async requires C\+\+14 or later
// flags: -std=c++11
// MIGRATION.md M11: compiled as C++11 (the flags line above), the headers stop with a message.
#include "queue.h"

int main() {
  async::queue<int> q;
  return q.enqueue(1) ? 0 : 1;
}
