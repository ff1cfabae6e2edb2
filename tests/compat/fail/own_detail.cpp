// expect: ambiguous
// MIGRATION.md M21: after `using namespace async;`, a program's own global namespace `detail`
// named unqualified is ambiguous with async::detail (write ::detail:: there).
#include "queue.h"

namespace detail {
inline int answer() { return 42; }
} // namespace detail

using namespace async;

int main() { return detail::answer() == 42 ? 0 : 1; }
