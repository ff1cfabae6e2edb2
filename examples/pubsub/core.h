// SPDX-License-Identifier: BSL-1.0
// What the sessions share: the channels (a queue each, its subscribers, the publishers waiting
// for room, the drain's carry), the event loop, the counters, the log.
#ifndef ASYNC_EXAMPLES_PUBSUB_CORE_H
#define ASYNC_EXAMPLES_PUBSUB_CORE_H

#include "channel_queue.h"
#include "event_loop.h"
#include "frame.h"
#include "options.h"

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace pubsub {

namespace detail {

class core;
class subscriber_session;
class publisher_session;
using subscriber_list = std::vector<std::shared_ptr<subscriber_session>>;

// ---- channels ---------------------------------------------------------------------------------

struct channel {
  channel(std::uint16_t n, std::unique_ptr<channel_queue> q)
      : id(n), queue(std::move(q)), subscribers(std::make_shared<subscriber_list>()) {}

  const std::uint16_t id;
  const std::unique_ptr<channel_queue> queue;
  // Frames pushed (counted once in) and not yet handed to the subscribers. The push that takes
  // it from 0 schedules the drain; the drain that takes it back to 0 ends: one drain at a time.
  std::atomic<std::int64_t> pending{0};

  std::mutex mutex;                                        // guards subscribers and waiters
  std::shared_ptr<const subscriber_list> subscribers;      // copied on write
  std::vector<std::shared_ptr<publisher_session>> waiters; // publishers waiting for room

  // The drain's own (one drain at a time): frames taken out and not yet handed over, and the
  // subscribers they go to (those subscribed when they were taken out).
  std::vector<message> carry;
  std::size_t carry_at = 0;
  std::shared_ptr<const subscriber_list> carry_for;
};

// ---- what the sessions share ------------------------------------------------------------------

class core {
public:
  static constexpr std::size_t drain_batch = 64;

  explicit core(broker_options o) : options(std::move(o)) {}

  const broker_options options;
  std::vector<std::unique_ptr<channel>> channels;
  std::unique_ptr<runtime> loop;

  std::atomic<bool> stopping{false};
  std::atomic<std::uint64_t> frames_in{0};
  std::atomic<std::uint64_t> refused{0};
  std::atomic<std::uint64_t> stalled{0};
  std::atomic<std::uint64_t> accept_failures{0};
  std::atomic<std::int64_t> sessions{0};
  std::atomic<unsigned> next_id{1};

  std::mutex registry_mutex; // guards registry: the subscribers the stall sweeper looks at
  std::vector<std::weak_ptr<subscriber_session>> registry;

  net::any_io_executor executor() { return loop->executor(); }

  void log(const std::string& what) noexcept {
    try {
      if (options.log) {
        options.log(what);
        return;
      }
      std::lock_guard<std::mutex> lock(log_mutex_);
      std::fprintf(stderr, "pubsub broker: %s\n", what.c_str());
    } catch (...) {
      // a log line that cannot be written (no memory) is not worth a connection
    }
  }

  /// Puts `m` into channel `c` (moved from on success); false when the channel is full, and
  /// then `who` waits on the channel (resumed by the drain) with `m` left as it was.
  bool publish(channel& c, message& m, const std::shared_ptr<publisher_session>& who) {
    if (!push(c, m)) {
      // Checked again under the lock the drain takes after it has made room: either the drain
      // comes after us and sees the waiter, or its room is visible to this second try.
      std::lock_guard<std::mutex> lock(c.mutex);
      if (!push(c, m)) {
        c.waiters.push_back(who);
        return false;
      }
    }
    if (c.pending.fetch_add(1, std::memory_order_acq_rel) == 0) {
      schedule_drain(c);
    }
    return true;
  }

  void schedule_drain(channel& c) {
    channel* p = &c;
    net::post(executor(), [this, p] { drain(*p); });
  }

  void drain(channel& c);

private:
  bool push(channel& c, message& m) {
    return c.pending.load(std::memory_order_acquire) <
               static_cast<std::int64_t>(options.channel_capacity) &&
           c.queue->try_push(m);
  }
  void resume_publishers(channel& c);

  std::mutex log_mutex_;
};

// Closes a socket at once; an abortive close (a reset) when the broker stops, so that a client
// still sending sees the end instead of a zero window.
inline void close_socket(tcp::socket& socket, bool abort) noexcept {
  error_code ignored;
  if (abort) {
    socket.set_option(net::socket_base::linger(true, 0), ignored);
  } else {
    socket.shutdown(tcp::socket::shutdown_both, ignored);
  }
  socket.close(ignored);
}

// ---- what every session does ------------------------------------------------------------------

// Why a session ended after an exception, or "" when there is no memory to say it.
inline std::string failure_reason(const char* what) noexcept {
  std::string why;
  try {
    why = std::string("failed (") + what + "); connection closed";
  } catch (...) {
    why.clear();
  }
  return why;
}

// Runs `f` for a session; an exception from it (std::bad_alloc, say) ends the session through
// `end(why)`.
template <typename F, typename End>
void run_guarded(F&& f, End&& end) noexcept {
  try {
    f();
  } catch (const std::exception& e) {
    end(failure_reason(e.what()));
  } catch (...) {
    end(failure_reason("an exception"));
  }
}

// Logs the end of session `id` of `kind` ("publisher 3: <why>") when it has a reason and there
// is memory to say it.
inline void log_end(core& c, const char* kind, unsigned id, const std::string& why) noexcept {
  if (why.empty()) {
    return;
  }
  try {
    c.log(std::string(kind) + " " + std::to_string(id) + ": " + why);
  } catch (...) {
    // no memory for the line: the session ends unlogged
  }
}

} // namespace detail

} // namespace pubsub

#endif // ASYNC_EXAMPLES_PUBSUB_CORE_H
