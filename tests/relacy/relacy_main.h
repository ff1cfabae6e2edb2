// SPDX-License-Identifier: BSL-1.0
// The driver of a Relacy test program: a list of named scenarios, each a Relacy test suite run
// for a number of random executions.
//
//   relacy_X [name-substring...]     runs the scenarios whose name contains one of the
//                                    substrings (all without arguments)
//   ASYNC_RELACY_SCALE=0.1 relacy_X  scales every scenario's executions (at least 100)
//
// Exit status 0 when every scenario passed; 1 when one failed (Relacy prints the execution's
// history: every atomic operation with its order and the value it read or wrote).
#ifndef ASYNC_TESTS_RELACY_RELACY_MAIN_H
#define ASYNC_TESTS_RELACY_RELACY_MAIN_H

#include "../support/relacy_model.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace async_test {
namespace rl_model {

/// A producer's k-th value (k from 1) in the scenarios: p * producer_base + k.
constexpr int producer_base = 100;

/// What one consumer thread received, in order.
struct log {
  int values[16] = {};
  int count = 0;
  void add(int v) {
    RL_ASSERT(count < 16);
    values[count++] = v;
  }
};

/// Every value of `producers` x `per_producer` arrived exactly once, and each producer's values
/// in order within each consumer's log.
template <std::size_t N>
void check_logs(const log (&logs)[N], int producers, int per_producer) {
  int seen[4][8] = {};
  for (const log& l : logs) {
    int last[4] = {0, 0, 0, 0};
    for (int i = 0; i < l.count; ++i) {
      const int p = l.values[i] / producer_base;
      const int k = l.values[i] % producer_base;
      RL_ASSERT(p >= 0 && p < producers && k >= 1 && k <= per_producer);
      RL_ASSERT(k > last[p]);
      last[p] = k;
      ++seen[p][k - 1];
    }
  }
  for (int p = 0; p < producers; ++p) {
    for (int k = 0; k < per_producer; ++k) {
      RL_ASSERT(seen[p][k] == 1);
    }
  }
}

/// The threads of a "close() happens before" scenario: thread 0 writes `note` and closes;
/// thread 1 puts values 1..3 through put(k) until one is refused, then waits for is_closed();
/// thread 2 drains with blocking_dequeue. Each checks the note once it has seen the close.
template <typename Queue, typename Put>
void close_happens_before_thread(unsigned me, Queue& q, rl::var<int>& note, Put put) {
  if (me == 0) {
    note($) = 42;
    q.close();
  } else if (me == 1) {
    for (int k = 1; k <= 3; ++k) {
      if (!put(k)) {
        RL_ASSERT(note($) == 42);
        return;
      }
    }
    while (!q.is_closed()) {
      rl::yield(1, $);
    }
    RL_ASSERT(note($) == 42);
  } else {
    value v;
    while (q.blocking_dequeue(v)) {
    }
    RL_ASSERT(note($) == 42);
  }
}

struct scenario {
  const char* name;
  bool (*run)(const char* name, int executions);
  int executions;
};

template <typename Suite>
scenario make_scenario(const char* name, int executions) {
  return scenario{name, &rl_model::run<Suite>, executions};
}

inline int run_scenarios(int argc, char** argv, const std::vector<scenario>& all) {
  double scale = 1.0;
  if (const char* s = std::getenv("ASYNC_RELACY_SCALE")) {
    scale = std::atof(s);
  }
  int failed = 0;
  int ran = 0;
  for (const scenario& sc : all) {
    bool wanted = argc <= 1;
    for (int i = 1; i < argc; ++i) {
      wanted = wanted || std::strstr(sc.name, argv[i]) != nullptr;
    }
    if (!wanted) {
      continue;
    }
    int n = static_cast<int>(sc.executions * scale);
    n = n < 100 ? 100 : n;
    ++ran;
    if (!sc.run(sc.name, n)) {
      ++failed;
    }
  }
  std::printf("relacy: %d of %d scenarios passed\n", ran - failed, ran);
  return failed == 0 && ran > 0 ? 0 : 1;
}

} // namespace rl_model
} // namespace async_test

#endif // ASYNC_TESTS_RELACY_RELACY_MAIN_H
