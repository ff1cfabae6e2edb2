// SPDX-License-Identifier: BSL-1.0
// Both queues attacked the way an outside review attacked them: an element type that counts
// its lives, throws from some constructors and is sometimes slow to construct and to move;
// every calling style mixed on both sides; 16 producers and 16 consumers (on 2 cores most of
// them are descheduled at any moment); close() in the middle of the run; over-aligned
// elements; tiny segments with tags near their wrap; bounded capacities 1, 2, 3, 5 and 1024.
//
// Each run checks: everything a producer saw accepted is delivered exactly once, nothing it
// saw refused (closed, or its constructor threw) is delivered, each producer's elements arrive
// in order at every consumer, every caller returns after close(), and every element that was
// constructed is destroyed once (also those left in the queue at its destruction).
//
// ASYNC_SOAK_SEED=<n> picks the seed of the call mix (printed by every run); ASYNC_STRESS_SCALE
// sizes the run, so a long soak is ASYNC_STRESS_SCALE=50 with a seed of one's choice.
#include <async/bounded_queue.h>
#include <async/queue.h>

#include "stress.h"
#include "trait_presets.h"

#include "async_catch.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace {

using namespace std::chrono_literals;

std::uint64_t soak_seed() { return async_test::soak_seed("hostile stress"); }

using async_test::mix;

void busy(std::chrono::microseconds d) {
  const auto end = std::chrono::steady_clock::now() + d;
  while (std::chrono::steady_clock::now() < end) {
  }
}

std::atomic<long>& alive() {
  static std::atomic<long> n{0};
  return n;
}

// What a producer hands over: producer p's k-th element.
struct spec {
  std::uint32_t p;
  std::uint32_t k;
};

// Built from a spec: about one in 37 throws, one in 53 is slow to build, one in 61 is slow to
// move or copy. Counts its lives in alive().
template <std::size_t Align>
struct alignas(Align) hostile {
  static bool throws(const spec& s) {
    return mix(soak_seed() ^ (s.p * 1000003ull + s.k)) % 37 == 0;
  }

  hostile() { alive().fetch_add(1); }
  explicit hostile(const spec& s) : p(s.p), k(s.k) {
    if (throws(s)) {
      throw std::runtime_error("hostile: this one throws");
    }
    if (s.k % 53 == 7) {
      busy(30us);
    }
    alive().fetch_add(1);
  }
  hostile(const hostile& o) : p(o.p), k(o.k) {
    slow_sometimes();
    alive().fetch_add(1);
  }
  hostile(hostile&& o) noexcept : p(o.p), k(o.k) {
    slow_sometimes();
    alive().fetch_add(1);
  }
  hostile& operator=(const hostile& o) {
    p = o.p;
    k = o.k;
    return *this;
  }
  hostile& operator=(hostile&& o) noexcept {
    p = o.p;
    k = o.k;
    return *this;
  }
  ~hostile() { alive().fetch_sub(1); }

  void slow_sometimes() const noexcept {
    if (k % 61 == 11) {
      busy(20us);
    }
  }

  std::uint32_t p = 0;
  std::uint32_t k = 0;
};

enum class outcome : std::uint8_t { pending, accepted, refused };

struct ledger {
  std::size_t producers;
  std::size_t per_producer;
  std::unique_ptr<std::atomic<std::uint8_t>[]> outcomes;
  std::unique_ptr<std::atomic<std::uint8_t>[]> delivered;

  ledger(std::size_t p, std::size_t n)
      : producers(p), per_producer(n), outcomes(new std::atomic<std::uint8_t>[p * n]),
        delivered(new std::atomic<std::uint8_t>[p * n]) {
    for (std::size_t i = 0; i < p * n; ++i) {
      outcomes[i].store(static_cast<std::uint8_t>(outcome::pending));
      delivered[i].store(0);
    }
  }
  void mark(std::uint32_t p, std::uint32_t k, outcome o) {
    outcomes[p * per_producer + k].store(static_cast<std::uint8_t>(o));
  }
};

struct verdict {
  std::size_t accepted = 0, refused = 0, pending = 0, lost = 0, duplicated = 0,
              refused_delivered = 0, garbage = 0, disorder = 0;
  std::string first_problem; // the first lost, duplicated or refused-but-delivered element
};

