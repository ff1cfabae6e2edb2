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
// Consumers that look at an empty slot again before they skip it (two rounds).
using spinning_queue =
    async::queue<rm::value,
                 async_test::spin_budget<2, async_test::with_atomic<small_segments, rm::atomic>>>;

struct boom {};

struct look_inside {};

} // namespace

// The one look inside a queue that these tests take: whether its oldest segment, done with and
// linked to the next, was left unrecycled (an error once every thread is done).
namespace async {
namespace detail {
template <>
struct inspect<look_inside> {
  template <typename Q>
  static bool recycle_overdue(const Q& q) {
    return q.segments_.recycle_overdue();
  }
};
} // namespace detail
} // namespace async

namespace {

// Checked after every scenario: the races to recycle a segment (the finisher's count and look
// at the link, against the appender's link and look at the count; the recycler's move of the
// anchor, against the next segment's last finisher) leave none behind.
template <typename Q>
void check_recycled(const Q& q) {
  RL_ASSERT(!async::detail::inspect<look_inside>::recycle_overdue(q));
}

// When a fragile element throws: never; in its constructor, once its value member is built
// (the memory is written, then the slot is voided); or in its second move construction, that of
// an element whose slot was skipped moving from its carrier into a later slot (a claimed slot
// is voided).
enum class fails { never, construct, second_move };

// An element that throws where `fails` says; its value member carries the checked cell.
class fragile {
public:
  fragile() = default;
  fragile(int k, fails f) : v_(k), f_(f) {
    if (f_ == fails::construct) {
      throw boom{};
    }
  }
  fragile(fragile&& o) : v_(std::move(o.v_)), f_(o.f_), moves_(o.moves_ + 1) {
    if (f_ == fails::second_move && moves_ == 2) {
      throw boom{};
    }
  }
  fragile& operator=(fragile&& o) noexcept {
    v_ = std::move(o.v_);
    f_ = o.f_;
    moves_ = o.moves_;
    return *this;
  }
  int get() const { return v_.get(); }

private:
  rm::value v_;
  fails f_ = fails::never;
  int moves_ = 0;
};
using fragile_queue = async::queue<fragile, traits>;

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
  void after() {
    check_logs(got, 2, 3);
    check_recycled(q);
  }
};

// One producer, two try consumers: consumers race for tickets, and a consumer that comes
// before its producer skips the slot (the producer's value goes to a later ticket), at once or,
// with a spin budget, after looking again.
template <typename Queue>
struct two_consumers : rl::test_suite<two_consumers<Queue>, 3> {
  rm::parking_lot lot;
  rm::memory_cells cells;
  Queue q;
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
  void after() {
    check_logs(got, 1, 4);
    check_recycled(q);
  }
};

// An element that throws as F says (fails::construct: its slot is voided, give_up();
// fails::second_move: it was skipped, and its move into its later, claimed slot throws,
// void_claimed()), as the last call of one producer while the other goes on. What the throw
// wrote in the slot must happen before the slot's next life, which the other producer's later
// elements may take: a data race on the slot's cell otherwise. (Ending the producer with it
// leaves no later ticket of its own to carry that order to the other producer.)
constexpr int special = 50; // the value of the element that throws

template <fails F>
struct throwing_element : rl::test_suite<throwing_element<F>, 3> {
  rm::parking_lot lot;
  rm::memory_cells cells;
  fragile_queue q;
  log got[1];
  int special_in = 0;  // whether it went in (written by its producer, read in after())
  int special_got = 0; // whether it arrived
  rm::atomic<int> producers_done{0};
  void thread(unsigned me) {
    if (me == 0) {
      RL_ASSERT(q.enqueue(1, fails::never));
      RL_ASSERT(q.enqueue(2, fails::never));
      bool thrown = false;
      try {
        special_in = q.enqueue(special, F) ? 1 : 0;
      } catch (const boom&) {
        thrown = true;
      }
      // The throw reaches the caller (no NOEXCEPT_CHECK): always for a constructor; for the
      // second move, exactly when the element was skipped and did not go in.
      RL_ASSERT(F != fails::construct || thrown);
      RL_ASSERT(thrown == (special_in == 0));
      producers_done.fetch_add(1, std::memory_order_release);
    } else if (me == 1) {
      for (int k = 1; k <= 4; ++k) {
        RL_ASSERT(q.enqueue(producer_base + k, fails::never));
      }
      producers_done.fetch_add(1, std::memory_order_release);
    } else {
      for (;;) {
        const bool done = producers_done.load(std::memory_order_acquire) == 2;
        fragile v;
        if (q.dequeue(v)) {
          if (v.get() == special) {
            ++special_got;
          } else {
            got[0].add(v.get());
          }
        } else if (done) {
          break;
        } else {
          rl::yield(1, $);
        }
      }
    }
  }
  void after() {
    check_recycled(q);
    RL_ASSERT(special_got == special_in);
    RL_ASSERT(got[0].count == 6);
    int last[2] = {0, 0};
    for (int n = 0; n < got[0].count; ++n) {
      const int p = got[0].values[n] / producer_base;
      const int k = got[0].values[n] % producer_base;
      RL_ASSERT(k == last[p] + 1); // each producer's values, in order
      last[p] = k;
    }
    RL_ASSERT(last[0] == 2 && last[1] == 4);
  }
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
  void after() {
    check_logs(got, 1, 5);
    check_recycled(q);
  }
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
  void after() {
    check_logs(got, 1, 3);
    check_recycled(q);
  }
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
  void after() {
    check_logs(got, 1, 2);
    check_recycled(q);
  }
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
    check_recycled(q);
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
  void after() {
    check_logs(got, 1, 3);
    check_recycled(q);
  }
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
  void after() { check_recycled(q); }
};

} // namespace

int main(int argc, char** argv) {
  return rm::run_scenarios(
      argc, argv,
      {
          rm::make_scenario<two_producers>("queue: two producers", 20000),
          rm::make_scenario<two_consumers<queue>>("queue: two consumers", 20000),
          rm::make_scenario<two_consumers<spinning_queue>>(
              "queue: two consumers that wait at their slots", 20000),
          rm::make_scenario<throwing_element<fails::construct>>("queue: a constructor that throws",
                                                                50000),
          rm::make_scenario<throwing_element<fails::second_move>>(
              "queue: a skipped element whose move throws", 50000),
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
