// SPDX-License-Identifier: BSL-1.0
// The building blocks of the unbounded queue: the {index, tag} word, the 3-level, grow-only,
// type-stable node storage (sequential, exhaustion, lifetimes, concurrent growth), and the
// layout of a segment's slots.
#include <async/detail/unbounded/node_storage.h>
#include <async/detail/unbounded/segment_list.h>
#include <async/detail/unbounded/tagged_index.h>

#include "test_support.h"

#include "async_catch.h"

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

using async::detail::node_storage;
using async::detail::tagged_index;

namespace {

struct counted_node {
  static std::atomic<long>& alive() {
    static std::atomic<long> n{0};
    return n;
  }
  counted_node() { alive().fetch_add(1); }
  ~counted_node() { alive().fetch_sub(1); }
  std::atomic<std::uint64_t> owner{0};
  char payload[40] = {};
};

} // namespace

TEST_CASE("tagged_index packs, unpacks and wraps its tag", "[tagged_index]") {
  using t32 = tagged_index<>;
  const auto w = t32::make(123456u, 0xdeadbeefu);
  CHECK(t32::index(w) == 123456u);
  CHECK(t32::tag(w) == 0xdeadbeefu);
  CHECK(t32::next_tag(0xffffffffu) == 0u);
  CHECK(t32::is_null(t32::make(t32::null_index, 7)));
  CHECK_FALSE(t32::is_null(t32::make(0, 7)));

  // A test-width tag wraps after 2^4 reuses and never spills into the index.
  using small = tagged_index<20, 4>;
  auto v = small::make(0xABCDE, 0);
  for (int i = 1; i <= 40; ++i) {
    v = small::make(small::index(v), small::next_tag(small::tag(v)));
    REQUIRE(small::index(v) == 0xABCDEu);
    REQUIRE(small::tag(v) == static_cast<std::uint32_t>(i % 16));
  }
  CHECK(small::null_index == 0xFFFFFu);
  CHECK(small::make(0x1FFFFF, 0x1F) == small::make(0xFFFFF, 0xF)); // excess bits are masked
}

TEST_CASE("node_storage hands out indices across block boundaries", "[node_storage]") {
  counted_node::alive() = 0;
  {
    node_storage<counted_node, 4, 2, 3> s; // 24 nodes: 4 middle blocks of 2 leaves of 3
    CHECK(s.bytes() == 0);
    CHECK(counted_node::alive() == 0); // nothing is built before it is needed
    for (std::uint32_t expect = 0; expect < 24; ++expect) {
      const std::uint32_t i = s.allocate();
      REQUIRE(i == expect);
      s[i].owner.store(i + 100);
    }
    for (std::uint32_t i = 0; i < 24; ++i) {
      REQUIRE(s[i].owner.load() == i + 100); // each index names its own node
    }
    CHECK(counted_node::alive() == 24);
    CHECK_THROWS_AS(s.allocate(), std::length_error);
    CHECK_THROWS_AS(s.allocate(), std::length_error); // and stays exhausted
    CHECK(s[23].owner.load() == 123);                 // nothing was disturbed
    CHECK(s.bytes() >= 24 * sizeof(counted_node));
  }
  CHECK(counted_node::alive() == 0); // every node destroyed exactly once
}

TEST_CASE("node_storage grows correctly under concurrent allocation", "[node_storage]") {
  counted_node::alive() = 0;
  {
    constexpr std::size_t L1 = 64, L2 = 4, L3 = 8; // small blocks: many publication races
    node_storage<counted_node, L1, L2, L3> s;
    const int threads = 8;
    const std::uint32_t per_thread =
        static_cast<std::uint32_t>(std::min<std::size_t>(async_test::scaled(200, 50), 256));
    std::vector<std::vector<std::uint32_t>> got(threads);
    async_test::start_barrier barrier(threads);
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) {
      pool.emplace_back([&, t] {
        barrier.arrive_and_wait();
        for (std::uint32_t k = 0; k < per_thread; ++k) {
          const std::uint32_t i = s.allocate();
          // Claim the node: a second owner of the same index would find it taken.
          std::uint64_t expected = 0;
          if (s[i].owner.compare_exchange_strong(expected, static_cast<std::uint64_t>(t) + 1)) {
            got[static_cast<std::size_t>(t)].push_back(i);
          }
        }
      });
    }
    for (auto& th : pool) {
      th.join();
    }
    std::set<std::uint32_t> all;
    std::size_t total = 0;
    for (int t = 0; t < threads; ++t) {
      for (std::uint32_t i : got[static_cast<std::size_t>(t)]) {
        REQUIRE(s[i].owner.load() == static_cast<std::uint64_t>(t) + 1);
        all.insert(i);
        ++total;
      }
    }
    CHECK(total == static_cast<std::size_t>(threads) * per_thread); // no index given twice
    CHECK(all.size() == total);
    CHECK(*all.rbegin() == total - 1); // dense: 0 .. total-1
    const std::size_t leaves = (total + L3 - 1) / L3;
    CHECK(counted_node::alive() == static_cast<long>(leaves * L3)); // losers freed their blocks
  }
  CHECK(counted_node::alive() == 0);
}

