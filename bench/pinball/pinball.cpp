// SPDX-License-Identifier: BSL-1.0
// Pinball, after the benchmark of the tachyonix channel: R rigs of 13 pins, each pin a queue
// drained by pool tasks. A ball is a message; the task that takes it from a pin sends it on to
// a pseudo-random other pin of the same rig, until the ball has made H hops. Receivers are often
// starved and senders never wait (each queue can hold all the balls of its rig), so this measures
// the cost of a hand-off between tasks rather than raw throughput. Swept: balls per rig.
//
// The pool is async::threadpool with N workers for every queue: the queue is the variable. A pin
// is an actor: a sender enqueues, then schedules the pin's drain task unless it is scheduled
// already. Verified: every ball finishes exactly once, and the pins handled balls x H messages.
// Per-producer FIFO is checked too: a message carries its sending thread and that thread's
// sequence number towards the pin, and each thread that takes messages from a pin counts those
// older than the previous one it took from the same sender there.
#include "adapters/async_threadpool.h"
#include "adapters/queues.h"

#include <future>

namespace async_bench {

constexpr int pins_per_rig = 13;
constexpr int rigs = 61;
// A message, from the low bits up: the ball's number + 1 (never 0), the hops it has left, the
// sender's sequence number towards this pin (modulo 2^22), the sending thread (0: the setup).
constexpr int ball_bits = 16;
constexpr int hop_bits = 20;
constexpr int seq_bits = 22;
constexpr int sender_bits = 6;
constexpr std::uint64_t ball_mask = (std::uint64_t(1) << ball_bits) - 1;
constexpr std::uint64_t hop_mask = (std::uint64_t(1) << hop_bits) - 1;
constexpr std::uint64_t seq_mask = (std::uint64_t(1) << seq_bits) - 1;
constexpr int max_senders = 1 << sender_bits;
static_assert(ball_bits + hop_bits + seq_bits + sender_bits == 64, "a message is one word");
static_assert(rigs * 241 < (1 << ball_bits) - 1, "the largest sweep's balls fit");

/// A well-mixed 64-bit hash (the splitmix64 finaliser): where a ball goes next depends only on
/// the ball and its hop count, so no task shares a random generator with another.
inline std::uint64_t mix(std::uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

inline std::size_t round_up_pow2(std::size_t n) {
  std::size_t c = 1;
  while (c < n) {
    c *= 2;
  }
  return c;
}

/// Stops the run: a corrupt or duplicated message cannot be measured around.
[[noreturn]] inline void broken(const char* impl, const std::string& what) {
  std::fprintf(stderr, "VERIFICATION FAILED: %s pinball: %s\n", impl, what.c_str());
  std::abort();
}

/// One measurement's pins, balls and tallies. Pool tasks hold a pointer to it; the pool is
/// destroyed (its workers joined) before the board.
template <typename Adapter, typename Pool>
class board {
public:
  board(Pool& pool, int balls_per_rig, std::uint64_t hops)
      : pool_(pool), balls_(static_cast<std::size_t>(rigs * balls_per_rig)), hops_(hops),
        pins_(static_cast<std::size_t>(rigs * pins_per_rig)),
        finished_(new std::atomic<std::uint8_t>[balls_]), left_(balls_) {
    const std::size_t capacity = round_up_pow2(static_cast<std::size_t>(balls_per_rig));
    for (pin& p : pins_) {
      p.q = Adapter::make(capacity);
    }
    for (std::size_t b = 0; b < balls_; ++b) {
      finished_[b].store(0, std::memory_order_relaxed);
      // Ball b belongs to rig b / balls_per_rig; a rig's balls are spread over its pins.
      const std::size_t rig = b / static_cast<std::size_t>(balls_per_rig);
      const std::size_t local = b % static_cast<std::size_t>(balls_per_rig);
      const std::size_t to = rig * pins_per_rig + local % pins_per_rig;
      pin& first = pins_[to];
      Adapter::push(*first.q, message(b, hops_, to));
      first.scheduled.store(true, std::memory_order_relaxed); // its drain task comes in start()
    }
  }

  /// Messages taken after a newer one of the same sender by the same thread from the same pin.
  std::uint64_t fifo_violations() const { return violations_.load(std::memory_order_relaxed); }

  /// Posts a drain task for every pin that holds a ball. The future of done() is ready when the
  /// last ball has made its last hop.
  void start() {
    for (std::size_t p = 0; p < pins_.size(); ++p) {
      if (pins_[p].scheduled.load(std::memory_order_relaxed)) {
        pool_.spawn(drainer{this, p});
      }
    }
  }

  std::future<void> done() { return all_done_.get_future(); }

  /// Empty when every ball finished exactly once and the pins handled balls x hops messages;
  /// otherwise what went wrong. Call after the pool's workers are joined.
  std::string verify() const {
    std::uint64_t handled = 0;
    for (const pin& p : pins_) {
      handled += p.handled.load(std::memory_order_relaxed);
    }
    for (std::size_t b = 0; b < balls_; ++b) {
      if (finished_[b].load(std::memory_order_relaxed) != 1) {
        return "ball " + std::to_string(b) + " never finished";
      }
    }
    const std::uint64_t expected = static_cast<std::uint64_t>(balls_) * hops_;
    if (handled != expected) {
      return "pins handled " + std::to_string(handled) + " messages, expected " +
             std::to_string(expected);
    }
    return {};
  }

  std::uint64_t messages() const { return static_cast<std::uint64_t>(balls_) * hops_; }

private:
  struct alignas(64) pin {
    std::unique_ptr<typename Adapter::queue> q;
    std::atomic<bool> scheduled{false};
    std::atomic<std::uint64_t> handled{0};
  };

  struct drainer {
    board* self;
    std::size_t pin;
    void operator()() const { self->drain(pin); }
  };

  /// What one thread knows of this board: its sender number, its next sequence number towards
  /// each pin, and the last sequence number it took from each (pin, sender). Created on the
  /// thread's first message of this board (the pool's threads live one board long).
  struct thread_view {
    std::uint64_t board = 0; // serial of the board it belongs to
    int sender = 0;
    std::vector<std::uint32_t> sent;  // by pin
    std::vector<std::uint32_t> taken; // by pin * max_senders + sender
  };

  thread_view& view() {
    static thread_local thread_view v;
    if (v.board != serial_) {
      v.board = serial_;
      v.sender = next_sender_.fetch_add(1, std::memory_order_relaxed);
      v.sent.assign(pins_.size(), 0);
      v.taken.assign(pins_.size() * max_senders, 0);
    }
    return v;
  }

  std::uint64_t message(std::size_t ball, std::uint64_t hops_left, std::size_t to) {
    thread_view& v = view();
    const auto sender = static_cast<std::uint64_t>(std::min(v.sender, max_senders - 1));
    const std::uint64_t seq = ++v.sent[to] & seq_mask;
    return sender << (ball_bits + hop_bits + seq_bits) | seq << (ball_bits + hop_bits) |
           hops_left << ball_bits | (static_cast<std::uint64_t>(ball) + 1);
  }

  /// Counts m as a violation if its sender's previous message taken here by this thread was
  /// newer (sequence numbers compared modulo 2^22). Senders beyond 63 share number 63 and are
  /// not checked.
  void check_order(std::size_t at, std::uint64_t m) {
    const auto sender = static_cast<std::size_t>(m >> (ball_bits + hop_bits + seq_bits));
    if (sender == max_senders - 1) {
      return;
    }
    const auto seq = static_cast<std::uint32_t>((m >> (ball_bits + hop_bits)) & seq_mask);
    std::uint32_t& last = view().taken[at * max_senders + sender];
    if (((seq - last) & seq_mask) >= (seq_mask + 1) / 2) {
      violations_.fetch_add(1, std::memory_order_relaxed);
    }
    last = seq;
  }

  void send(std::size_t to, std::uint64_t m) {
    pin& p = pins_[to];
    Adapter::push(*p.q, m);
    // Both sides use read-modify-writes on `scheduled`: if this exchange comes after the
    // drainer's reset, it sees false and schedules; if before, the drainer's reset reads from it
    // (acquire) and its next pop sees our push. No message is left behind unscheduled.
    if (!p.scheduled.exchange(true, std::memory_order_acq_rel)) {
      pool_.spawn(drainer{this, to});
    }
  }

  void handle(std::size_t at, std::uint64_t m) {
    const std::uint64_t hops_left = (m >> ball_bits) & hop_mask;
    const std::uint64_t number = (m & ball_mask) - 1;
    if (number >= balls_ || hops_left == 0) {
      broken(Adapter::name(), "a corrupt message " + std::to_string(m));
    }
    check_order(at, m);
    if (hops_left > 1) {
      const std::size_t rig = at / pins_per_rig;
      // Where a ball goes depends on the ball and its hops only (not on who sent it).
      const std::size_t offset =
          1 + mix(m & (ball_mask | hop_mask << ball_bits)) % (pins_per_rig - 1); // never here
      const std::size_t to = rig * pins_per_rig + (at % pins_per_rig + offset) % pins_per_rig;
      send(to, message(static_cast<std::size_t>(number), hops_left - 1, to));
      return;
    }
    if (finished_[number].exchange(1, std::memory_order_relaxed) != 0) {
      broken(Adapter::name(), "ball " + std::to_string(number) + " finished twice");
    }
    if (left_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      all_done_.set_value();
    }
  }

  void drain(std::size_t at) {
    pin& p = pins_[at];
    std::uint64_t handled = 0;
    std::uint64_t m = 0;
    for (;;) {
      while (Adapter::try_pop(*p.q, m)) {
        handle(at, m);
        ++handled;
      }
      p.scheduled.exchange(false, std::memory_order_acq_rel);
      // A sender that saw `scheduled` still true relies on this look; if it finds a message,
      // the pin is taken again unless a newer drain task has it already.
      if (!Adapter::try_pop(*p.q, m)) {
        break;
      }
      handle(at, m);
      ++handled;
      if (p.scheduled.exchange(true, std::memory_order_acq_rel)) {
        break;
      }
    }
    p.handled.fetch_add(handled, std::memory_order_relaxed);
  }

  Pool& pool_;
  std::size_t balls_;
  std::uint64_t hops_;
  std::vector<pin> pins_;
  std::unique_ptr<std::atomic<std::uint8_t>[]> finished_;
  std::atomic<std::size_t> left_;
  std::promise<void> all_done_;
  const std::uint64_t serial_ = next_serial();
  std::atomic<int> next_sender_{0};
  std::atomic<std::uint64_t> violations_{0};

  static std::uint64_t next_serial() {
    static std::atomic<std::uint64_t> serial{0};
    return serial.fetch_add(1, std::memory_order_relaxed) + 1;
  }
};

template <typename Adapter>
void pinball(benchmark::State& state, int balls_per_rig) {
  const std::uint64_t hops = std::min<std::uint64_t>(
      hop_mask,
      std::max<std::uint64_t>(1, opts().items / static_cast<std::uint64_t>(rigs * balls_per_rig)));
  std::uint64_t messages = 0;
  for (auto _ : state) {
    // The pool outlives the board's tasks and the board outlives the pool: the pool is created
    // first, and the board is destroyed after the pool's workers are joined.
    std::unique_ptr<async_pool> pool(new async_pool(opts().threads));
    board<Adapter, async_pool> b(*pool, balls_per_rig, hops);
    auto done = b.done();
    const auto t0 = std::chrono::steady_clock::now();
    b.start();
    if (done.wait_for(std::chrono::seconds(300)) != std::future_status::ready) {
      broken(Adapter::name(), "stalled for 300 s: a message was lost");
    }
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    pool.reset(); // joins the workers: every drain task has returned
    state.SetIterationTime(seconds);
    const std::string error = b.verify();
    if (!error.empty()) {
      fail(state, std::string(Adapter::name()) + " pinball: " + error);
      return;
    }
    messages = b.messages();
    fifo_tally& tally = fifo_tallies()[current_case()];
    tally.violations += b.fifo_violations();
    tally.checked += messages;
    state.counters["ns_per_message"] = seconds * 1e9 / static_cast<double>(messages);
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * messages));
  state.counters["workers"] = opts().threads;
}

template <typename Adapter>
void register_pinball() {
  for (int balls : {1, 7, 41, 241}) {
    add_case(bench_name("pinball", "balls:" + std::to_string(balls), Adapter::name()),
             [balls](benchmark::State& st) { pinball<Adapter>(st, balls); });
  }
}

} // namespace async_bench

