// SPDX-License-Identifier: BSL-1.0
// async::queue under the C++ memory model (Relacy; tests/support/relacy_model.h).
//
// The queue runs on the model's atomics: the tickets, the slot states, the segment list's
// links and hints, the node pool's tagged free list and its recycling counts, the node
// storage's block pointers, and the event count that blocking consumers park on. Segments of
// two slots in a storage of 32 nodes: a few values walk through several segments, which are
// recycled and reused within one execution. Elements carry a checked variable (a data race
// where an element is published without release/acquire); consumers park at once, so a lost
// wake-up shows as a deadlock.
#include <async/queue.h>

#include "../support/trait_presets.h"
#include "relacy_main.h"

#include <chrono>

namespace {

namespace rm = async_test::rl_model;
using rm::check_logs;
using rm::log;
using rm::producer_base;

struct small_segments : async::traits {
  static constexpr std::size_t SEGMENT_SIZE = 2;
  static constexpr std::size_t NODE_LEVEL1 = 2;
  static constexpr std::size_t NODE_LEVEL2 = 4;
  static constexpr std::size_t NODE_LEVEL3 = 4;
};
using traits = async_test::no_spin<async_test::with_atomic<small_segments, rm::atomic>>;
using queue = async::queue<rm::value, traits>;

// Two producers, one try consumer: tickets of both sides, slot states, segment links as the
// list grows, and the recycling of the segments the consumer leaves behind.
struct two_producers : rl::test_suite<two_producers, 3> {
  rm::parking_lot lot;
  rm::memory_cells cells;
  queue q;
  log got[1];
  void thread(unsigned me) {
    if (me < 2) {
      for (int k = 1; k <= 3; ++k) {
        RL_ASSERT(q.enqueue(rm::value(static_cast<int>(me) * producer_base + k)));
      }
    } else {
      for (int n = 0; n < 6;) {
        rm::value v;
        if (q.dequeue(v)) {
          got[0].add(v.get());
          ++n;
        } else {
          rl::yield(1, $);
        }
      }
    }
  }
  void after() { check_logs(got, 2, 3); }
};

// One producer, two try consumers: consumers race for tickets, and a consumer that comes
// before its producer skips the slot (the producer's value goes to a later ticket).
struct two_consumers : rl::test_suite<two_consumers, 3> {
  rm::parking_lot lot;
  rm::memory_cells cells;
  queue q;
  log got[2];
  rm::atomic<int> taken{0};
  void thread(unsigned me) {
    if (me == 0) {
      for (int k = 1; k <= 4; ++k) {
        RL_ASSERT(q.enqueue(rm::value(k)));
      }
    } else {
      while (taken.load(std::memory_order_relaxed) < 4) {
        rm::value v;
        if (q.dequeue(v)) {
          got[me - 1].add(v.get());
          taken.fetch_add(1, std::memory_order_relaxed);
        } else {
          rl::yield(1, $);
        }
      }
    }
  }
  void after() { check_logs(got, 1, 4); }
};

// Bulk calls: a producer's bulk_enqueue of three and two single ones, two consumers taking
// with bulk_dequeue.
struct bulk : rl::test_suite<bulk, 3> {
  rm::parking_lot lot;
  rm::memory_cells cells;
  queue q;
  log got[2];
  rm::atomic<int> taken{0};
  void thread(unsigned me) {
    if (me == 0) {
      rm::value first[3] = {rm::value(1), rm::value(2), rm::value(3)};
      RL_ASSERT(q.bulk_enqueue(first, 3) == 3);
      RL_ASSERT(q.enqueue(rm::value(4)));
      RL_ASSERT(q.enqueue(rm::value(5)));
    } else {
      while (taken.load(std::memory_order_relaxed) < 5) {
        rm::value out[2];
        const std::size_t n = q.bulk_dequeue(out, 2);
        for (std::size_t i = 0; i < n; ++i) {
          got[me - 1].add(out[i].get());
        }
        if (n == 0) {
          rl::yield(1, $);
        } else {
          taken.fetch_add(static_cast<int>(n), std::memory_order_relaxed);
        }
      }
    }
  }
  void after() { check_logs(got, 1, 5); }
};

// Blocking consumers woken by values and by close(): the event count's epoch and sleepers.
struct blocking_and_close : rl::test_suite<blocking_and_close, 3> {
  rm::parking_lot lot;
  rm::memory_cells cells;
  queue q;
  log got[2];
  void thread(unsigned me) {
    if (me == 0) {
      for (int k = 1; k <= 3; ++k) {
        RL_ASSERT(q.enqueue(rm::value(k)));
      }
      q.close();
    } else {
      rm::value v;
      while (q.blocking_dequeue(v)) {
        got[me - 1].add(v.get());
      }
    }
  }
  void after() { check_logs(got, 1, 3); }
};

// A blocking consumer that nothing but the values wakes (no close() to rescue it): the event
// count's Dekker pair, a consumer's registration and second look against a producer's tickets,
// publication and waiter check. A lost wake-up is a deadlock.
struct blocking_no_close : rl::test_suite<blocking_no_close, 2> {
  rm::parking_lot lot;
  rm::memory_cells cells;
  queue q;
  log got[1];
  void thread(unsigned me) {
    if (me == 0) {
      for (int k = 1; k <= 2; ++k) {
        RL_ASSERT(q.enqueue(rm::value(k)));
      }
    } else {
      for (int n = 0; n < 2; ++n) {
        rm::value v;
        RL_ASSERT(q.blocking_dequeue(v));
        got[0].add(v.get());
      }
    }
  }
  void after() { check_logs(got, 1, 2); }
};

// close() from its own thread while a producer and a blocking consumer run: what the producer
// was told went in is what arrives.
struct close_races : rl::test_suite<close_races, 3> {
  rm::parking_lot lot;
  rm::memory_cells cells;
  queue q;
  log got[1];
  int accepted = 0;
  void thread(unsigned me) {
    if (me == 0) {
      for (int k = 1; k <= 3; ++k) {
        if (!q.enqueue(rm::value(accepted + 1))) {
          RL_ASSERT(q.is_closed());
          break;
        }
        ++accepted;
      }
    } else if (me == 1) {
      rm::value v;
      while (q.blocking_dequeue(v)) {
        got[0].add(v.get());
      }
    } else {
      q.close();
    }
  }
  void after() {
    RL_ASSERT(got[0].count == accepted);
    check_logs(got, 1, accepted);
  }
};

// Timed consumers: a timed park may time out at any point; with close() at the end nothing is
// left and nothing arrives twice.
struct timed : rl::test_suite<timed, 3> {
  rm::parking_lot lot;
  rm::memory_cells cells;
  queue q;
  log got[2];
  void thread(unsigned me) {
    if (me == 0) {
      for (int k = 1; k <= 3; ++k) {
        RL_ASSERT(q.enqueue(rm::value(k)));
      }
      q.close();
    } else {
      for (;;) {
        rm::value v;
        if (q.dequeue_for(v, std::chrono::milliseconds(1))) {
          got[me - 1].add(v.get());
        } else if (q.is_closed()) {
          while (q.dequeue(v)) {
            got[me - 1].add(v.get());
          }
          break;
        }
      }
    }
  }
  void after() { check_logs(got, 1, 3); }
};

// What the closer wrote before close() is visible to every thread that sees the close: by
// is_closed(), by a refused enqueue, by a blocking dequeue that returns false.
struct close_happens_before : rl::test_suite<close_happens_before, 3> {
  rm::parking_lot lot;
  rm::memory_cells cells;
  queue q;
  rl::var<int> note;
  close_happens_before() { note($) = 0; }
  void thread(unsigned me) {
    rm::close_happens_before_thread(me, q, note, [this](int k) { return q.enqueue(rm::value(k)); });
  }
};

} // namespace

int main(int argc, char** argv) {
  return rm::run_scenarios(
      argc, argv,
      {
          rm::make_scenario<two_producers>("queue: two producers", 20000),
          rm::make_scenario<two_consumers>("queue: two consumers", 20000),
          rm::make_scenario<bulk>("queue: bulk calls", 20000),
          rm::make_scenario<blocking_and_close>("queue: blocking consumers and close", 20000),
          rm::make_scenario<blocking_no_close>("queue: a blocking consumer woken by values only",
                                               50000),
          rm::make_scenario<close_races>("queue: close races the calls", 20000),
          rm::make_scenario<timed>("queue: timed consumers", 20000),
          rm::make_scenario<close_happens_before>(
              "queue: close() happens before the calls that see it", 50000),
      });
}