namespace {

struct three_bytes {
  char c[3];
};
struct twenty_four_bytes {
  std::uint64_t w[3];
};
struct alignas(16) sixteen_aligned {
  std::uint64_t w[2];
};
struct alignas(64) line_aligned {
  char c[64];
};
struct two_hundred_bytes {
  char c[200];
};
struct forty_bytes {
  std::uint64_t w[5];
};
struct fifty_six_chars {
  char c[56];
};
struct twenty_bytes {
  std::uint32_t w[5];
};

// Checks every slot of segment 0 of a segment_list<T, std::uint8_t, Segment, ...> with padding
// granule Line: states and elements do not overlap, elements are aligned, a slot's state and
// element share a 64-byte line where both are small, and (where the segment has room for it)
// consecutive tickets have their states on different 64-byte lines, or with SideBySide
// (traits::SPREAD_TICKETS = false) the tickets of a group follow one another in it. Returns the
// bytes that the segment's slots span, per slot.
template <typename T, std::size_t Segment, std::size_t Line, bool SideBySide = false>
double check_slot_layout() {
  using list = async::detail::segment_list<T, std::uint8_t, Segment, 4, 4, 2, 32, 32, Line,
                                           std::atomic, SideBySide>;
  list l(0, 0);
  const std::uint32_t i = list::link::index(l.hint(list::producers));
  struct range {
    std::uintptr_t begin;
    std::uintptr_t end;
  };
  std::vector<range> used;
  std::vector<std::uintptr_t> states;
  for (std::uint64_t t = 0; t < Segment; ++t) {
    const auto s = l.slot(i, t);
    const auto state = reinterpret_cast<std::uintptr_t>(&s.state);
    const auto element = reinterpret_cast<std::uintptr_t>(&s.element);
    REQUIRE(element % alignof(T) == 0);
    used.push_back(range{state, state + sizeof(s.state)});
    used.push_back(range{element, element + sizeof(T)});
    states.push_back(state);
    if (sizeof(T) <= 16) {
      CHECK(state / 64 == element / 64); // one line per ticket
    }
  }
  std::sort(used.begin(), used.end(),
            [](const range& a, const range& b) { return a.begin < b.begin; });
  for (std::size_t k = 1; k < used.size(); ++k) {
    REQUIRE(used[k - 1].end <= used[k].begin); // no two parts of slots overlap
  }
  if (SideBySide) {
    // Side by side: a ticket's state is the byte after its predecessor's, except where a new
    // group starts, and only groups are padded (the bytes per slot are as without spreading).
    std::size_t same_line = 0;
    for (std::size_t k = 1; k < states.size(); ++k) {
      CHECK(states[k - 1] < states[k]);
      if (states[k] == states[k - 1] + 1) {
        CHECK(states[k - 1] / 64 == states[k] / 64);
        ++same_line;
      }
    }
    if (sizeof(T) <= 16 && Segment >= 8) {
      CHECK(same_line >= Segment / 2); // most neighbours share a group, and so a line
    }
  } else if (Segment >= 64 && (Line >= 128 || sizeof(T) <= 16)) {
    for (std::size_t k = 1; k < states.size(); ++k) {
      CHECK(states[k - 1] / 64 != states[k] / 64); // consecutive tickets: different lines
    }
  }
  return static_cast<double>(used.back().end - used.front().begin) / Segment;
}

} // namespace