#if ASYNC_BENCH_PINBALL_SELFTEST
// The harness's test of this scenario's FIFO check (bench-smoke.pinball_selftest): a FIFO stand-in
// queue must show no violation, one that swaps every other pair must show some.
#include "../selftest/deque_adapters.h"

int main(int argc, char** argv) {
  using namespace async_bench;
  const binary_info info{"the pinball FIFO check's own test", "messages"};
  const int status = run_main(argc, argv, info, [] {
    register_pinball<deque_adapter<false>>();
    register_pinball<deque_adapter<true>>();
  });
  std::uint64_t fifo_violations = 0;
  std::uint64_t swapped_violations = 0;
  for (const auto& kv : fifo_tallies()) {
    (kv.first.find("swapping") != std::string::npos ? swapped_violations : fifo_violations) +=
        kv.second.violations;
  }
  std::printf("pinball selftest: FIFO stand-in %llu violations (expected 0), swapping stand-in "
              "%llu (expected some)\n",
              static_cast<unsigned long long>(fifo_violations),
              static_cast<unsigned long long>(swapped_violations));
  return status != 0 || fifo_violations != 0 || swapped_violations == 0 ? 1 : 0;
}
#else
int main(int argc, char** argv) {
  using namespace async_bench;
  const binary_info info{"messages hopping between queues drained by pool tasks (tachyonix)",
                         "messages"};
  return run_main(argc, argv, info, [] {
    for_each_competitor(queue_competitors<std::uint64_t>(), [](auto competitor) {
      using queue = typename decltype(competitor)::type;
      if constexpr (queue::primary && !queue::spsc) {
        register_pinball<queue>();
      }
    });
  });
}
#endif
