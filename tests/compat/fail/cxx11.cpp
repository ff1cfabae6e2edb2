// expect: async requires C\+\+14 or later
// MIGRATION.md M11: compiled as C++11 (this test passes -std=c++11), the headers stop with a
// message.
#include "queue.h"

int main() {
  async::queue<int> q;
  return q.enqueue(1) ? 0 : 1;
}