TEST_CASE("segment_list: slots do not overlap, are aligned and spread over lines",
          "[segment_list]") {
  // Bytes per slot of a full segment: a one-byte state and the element, in groups of up to 64
  // bytes (a state padded beside each element would take 16 bytes for an 8-byte element).
  CHECK(check_slot_layout<std::uint64_t, 256, 128>() < 9.5);
  CHECK(check_slot_layout<std::uint64_t, 256, 64>() < 9.5);
  CHECK(check_slot_layout<std::uint32_t, 256, 128>() < 5.5);
  CHECK(check_slot_layout<char, 256, 128>() < 2.5);
  CHECK(check_slot_layout<std::uint64_t, 2, 128>() < 20.5); // two groups of 24 bytes
  CHECK(check_slot_layout<std::uint64_t, 16, 32>() < 12.5);
  CHECK(check_slot_layout<std::uint16_t, 64, 128>() < 4.1);
  CHECK(check_slot_layout<three_bytes, 256, 128>() < 4.5);
  CHECK(check_slot_layout<twenty_four_bytes, 256, 128>() < 32.5);
  CHECK(check_slot_layout<sixteen_aligned, 256, 128>() < 21.5);
  CHECK(check_slot_layout<line_aligned, 16, 128>() < 128.5);
  CHECK(check_slot_layout<two_hundred_bytes, 8, 64>() < 208.5);
  // Groups of one slot, or not filling a line: spread so that neighbours do not share a line.
  CHECK(check_slot_layout<forty_bytes, 256, 128>() < 48.5);
  CHECK(check_slot_layout<fifty_six_chars, 256, 128>() < 57.5);
  CHECK(check_slot_layout<twenty_bytes, 256, 128>() < 22.5);
  CHECK(check_slot_layout<two_hundred_bytes, 256, 128>() < 208.5);
  CHECK(check_slot_layout<std::string, 256, 128>() < 40.5);

  // Side by side (traits::SPREAD_TICKETS = false): the same bytes, neighbours in one group.
  CHECK(check_slot_layout<std::uint64_t, 256, 128, true>() < 9.5);
  CHECK(check_slot_layout<std::uint64_t, 4, 128, true>() < 16.5); // one group of 4 slots
  CHECK(check_slot_layout<char, 256, 128, true>() < 2.5);
  CHECK(check_slot_layout<three_bytes, 256, 128, true>() < 4.5);
  CHECK(check_slot_layout<forty_bytes, 256, 128, true>() < 48.5);
  CHECK(check_slot_layout<line_aligned, 16, 128, true>() < 128.5);
  CHECK(check_slot_layout<std::string, 256, 128, true>() < 40.5);
  using side_words =
      async::detail::slot_group_shape<std::uint64_t, std::uint8_t, 64, 128, 256, std::atomic, true>;
  CHECK(side_words::value.count == 7);
  CHECK(side_words::value.groups == 37);
  using side_forties =
      async::detail::slot_group_shape<forty_bytes, std::uint8_t, 64, 128, 256, std::atomic, true>;
  CHECK(side_forties::value.per_line == 1); // not spread: 48 bytes between neighbours
  CHECK(side_forties::value.groups == 256);

  // The shapes themselves (also read by reference: C++14 needs the definition of `value`).
  using words =
      async::detail::slot_group_shape<std::uint64_t, std::uint8_t, 64, 128, 256, std::atomic>;
  CHECK(words::value.count == 7); // 8 bytes of states, 56 of elements
  CHECK(words::value.whole_lines);
  CHECK(words::value.alignment == 64);
  CHECK(words::value.group_bytes == 64);
  CHECK(words::value.per_line == 1);
  CHECK(words::value.groups == 37);
  CHECK(words::value.spread == 37);
  CHECK(words::natural_alignment() == alignof(std::uint64_t));
  using forties =
      async::detail::slot_group_shape<forty_bytes, std::uint8_t, 64, 128, 256, std::atomic>;
  CHECK(forties::value.count == 1);
  CHECK_FALSE(forties::value.whole_lines);
  CHECK(forties::value.group_bytes == 48);
  CHECK(forties::value.per_line == 2); // 96 bytes between neighbours
  CHECK(forties::value.groups == 256);
  CHECK(forties::value.spread == 128);
  CHECK(forties::at(0) == 0);
  CHECK(forties::at(1) == 2);
  CHECK(forties::at(128) == 1);
}
