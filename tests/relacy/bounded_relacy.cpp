// SPDX-License-Identifier: BSL-1.0
// async::bounded_queue under the C++ memory model (Relacy; tests/support/relacy_model.h).
//
// The queue runs on the model's atomics: the tickets, the slot turns with their sleeper bit,
// the close state, the crowding marks, the abandoned tickets, and the sleeper count of the
// store hand-over (the scenarios marked "fences" run it, with the asymmetric fences modelled as
// seq_cst fences). Elements carry a checked variable, so an element published without a
// release/acquire pair is reported as a data race; waiters park at once (SPIN_BUDGET 0), so a
// lost wake-up is reported as a deadlock. Each scenario checks what it received: every value
// once, each producer's values in order, and the exact counts after close().
#include <async/bounded_queue.h>

#include "relacy_main.h"

#include <chrono>

namespace {

namespace rm = async_test::rl_model;
using rm::check_logs;
using rm::log;
using rm::producer_base;

// The model's atomics; waiters park at once. (Not trait_presets.h: it includes async/queue.h,
// and the mutation score rebuilds a program for each header it includes.)
struct traits : async::bounded_traits {
  template <typename V>
  using atomic = rm::atomic<V>;
  static constexpr unsigned SPIN_BUDGET = 0;
};
struct side_by_side_traits : traits {
  static constexpr bool SPREAD_TICKETS = false;
};

template <typename Traits = traits>
using queue = async::bounded_queue<rm::value, Traits>;

// Sets whether the queue made next finds asymmetric fences (a suite's first member).
struct fences {
  explicit fences(bool on) { rm::fences_available() = on; }
};

// ---- try calls ----------------------------------------------------------------------------------

// One producer, one consumer, capacity 2: the turn word goes round the slots twice.
template <bool Fences>
struct try_one_to_one : rl::test_suite<try_one_to_one<Fences>, 2> {
  fences f{Fences};
  rm::parking_lot lot;
  rm::memory_cells cells;
  queue<> q{2};
  log got[1];
  void thread(unsigned me) {
    if (me == 0) {
      for (int k = 1; k <= 4; ++k) {
        while (!q.enqueue(rm::value(k))) {
          rl::yield(1, $);
        }
      }
    } else {
      for (int k = 0; k < 4; ++k) {
        rm::value v;
        while (!q.dequeue(v)) {
          rl::yield(1, $);
        }
        got[0].add(v.get());
      }
    }
  }
  void after() { check_logs(got, 1, 4); }
};

// Two producers on one slot, and a consumer: the ticket CAS between producers.
struct try_two_producers : rl::test_suite<try_two_producers, 3> {
  fences f{false};
  rm::parking_lot lot;
  rm::memory_cells cells;
  queue<side_by_side_traits> q{1};
  log got[1];
  void thread(unsigned me) {
    if (me < 2) {
      for (int k = 1; k <= 2; ++k) {
        while (!q.enqueue(rm::value(static_cast<int>(me) * producer_base + k))) {
          rl::yield(1, $);
        }
      }
    } else {
      for (int k = 0; k < 4; ++k) {
        rm::value v;
        while (!q.dequeue(v)) {
          rl::yield(1, $);
        }
        got[0].add(v.get());
      }
    }
  }
  void after() { check_logs(got, 2, 2); }
};

// A producer and two consumers on two slots: the ticket CAS between consumers.
struct try_two_consumers : rl::test_suite<try_two_consumers, 3> {
  fences f{false};
  rm::parking_lot lot;
  rm::memory_cells cells;
  queue<> q{2};
  log got[2];
  rm::atomic<int> taken{0};
  void thread(unsigned me) {
    if (me == 0) {
      for (int k = 1; k <= 3; ++k) {
        while (!q.enqueue(rm::value(k))) {
          rl::yield(1, $);
        }
      }
    } else {
      while (taken.load(std::memory_order_relaxed) < 3) {
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
  void after() { check_logs(got, 1, 3); }
};

// ---- blocking calls -----------------------------------------------------------------------------

// Two blocking producers, one blocking consumer, one slot: every hand-over has a waiter parked
// or about to park on the turn word (the sleeper bit, or with fences the sleeper count).
template <bool Fences>
struct blocking_two_producers : rl::test_suite<blocking_two_producers<Fences>, 3> {
  fences f{Fences};
  rm::parking_lot lot;
  rm::memory_cells cells;
  queue<> q{1};
  log got[1];
  void thread(unsigned me) {
    if (me < 2) {
      for (int k = 1; k <= 2; ++k) {
        RL_ASSERT(q.blocking_enqueue(rm::value(static_cast<int>(me) * producer_base + k)));
      }
    } else {
      for (int k = 0; k < 4; ++k) {
        rm::value v;
        RL_ASSERT(q.blocking_dequeue(v));
        got[0].add(v.get());
      }
    }
  }
  void after() { check_logs(got, 2, 2); }
};

// One blocking producer, two blocking consumers, one slot; the producer closes the queue after
// its values: each consumer drains and returns false, nothing is lost.
template <bool Fences>
struct blocking_close_wakes_consumers : rl::test_suite<blocking_close_wakes_consumers<Fences>, 3> {
  fences f{Fences};
  rm::parking_lot lot;
  rm::memory_cells cells;
  queue<> q{1};
  log got[2];
  void thread(unsigned me) {
    if (me == 0) {
      for (int k = 1; k <= 2; ++k) {
        RL_ASSERT(q.blocking_enqueue(rm::value(k)));
      }
      q.close();
    } else {
      rm::value v;
      while (q.blocking_dequeue(v)) {
        got[me - 1].add(v.get());
      }
    }
  }
  void after() { check_logs(got, 1, 2); }
};

// close() from its own thread while a blocking producer and a blocking consumer run: what the
// producer was told went in is what the consumer received, in order; nothing is left.
template <bool Fences>
struct close_races_blocking : rl::test_suite<close_races_blocking<Fences>, 3> {
  fences f{Fences};
  rm::parking_lot lot;
  rm::memory_cells cells;
  queue<> q{1};
  log got[1];
  int accepted = 0;
  void thread(unsigned me) {
    if (me == 0) {
      for (int k = 1; k <= 3; ++k) {
        if (!q.blocking_enqueue(rm::value(k))) {
          RL_ASSERT(q.is_closed());
          RL_ASSERT(!q.blocking_enqueue(rm::value(9))); // once refused, always refused
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
    rm::value v;
    RL_ASSERT(!q.dequeue(v));
  }
};

// close() while a try producer and a try consumer run: a producer that saw the close (by
// is_closed() or a refusal) gets no element in later; a consumer that finds the queue closed and
// empty is done.
struct close_races_try : rl::test_suite<close_races_try, 3> {
  fences f{false};
  rm::parking_lot lot;
  rm::memory_cells cells;
  queue<> q{2};
  log got[1];
  int accepted = 0;
  void thread(unsigned me) {
    if (me == 0) {
      for (int k = 1; k <= 3; ++k) {
        if (q.enqueue(rm::value(k))) {
          ++accepted;
        } else if (q.is_closed()) {
          RL_ASSERT(!q.enqueue(rm::value(9)));
          break;
        } else {
          rl::yield(1, $);
          --k; // full: try the same value again
        }
      }
    } else if (me == 1) {
      for (;;) {
        rm::value v;
        if (q.dequeue(v)) {
          got[0].add(v.get());
        } else if (q.is_closed()) {
          // Closed: what remains is what producers put in before the close; take it all.
          while (q.dequeue(v)) {
            got[0].add(v.get());
          }
          break;
        } else {
          rl::yield(1, $);
        }
      }
    } else {
      q.close();
    }
  }
  void after() {
    // A try producer that was accepted may still have been in its call when the consumer
    // drained (a value published after the drain): it is in the queue then.
    rm::value v;
    while (q.dequeue(v)) {
      got[0].add(v.get());
    }
    RL_ASSERT(got[0].count == accepted);
    check_logs(got, 1, accepted);
  }
};

// close() against one producer, and a blocking consumer: a call told that its element went in
// must have taken a ticket before the close's last one, so the consumer receives it before it
// is told that the queue is drained, and nothing is left after. (A producer whose ticket comes
// after the close's last one and that does not see the close would construct past the end,
// where a blocking consumer does not look.) `Style` 0: try calls, 1: blocking, 2: timed.
template <int Style>
struct close_races_one_producer : rl::test_suite<close_races_one_producer<Style>, 3> {
  fences f{Style == 1};
  rm::parking_lot lot;
  rm::memory_cells cells;
  queue<> q{4};
  log got[1];
  int accepted = 0;
  void thread(unsigned me) {
    if (me == 0) {
      for (int k = 1; k <= 2; ++k) {
        const bool in = Style == 0   ? q.enqueue(rm::value(k))
                        : Style == 1 ? q.blocking_enqueue(rm::value(k))
                                     : q.enqueue_for(rm::value(k), std::chrono::milliseconds(1));
        if (!in) {
          RL_ASSERT(q.is_closed());
          break;
        }
        ++accepted;
      }
    } else if (me == 1) {
      q.close();
    } else {
      rm::value v;
      while (q.blocking_dequeue(v)) {
        got[0].add(v.get());
      }
    }
  }
  void after() {
    RL_ASSERT(got[0].count == accepted);
    check_logs(got, 1, accepted);
    rm::value v;
    RL_ASSERT(!q.dequeue(v));
    RL_ASSERT(q.size_approx() == 0);
  }
};

// close() against one waiter alone, the smallest program for the sleeper-bit handshake (TW4
// against close()'s (BC2)): a consumer on an empty queue, or a producer on a full one, parks
// until close() wakes it; each must return false, never sleep on. `Producer`: which side
// waits; `Timed`: with a deadline far off (a timed park may also time out early).
template <bool Producer, bool Timed, bool Fences>
struct close_wakes_a_waiter : rl::test_suite<close_wakes_a_waiter<Producer, Timed, Fences>, 2> {
  fences f{Fences};
  rm::parking_lot lot;
  rm::memory_cells cells;
  queue<> q{1};
  close_wakes_a_waiter() {
    if (Producer) {
      RL_ASSERT(q.enqueue(rm::value(1))); // full
    }
  }
  void thread(unsigned me) {
    if (me == 1) {
      q.close();
      return;
    }
    const auto long_wait = std::chrono::hours(1);
    if (Producer) {
      for (;;) {
        const bool in =
            Timed ? q.enqueue_for(rm::value(2), long_wait) : q.blocking_enqueue(rm::value(2));
        RL_ASSERT(!in);
        if (q.is_closed()) {
          break; // a timed call may have timed out first: then it tries again
        }
      }
    } else {
      rm::value v;
      for (;;) {
        const bool got = Timed ? q.dequeue_for(v, long_wait) : q.blocking_dequeue(v);
        RL_ASSERT(!got);
        if (q.is_closed()) {
          break;
        }
      }
    }
  }
};

// What the closer wrote before close() is visible to every thread that sees the close: by
// is_closed(), by a refused enqueue (try or blocking), by a blocking or timed dequeue that
// returns false. The queue never fills (capacity 4, at most 3 values), so each refusal is the
// close's.
struct close_happens_before : rl::test_suite<close_happens_before, 3> {
  fences f{false};
  rm::parking_lot lot;
  rm::memory_cells cells;
  queue<> q{4};
  rl::var<int> note;
  close_happens_before() { note($) = 0; }
  void thread(unsigned me) {
    rm::close_happens_before_thread(me, q, note, [this](int k) {
      return k == 2 ? q.blocking_enqueue(rm::value(k)) : q.enqueue(rm::value(k));
    });
  }
};

// The same for two try producers, whose race for the tail sends one of them out of line (the
// claim loop), where the close is looked at again.
struct close_happens_before_contended : rl::test_suite<close_happens_before_contended, 3> {
  fences f{false};
  rm::parking_lot lot;
  rm::memory_cells cells;
  queue<side_by_side_traits> q{4};
  rl::var<int> note;
  close_happens_before_contended() { note($) = 0; }
  void thread(unsigned me) {
    if (me == 0) {
      note($) = 42;
      q.close();
      return;
    }
    for (int k = 1; k <= 2; ++k) {
      if (!q.enqueue(rm::value(static_cast<int>(me) * producer_base + k))) {
        RL_ASSERT(note($) == 42);
        return;
      }
    }
  }
};

// size_approx() after close() counts what is left: two values in, nobody takes them.
struct size_after_close : rl::test_suite<size_after_close, 2> {
  fences f{false};
  rm::parking_lot lot;
  rm::memory_cells cells;
  queue<> q{4};
  size_after_close() {
    RL_ASSERT(q.enqueue(rm::value(1)));
    RL_ASSERT(q.enqueue(rm::value(2)));
  }
  void thread(unsigned me) {
    if (me == 0) {
      q.close();
    } else {
      const std::size_t n = q.size_approx();
      RL_ASSERT(n == 2);
    }
  }
};

// ---- timed calls --------------------------------------------------------------------------------

// Timed producer and consumer on one slot (a timed park may time out at any point): every value
// the producer was told went in arrives, in order.
template <bool Fences>
struct timed_pair : rl::test_suite<timed_pair<Fences>, 2> {
  fences f{Fences};
  rm::parking_lot lot;
  rm::memory_cells cells;
  queue<> q{1};
  log got[1];
  int accepted = 0;
  rm::atomic<int> done{0};
  void thread(unsigned me) {
    const auto soon = std::chrono::milliseconds(1);
    if (me == 0) {
      for (int k = 1; k <= 3; ++k) {
        if (q.enqueue_for(rm::value(accepted + 1), soon)) {
          ++accepted;
        }
      }
      done.store(1, std::memory_order_release);
    } else {
      for (;;) {
        rm::value v;
        if (q.dequeue_for(v, soon)) {
          got[0].add(v.get());
        } else if (done.load(std::memory_order_acquire) != 0) {
          while (q.dequeue(v)) {
            got[0].add(v.get());
          }
          break;
        }
      }
    }
  }
  void after() {
    RL_ASSERT(got[0].count == accepted);
    check_logs(got, 1, accepted);
  }
};

// Timed calls with close() racing them, two producers on one slot and a consumer.
struct timed_close : rl::test_suite<timed_close, 3> {
  fences f{true};
  rm::parking_lot lot;
  rm::memory_cells cells;
  queue<> q{1};
  log got[1];
  int accepted[2] = {0, 0};
  void thread(unsigned me) {
    const auto soon = std::chrono::milliseconds(1);
    if (me < 2) {
      for (int k = 1; k <= 2; ++k) {
        if (q.enqueue_for(rm::value(static_cast<int>(me) * producer_base + k), soon)) {
          ++accepted[me];
        }
      }
      if (me == 1) {
        q.close();
      }
    } else {
      rm::value v;
      while (q.blocking_dequeue(v)) {
        got[0].add(v.get());
      }
    }
  }
  void after() { RL_ASSERT(got[0].count == accepted[0] + accepted[1]); }
};

} // namespace

int main(int argc, char** argv) {
  return rm::run_scenarios(
      argc, argv,
      {
          rm::make_scenario<try_one_to_one<false>>("bounded: try, one to one", 20000),
          rm::make_scenario<try_one_to_one<true>>("bounded: try, one to one, fences", 20000),
          rm::make_scenario<try_two_producers>("bounded: try, two producers", 20000),
          rm::make_scenario<try_two_consumers>("bounded: try, two consumers", 20000),
          rm::make_scenario<blocking_two_producers<false>>("bounded: blocking, two producers",
                                                           20000),
          rm::make_scenario<blocking_two_producers<true>>(
              "bounded: blocking, two producers, fences", 20000),
          rm::make_scenario<blocking_close_wakes_consumers<false>>(
              "bounded: blocking, close wakes consumers", 20000),
          rm::make_scenario<blocking_close_wakes_consumers<true>>(
              "bounded: blocking, close wakes consumers, fences", 20000),
          rm::make_scenario<close_races_blocking<false>>("bounded: close races blocking calls",
                                                         20000),
          rm::make_scenario<close_races_blocking<true>>(
              "bounded: close races blocking calls, fences", 20000),
          rm::make_scenario<close_races_try>("bounded: close races try calls", 20000),
          rm::make_scenario<close_races_one_producer<0>>("bounded: close races one try producer",
                                                         50000),
          rm::make_scenario<close_races_one_producer<1>>(
              "bounded: close races one blocking producer, fences", 50000),
          rm::make_scenario<close_races_one_producer<2>>("bounded: close races one timed producer",
                                                         50000),
          rm::make_scenario<close_wakes_a_waiter<false, false, false>>(
              "bounded: close wakes a parked consumer", 20000),
          rm::make_scenario<close_wakes_a_waiter<false, false, true>>(
              "bounded: close wakes a parked consumer, fences", 20000),
          rm::make_scenario<close_wakes_a_waiter<true, false, false>>(
              "bounded: close wakes a parked producer", 20000),
          rm::make_scenario<close_wakes_a_waiter<true, false, true>>(
              "bounded: close wakes a parked producer, fences", 20000),
          rm::make_scenario<close_wakes_a_waiter<false, true, false>>(
              "bounded: close wakes a timed consumer", 20000),
          rm::make_scenario<close_wakes_a_waiter<true, true, true>>(
              "bounded: close wakes a timed producer, fences", 20000),
          rm::make_scenario<close_happens_before>(
              "bounded: close() happens before the calls that see it", 50000),
          rm::make_scenario<close_happens_before_contended>(
              "bounded: close() happens before refused try calls, two producers", 50000),
          rm::make_scenario<size_after_close>("bounded: size_approx after close", 20000),
          rm::make_scenario<timed_pair<false>>("bounded: timed pair", 20000),
          rm::make_scenario<timed_pair<true>>("bounded: timed pair, fences", 20000),
          rm::make_scenario<timed_close>("bounded: timed calls and close, fences", 20000),
      });
}
