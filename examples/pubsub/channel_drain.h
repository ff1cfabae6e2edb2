// SPDX-License-Identifier: BSL-1.0
// A channel's drain: hands the channel's frames to its subscribers' outboxes, one drain at a
// time per channel, pausing at a subscriber whose outbox is at its mark; and the wake-up of the
// publishers that wait for room.
#ifndef ASYNC_EXAMPLES_PUBSUB_CHANNEL_DRAIN_H
#define ASYNC_EXAMPLES_PUBSUB_CHANNEL_DRAIN_H

#include "core.h"
#include "publisher_session.h"
#include "subscriber_session.h"

#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

namespace pubsub {

namespace detail {

inline void core::resume_publishers(channel& c) {
  std::vector<std::shared_ptr<publisher_session>> waiters;
  {
    std::lock_guard<std::mutex> lock(c.mutex);
    waiters.swap(c.waiters);
  }
  for (auto& p : waiters) {
    auto who = std::move(p);
    net::post(who->executor(), [who] { who->resume(); });
  }
}

// One run of channel c's drain: hands up to drain_batch frames to its subscribers, stopping at
// a subscriber whose outbox is at its mark (that subscriber resumes the drain); schedules the
// next run while frames are pending.
inline void core::drain(channel& c) {
  if (c.carry_at == c.carry.size()) {
    c.carry.clear();
    c.carry_at = 0;
    const std::int64_t counted = c.pending.load(std::memory_order_acquire);
    message m;
    while (static_cast<std::int64_t>(c.carry.size()) < counted && c.carry.size() < drain_batch &&
           c.queue->try_pop(m)) {
      c.carry.push_back(std::move(m));
    }
    if (c.carry.empty()) { // counted, but its push has not finished: look again shortly
      schedule_drain(c);
      return;
    }
    std::lock_guard<std::mutex> lock(c.mutex); // after taking the frames out: see subscribe()
    c.carry_for = c.subscribers;
  }
  const std::shared_ptr<const subscriber_list> keep = c.carry_for; // reset below
  const subscriber_list& subscribers = *keep;
  // A subscriber at its mark since the last run (another channel filled it): wait for it.
  for (const auto& s : subscribers) {
    if (s->hold(c)) {
      return; // nothing of the channel is touched after this: the drain may run again now
    }
  }
  std::int64_t handed = 0;
  bool full = false;
  while (!full && c.carry_at < c.carry.size()) {
    const message& m = c.carry[c.carry_at];
    for (const auto& s : subscribers) {
      full = s->deliver(m) || full;
    }
    c.carry[c.carry_at].reset();
    ++c.carry_at;
    ++handed;
  }
  const bool carry_left = c.carry_at < c.carry.size();
  if (!carry_left) {
    c.carry_for.reset(); // the sessions of subscribers that ended go now, not at the next run
  }
  // Past this point the channel is not ours any more when `left` comes out 0: a publisher may
  // start the next drain at once. Nothing of the channel but its waiters (under its lock) is
  // touched.
  const std::int64_t left = c.pending.fetch_sub(handed, std::memory_order_acq_rel) - handed;
  resume_publishers(c);
  // The channel waits for a subscriber at its mark, which resumes this drain. Only while frames
  // are left in the carry: they keep `pending` above 0, so that no publisher starts a second
  // drain meanwhile. (Otherwise the next run's first look holds.)
  if (full && carry_left) {
    for (const auto& s : subscribers) {
      if (s->hold(c)) {
        return; // nothing of the channel is touched after this: the drain may run again now
      }
    }
  }
  if (left > 0) {
    schedule_drain(c); // a fresh task: other channels and sessions run in between
  }
}

} // namespace detail

} // namespace pubsub

#endif // ASYNC_EXAMPLES_PUBSUB_CHANNEL_DRAIN_H