// One run: P producers, C consumers, close() once about half of the elements went in.
// Queue-specific calls come from the Ops policy.
template <typename Ops, typename Queue>
verdict attack(Queue& q, std::size_t producers, std::size_t consumers, std::size_t per_producer) {
  ledger book(producers, per_producer);
  std::atomic<std::size_t> accepted{0};
  std::atomic<std::size_t> disorder{0};
  std::atomic<std::size_t> garbage{0};
  std::atomic<std::size_t> returned{0};
  async_test::start_barrier barrier(producers + consumers);
  std::vector<std::thread> threads;
  for (std::size_t p = 0; p < producers; ++p) {
    threads.emplace_back([&, p] {
      barrier.arrive_and_wait();
      Ops::produce(q, book, static_cast<std::uint32_t>(p), accepted);
      returned.fetch_add(1);
    });
  }
  for (std::size_t c = 0; c < consumers; ++c) {
    threads.emplace_back([&, c] {
      std::vector<std::int64_t> last(producers, -1);
      barrier.arrive_and_wait();
      auto receive = [&](const typename Queue::value_type& v) {
        if (v.p >= producers || v.k >= per_producer) {
          garbage.fetch_add(1);
          return;
        }
        if (static_cast<std::int64_t>(v.k) <= last[v.p] && disorder.fetch_add(1) == 0) {
          std::fprintf(stderr,
                       "  first out of order: consumer %zu got producer %zu's element %zu "
                       "after its element %lld\n",
                       c, static_cast<std::size_t>(v.p), static_cast<std::size_t>(v.k),
                       static_cast<long long>(last[v.p]));
        }
        last[v.p] = v.k;
        book.delivered[v.p * per_producer + v.k].fetch_add(1);
      };
      Ops::consume(q, c, receive);
      returned.fetch_add(1);
    });
  }
  // close() in the middle of the storm.
  const std::size_t half = producers * per_producer / 2;
  async_test::eventually_equal([&] { return accepted.load() >= half; }, true, 20000ms);
  q.close();
  const std::size_t everyone = producers + consumers;
  if (!async_test::eventually_equal([&] { return returned.load(); }, everyone, 30000ms)) {
    std::fprintf(stderr, "FAILED: %zu of %zu callers returned after close()\n", returned.load(),
                 everyone);
    std::abort(); // the callers still use q: nothing can be unwound
  }
  for (auto& t : threads) {
    t.join();
  }
  verdict v;
  v.disorder = disorder.load();
  v.garbage = garbage.load();
  for (std::size_t i = 0; i < producers * per_producer; ++i) {
    const auto o = static_cast<outcome>(book.outcomes[i].load());
    const auto d = book.delivered[i].load();
    const auto name = [&] {
      return "producer " + std::to_string(i / per_producer) + "'s element " +
             std::to_string(i % per_producer);
    };
    if (o == outcome::accepted) {
      ++v.accepted;
      v.lost += d == 0 ? 1 : 0;
      v.duplicated += d > 1 ? d - 1 : 0;
      if (d != 1 && v.first_problem.empty()) {
        v.first_problem = name() + (d == 0 ? " was accepted and lost" : " was delivered twice");
      }
    } else if (o == outcome::refused) {
      ++v.refused;
      v.refused_delivered += d;
      if (d != 0 && v.first_problem.empty()) {
        v.first_problem = name() + " was refused and delivered";
      }
    } else {
      ++v.pending;
    }
  }
  return v;
}

void check(const verdict& v) {
  std::printf("  accepted %zu, refused %zu\n", v.accepted, v.refused);
  INFO("first problem: " << (v.first_problem.empty() ? "none" : v.first_problem));
  CHECK(v.pending == 0); // every call reported its element accepted or refused
  CHECK(v.lost == 0);
  CHECK(v.duplicated == 0);
  CHECK(v.refused_delivered == 0);
  CHECK(v.garbage == 0);
  CHECK(v.disorder == 0);
  CHECK(v.accepted > 0);
  CHECK(v.refused > 0); // close() came in the middle, and some constructors threw
}

