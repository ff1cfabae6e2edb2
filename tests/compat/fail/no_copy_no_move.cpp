// expect: T must be move or copy constructible
// MIGRATION.md M12: queue<T> needs T's move or copy constructor (a skipped element is moved to a
// later slot); a type with only a move assignment is rejected.
#include "queue.h"

struct assign_only {
  assign_only() = default;
  assign_only(const assign_only&) = delete;
  assign_only& operator=(assign_only&&) noexcept { return *this; }
};

int main() {
  async::queue<assign_only> q;
  return q.enqueue() ? 0 : 1;
}