// ---- async::queue -------------------------------------------------------------------------------

// The single-element calls of the consumer mixes below. receive_one makes one and hands what it
// got to `receive`; false only when a blocking call found the queue closed and drained (the
// consumer ends).
enum class call { blocking, timed, try_once, try_or_yield };

template <typename Queue, typename Receive>
bool receive_one(Queue& q, typename Queue::value_type& v, call how, Receive& receive) {
  switch (how) {
  case call::blocking:
    if (!q.blocking_dequeue(v)) {
      return false;
    }
    receive(v);
    break;
  case call::timed:
    if (q.dequeue_for(v, 200us)) {
      receive(v);
    }
    break;
  case call::try_once:
  case call::try_or_yield:
    if (q.dequeue(v)) {
      receive(v);
    } else if (how == call::try_or_yield) {
      std::this_thread::yield();
    }
    break;
  }
  return true;
}

struct unbounded_ops {
  template <typename Queue>
  static void produce(Queue& q, ledger& book, std::uint32_t p, std::atomic<std::size_t>& accepted) {
    std::uint32_t k = 0;
    const auto n = static_cast<std::uint32_t>(book.per_producer);
    bool closed = false;
    while (k < n) {
      const std::uint64_t r = mix(soak_seed() + p * 7919ull + k);
      if (closed) {
        book.mark(p, k++, outcome::refused);
        continue;
      }
      if (r % 3 == 0) { // bulk of 1..17, possibly across segments
        const std::uint32_t batch =
            std::min<std::uint32_t>(1 + static_cast<std::uint32_t>(r >> 8) % 17, n - k);
        std::vector<spec> in;
        for (std::uint32_t j = 0; j < batch; ++j) {
          in.push_back(spec{p, k + j});
        }
        std::size_t went = 0;
        try {
          went = q.bulk_enqueue(in.begin(), in.size());
        } catch (const std::runtime_error&) {
          // The elements before the throwing one are in; it and the rest are not.
          std::uint32_t j = 0;
          while (!Queue::value_type::throws(in[j])) {
            ++j;
          }
          went = j;
        }
        for (std::uint32_t j = 0; j < batch; ++j) {
          book.mark(p, k + j, j < went ? outcome::accepted : outcome::refused);
        }
        accepted.fetch_add(went);
        if (went < batch && !Queue::value_type::throws(in[went])) {
          closed = true; // it stopped at the close
        }
        k += batch;
        continue;
      }
      try {
        const bool in = q.enqueue(spec{p, k});
        book.mark(p, k, in ? outcome::accepted : outcome::refused);
        if (in) {
          accepted.fetch_add(1);
        } else {
          closed = true;
        }
      } catch (const std::runtime_error&) {
        book.mark(p, k, outcome::refused);
      }
      ++k;
    }
  }

  template <typename Queue, typename Receive>
  static void consume(Queue& q, std::size_t c, Receive receive) {
    typename Queue::value_type v;
    // An array, not a std::vector: C++14's allocator ignores over-alignment (alignas(4096)).
    typename Queue::value_type batch[9];
    // Blocking, timed, bulk (below) and try calls in turn, each consumer starting elsewhere.
    const call mix[] = {call::blocking, call::timed, call::try_once, call::try_once};
    for (std::uint64_t round = 0;; ++round) {
      if ((c + round) % 4 == 2) {
        // Every other time the call gets an lvalue pointer, which it advances in place past what
        // it wrote: what is received is what lies between the array and where the pointer
        // stopped, so a pointer left behind loses elements and one run ahead delivers garbage.
        typename Queue::value_type* end = batch;
        if ((round / 4) % 2 == 0) {
          end = batch + q.bulk_dequeue(batch, 1 + c % 9);
        } else {
          // The count is left unused on purpose: the pointer alone says what was written.
          static_cast<void>(q.bulk_dequeue(end, 1 + c % 9));
        }
        for (auto* e = batch; e != end; ++e) {
          receive(*e);
        }
      } else if (!receive_one(q, v, mix[(c + round) % 4], receive)) {
        return; // closed and drained
      }
      if (q.is_closed() && q.was_empty() && (c + round) % 4 != 0) {
        // Drained unless an element is still on its way: a blocking call settles it.
        if (!q.blocking_dequeue(v)) {
          return;
        }
        receive(v);
      }
    }
  }
};

// 4-slot segments, 24-bit tags (a run starts them just below their wrap).
using tiny_traits = async_test::tiny_24bit_tags_pow2;

template <std::size_t Align, typename Traits>
void attack_unbounded(std::uint64_t first_ticket) {
  using element = hostile<Align>;
  const std::size_t per = async_test::scaled(20000, 500);
  alive().store(0);
  {
    async::queue<element, Traits> q(0, async::detail::first_ticket{first_ticket});
    const verdict v = attack<unbounded_ops>(q, 16, 16, per);
    INFO("async::queue, alignment " << Align << ", " << per << " per producer");
    check(v);
  }
  CHECK(alive().load() == 0); // every element constructed was destroyed once
}

// ---- async::bounded_queue -----------------------------------------------------------------------

struct bounded_ops {
  template <typename Queue>
  static void produce(Queue& q, ledger& book, std::uint32_t p, std::atomic<std::size_t>& accepted) {
    const auto n = static_cast<std::uint32_t>(book.per_producer);
    bool closed = false;
    for (std::uint32_t k = 0; k < n; ++k) {
      if (closed) {
        book.mark(p, k, outcome::refused);
        continue;
      }
      const std::uint64_t r = mix(soak_seed() + p * 7919ull + k);
      bool in = false;
      try {
        switch (r % 3) {
        case 0:
          in = q.blocking_enqueue(spec{p, k});
          closed = !in;
          break;
        case 1:
          while (!(in = q.enqueue_for(spec{p, k}, 300us)) && !q.is_closed()) {
          }
          closed = !in;
          break;
        default:
          while (!(in = q.enqueue(spec{p, k})) && !q.is_closed()) {
            std::this_thread::yield();
          }
          closed = !in;
          break;
        }
      } catch (const std::runtime_error&) {
        in = false;
      }
      book.mark(p, k, in ? outcome::accepted : outcome::refused);
      if (in) {
        accepted.fetch_add(1);
      }
    }
  }

  template <typename Queue, typename Receive>
  static void consume(Queue& q, std::size_t c, Receive receive) {
    typename Queue::value_type v;
    // Blocking, timed and try calls in turn, each consumer starting elsewhere.
    const call mix[] = {call::blocking, call::timed, call::try_or_yield};
    for (std::uint64_t round = 0;; ++round) {
      if (!receive_one(q, v, mix[(c + round) % 3], receive)) {
        return; // closed and drained
      }
    }
  }
};

template <std::size_t Align>
void attack_bounded(std::size_t capacity) {
  using element = hostile<Align>;
  const std::size_t per = async_test::scaled(10000, 500);
  alive().store(0);
  {
    async::bounded_queue<element> q(capacity);
    const verdict v = attack<bounded_ops>(q, 16, 16, per);
    INFO("async::bounded_queue, capacity " << capacity << ", alignment " << Align);
    check(v);
  }
  CHECK(alive().load() == 0);
}

} // namespace

TEST_CASE("hostile: async::queue, every call style, close mid-storm, throwing and slow elements",
          "[queue][stress][hostile]") {
  soak_seed();
  attack_unbounded<alignof(std::uint64_t), async::traits>(0);
  attack_unbounded<alignof(std::uint64_t), tiny_traits>(((std::uint64_t(1) << 24) - 16) * 4);
  attack_unbounded<64, tiny_traits>(0);
  attack_unbounded<128, async::traits>(0);
  attack_unbounded<4096, tiny_traits>(0);
}

TEST_CASE("hostile: async::bounded_queue, capacities 1, 2, 3, 5, 1024, close mid-storm",
          "[bounded_queue][stress][hostile]") {
  soak_seed();
  for (std::size_t capacity : {1, 2, 3, 5, 1024}) {
    attack_bounded<alignof(std::uint64_t)>(capacity);
  }
  attack_bounded<64>(3);
  attack_bounded<128>(5);
  attack_bounded<4096>(2);
}
