// SPDX-License-Identifier: BSL-1.0
// async/asio.h: the context's life cycle (stop, join, the destructor) in the patterns of Asio's
// own programs: self-owning sessions and timers, an accept loop, a co_spawn'ed server (C++20),
// a handler bound to our executor while its I/O object lives on an io_context. Each is shut
// down from outside and from inside a handler; each must end, destroying what was pending.
// Built with the same matrix as asio_test.cpp, and perturbed (ASYNC_TEST_PERTURB).
#include <async/asio.h>

#if defined(ASYNC_ASIO_STANDALONE)
#include <asio.hpp>
namespace net = ::asio;
using error_code = ::asio::error_code;
#else
#include <boost/asio.hpp>
namespace net = ::boost::asio;
using error_code = ::boost::system::error_code;
#endif

#include "async_catch.h"
#include "test_support.h"

#include <array>
#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

using async::asio_context;
using async::threadpool;
using namespace std::chrono_literals;
using tcp = net::ip::tcp;

namespace {

// Runs body; when it has not returned within `limit` (a destructor that waits for ever), the
// test program ends with a message instead of waiting for ctest's timeout.
template <typename Body>
void ends_within(std::chrono::seconds limit, const char* what, Body body) {
  const async_test::scoped_watchdog watchdog(limit, what);
  body();
}

// Waits (bounded) until pred() holds; false on timeout.
template <typename Pred>
bool eventually(Pred pred) {
  return async_test::eventually_equal(pred, true, 20s);
}

// A handler's share of a life count: every copy holds the token, so token.use_count() - 1 is
// the number of handler objects alive.
using token = std::shared_ptr<int>;
long lives(const token& t) { return t.use_count() - 1; }

// ---- a self-owning echo session and accept loop, on the context's executor -----------------

class echo_session : public std::enable_shared_from_this<echo_session> {
public:
  echo_session(tcp::socket socket, asio_context& context, token t)
      : socket_(std::move(socket)), context_(context), token_(std::move(t)) {}

  void start() { read(); }

private:
  void read() {
    auto self = shared_from_this();
    socket_.async_read_some(net::buffer(data_), [self](error_code ec, std::size_t n) {
      if (ec) {
        return;
      }
      if (std::string(self->data_.data(), n).find("stop") != std::string::npos) {
        self->context_.stop(); // from inside a handler: the owner destroys the context later
      }
      self->write(n);
    });
  }
  void write(std::size_t n) {
    auto self = shared_from_this();
    net::async_write(socket_, net::buffer(data_.data(), n), [self](error_code ec, std::size_t) {
      if (!ec) {
        self->read();
      }
    });
  }

  tcp::socket socket_;
  asio_context& context_;
  token token_;
  std::array<char, 64> data_{};
};

class listener : public std::enable_shared_from_this<listener> {
public:
  // strands: each session's socket on a strand of its own (as most servers do); keep: the
  // listener also holds its sessions (as a server's registry does) until take_sessions().
  listener(asio_context& context, token t, bool strands = false, bool keep = false)
      : acceptor_(context.get_executor(), tcp::endpoint(net::ip::address_v4::loopback(), 0)),
        context_(context), token_(std::move(t)), strands_(strands), keep_(keep) {}

  std::vector<std::shared_ptr<echo_session>> take_sessions() {
    std::lock_guard<std::mutex> lock(kept_mutex_);
    return std::move(kept_);
  }

  unsigned short port() const { return acceptor_.local_endpoint().port(); }

  void accept() {
    auto self = shared_from_this();
    auto accepted = [self](error_code ec, tcp::socket socket) {
      if (ec) {
        return;
      }
      auto session =
          std::make_shared<echo_session>(std::move(socket), self->context_, self->token_);
      if (self->keep_) {
        std::lock_guard<std::mutex> lock(self->kept_mutex_);
        self->kept_.push_back(session);
      }
      session->start();
      self->accept();
    };
    if (strands_) {
      acceptor_.async_accept(net::make_strand(context_.get_executor()), std::move(accepted));
    } else {
      acceptor_.async_accept(std::move(accepted));
    }
  }

private:
  tcp::acceptor acceptor_;
  asio_context& context_;
  token token_;
  bool strands_;
  bool keep_;
  std::mutex kept_mutex_;
  std::vector<std::shared_ptr<echo_session>> kept_;
};

// A blocking client on an io_context of its own (not run: blocking calls need no loop).
struct client {
  net::io_context io;
  tcp::socket socket{io};

  explicit client(unsigned short port) {
    socket.connect(tcp::endpoint(net::ip::address_v4::loopback(), port));
  }
  std::string echo(const std::string& text) {
    net::write(socket, net::buffer(text));
    std::string back(text.size(), '\0');
    net::read(socket, net::buffer(&back[0], back.size()));
    return back;
  }
  // Whether the server closed the connection (read ends with an error, not data).
  bool closed_by_server() {
    char c = 0;
    error_code ec;
    socket.read_some(net::buffer(&c, 1), ec);
    return static_cast<bool>(ec);
  }
};

// Starts a server with start(context, life), which returns its port; serves two clients; ends
// the context from outside (its destructor) or, `inside`, from a session's handler (a client
// sends "stop") and then the destructor. Every object of the server must then be gone, and the
// clients read end-of-file.
template <typename Start>
void serve_then_end(threadpool& pool, bool inside, const char* what, Start start) {
  CAPTURE(inside);
  auto life = std::make_shared<int>(0);
  std::unique_ptr<client> a;
  std::unique_ptr<client> b;
  ends_within(30s, what, [&] {
    asio_context context(pool);
    const unsigned short port = start(context, life);
    a.reset(new client(port));
    b.reset(new client(port));
    CHECK(a->echo("hello") == "hello");
    CHECK(b->echo("world") == "world");
    if (inside) {
      CHECK(a->echo("stop") == "stop"); // the session's handler stops the context
      REQUIRE(eventually([&] { return context.stopped(); }));
    }
  });
  CHECK(lives(life) == 0);
  CHECK(a->closed_by_server());
  CHECK(b->closed_by_server());
}

} // namespace

TEST_CASE("stop: queued functions are not run, running ones finish, join returns", "[asio]") {
  threadpool pool(1);
  auto life = std::make_shared<int>(0);
  std::atomic<int> ran{0};
  std::promise<void> started;
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  bool finished = false;
  {
    asio_context context(pool);
    auto ex = context.get_executor();
    net::post(ex, [&, released] {
      started.set_value();
      released.wait();
      finished = true;
    });
    for (int i = 0; i < 100; ++i) {
      net::post(ex, [&ran, life] { ran.fetch_add(1); });
    }
    started.get_future().wait();
    CHECK_FALSE(context.stopped());
    context.stop();
    CHECK(context.stopped());
    net::post(ex, [&ran, life] { ran.fetch_add(1); });     // after stop: set aside
    net::dispatch(ex, [&ran, life] { ran.fetch_add(1); }); // not on the pool: as post
    std::atomic<bool> joined{false};
    std::thread joiner([&] {
      context.join();
      joined = true;
    });
    std::this_thread::sleep_for(20ms);
    CHECK_FALSE(joined.load()); // the running function has not returned
    release.set_value();
    joiner.join();
    CHECK(finished);
    CHECK(lives(life) == 2); // the queued ones were destroyed; the two set aside are kept
  }
  CHECK(lives(life) == 0); // ... until the destructor
  CHECK(ran.load() == 0);
}

TEST_CASE("after stop() a dispatch from a handler is set aside; the destructor waits for it",
          "[asio]") {
  // On the pool's threads dispatch and blocking.always would run the function at once: not
  // after stop(). The running handler outlasts the destructor's first looks at the pool.
  threadpool pool(2);
  auto life = std::make_shared<int>(0);
  std::atomic<int> ran{0};
  std::promise<void> inside;
  {
    asio_context context(pool);
    auto ex = context.get_executor();
    net::post(ex, [&, ex] {
      context.stop();
      net::dispatch(ex, [&ran, life] { ran.fetch_add(1); });
      net::execution::execute(net::require(ex, net::execution::blocking.always),
                              [&ran, life] { ran.fetch_add(1); });
      inside.set_value();
      std::this_thread::sleep_for(300ms);
    });
    inside.get_future().wait();
    CHECK(lives(life) == 2); // set aside, not run
  }
  CHECK(ran.load() == 0);
  CHECK(lives(life) == 0);
}

TEST_CASE("a paused pool: stop and the destructor discard what is queued, and return", "[asio]") {
  // Before: the destructor waited until the pool was resized, for ever here.
  threadpool pool(0);
  auto life = std::make_shared<int>(0);
  std::atomic<int> ran{0};
  ends_within(20s, "destroying a context over a paused pool", [&] {
    asio_context context(pool);
    auto strand = net::make_strand(context.get_executor());
    for (int i = 0; i < 50; ++i) {
      net::post(context.get_executor(), [&ran, life] { ran.fetch_add(1); });
      net::post(strand, [&ran, life] { ran.fetch_add(1); });
    }
  });
  CHECK(lives(life) == 0);
  CHECK(ran.load() == 0);
  CHECK(pool.wait_idle_for(0s)); // nothing of it is left in the pool
  asio_context context(pool);
  net::post(context.get_executor(), [&ran] { ran.fetch_add(1); });
  pool.configurepool(1);
  context.join(); // not stopped: waits for the work, as before
  CHECK(ran.load() == 1);
}

TEST_CASE("destroying at once runs nothing queued: a strand stops where it is", "[asio]") {
  // (join() then destruction runs everything: "join waits for the handlers".)
  threadpool pool(2);
  std::atomic<int> ran{0};
  std::atomic<bool> started{false};
  auto life = std::make_shared<int>(0);
  {
    asio_context context(pool);
    auto strand = net::make_strand(context.get_executor());
    // The first handler holds the strand until the destructor has stopped the context, so
    // the outcome does not depend on how fast the posting thread reaches the destructor.
    net::post(strand, [&ran, &started, &context, life] {
      started.store(true);
      auto const give_up = std::chrono::steady_clock::now() + 20s;
      while (!context.stopped() && std::chrono::steady_clock::now() < give_up) {
        std::this_thread::sleep_for(100us);
      }
      ran.fetch_add(1);
    });
    for (int i = 1; i < 200; ++i) {
      net::post(strand, [&ran, life] { ran.fetch_add(1); });
    }
    while (!started.load()) {
      std::this_thread::yield();
    }
  } // stops: the handler running then finishes; the 199 queued behind it never start
  CHECK(ran.load() == 1);
  CHECK(lives(life) == 0);
}

TEST_CASE("a self-owning timer on the context ends with it", "[asio]") {
  threadpool pool(2);
  for (int inside = 0; inside < 2; ++inside) {
    CAPTURE(inside);
    auto life = std::make_shared<int>(0);
    std::atomic<int> ticks{0};
    ends_within(20s, "a context with a self-owning timer", [&] {
      asio_context context(pool);
      struct ticker : std::enable_shared_from_this<ticker> {
        ticker(asio_context& c, token t, std::atomic<int>& n, bool stop_inside)
            : timer(c.get_executor()), context(c), life(std::move(t)), ticks(n),
              inside(stop_inside) {}
        void arm() {
          auto self = shared_from_this();
          timer.expires_after(inside ? 1ms : 1h);
          timer.async_wait([self](error_code ec) {
            if (ec) {
              return;
            }
            if (self->ticks.fetch_add(1) == 5) {
              self->context.stop(); // and re-arms all the same, as a careless program does
            }
            self->arm();
          });
        }
        net::steady_timer timer;
        asio_context& context;
        token life;
        std::atomic<int>& ticks;
        bool inside;
      };
      std::make_shared<ticker>(context, life, ticks, inside != 0)->arm();
      if (inside != 0) {
        REQUIRE(eventually([&] { return context.stopped(); }));
      }
    });
    CHECK(lives(life) == 0); // the pending wait and its handler were destroyed
    CHECK(ticks.load() == (inside != 0 ? 6 : 0));
  }
}

TEST_CASE("a handler bound to the context, pending on an io_context that outlives it", "[asio]") {
  // The timer lives on an io_context; only its handler runs on ours (bind_executor). The
  // handler keeps a tracked executor of ours until it completes, after our context is gone:
  // what it submits then is dropped, and the executor's count outlives the context.
  threadpool pool(2);
  net::io_context io;
  auto io_work = net::make_work_guard(io);
  std::thread io_thread([&] { io.run(); });
  for (int round = 0; round < 40; ++round) {
    CAPTURE(round);
    auto life = std::make_shared<int>(0);
    std::atomic<int> ran{0};
    std::weak_ptr<net::steady_timer> watch;
    ends_within(20s, "a context with a handler pending elsewhere", [&] {
      asio_context context(pool);
      auto timer = std::make_shared<net::steady_timer>(io);
      watch = timer;
      // Round 0 never fires; the others race the completion with the destruction.
      timer->expires_after(round == 0 ? std::chrono::hours(1)
                                      : std::chrono::microseconds(round * 50));
      timer->async_wait(
          net::bind_executor(context.get_executor(), [timer, life, &ran](error_code ec) {
            if (!ec) {
              ran.fetch_add(1);
            }
          }));
      if (round % 2 == 1) {
        std::this_thread::sleep_for(std::chrono::microseconds(round * 50));
      }
    });
    // Cancel what is still pending from the io_context's side: its completion goes to our
    // (destroyed) context's executor, which drops it.
    net::post(io, [watch] {
      if (auto t = watch.lock()) {
        t->cancel();
      }
    });
    CHECK(eventually([&] { return lives(life) == 0; }));
    CHECK(watch.expired());
    CHECK(ran.load() <= 1);
  }
  io_work.reset();
  io_thread.join();
}

TEST_CASE("a TCP server on the context ends with it, from outside and from a handler", "[asio]") {
  threadpool pool(2);
  for (bool inside : {false, true}) {
    serve_then_end(pool, inside, "a context with a self-owning accept loop and sessions",
                   [](asio_context& context, const token& life) {
                     auto server = std::make_shared<listener>(context, life);
                     server->accept(); // the pending accept owns it from here
                     return server->port();
                   });
  }
}

// Asio's reactor on a context that is not an io_context has a thread of its own, which was
// still completing socket operations while the destructor's shutdown destroyed the reactor's
// pending ones (a use after free under ASan, data races under TSan, in most runs of 20 rounds).
TEST_CASE("clients closing as the context is destroyed: the reactor's thread stops first",
          "[asio]") {
  threadpool pool(2);
  for (int round = 0; round < 50; ++round) {
    const token life = std::make_shared<int>(0);
    {
      std::unique_ptr<asio_context> context(new asio_context(pool));
      auto server = std::make_shared<listener>(*context, life, true, true);
      server->accept();
      std::vector<std::unique_ptr<client>> clients;
      for (int c = 0; c < 20; ++c) {
        clients.emplace_back(new client(server->port()));
        REQUIRE(clients.back()->echo("x") == "x"); // a session reads again: a pending read
      }
      std::vector<std::shared_ptr<echo_session>> sessions = server->take_sessions();
      server.reset();
      ends_within(20s, "destroying a context while its clients close", [&] {
        clients.clear(); // the reactor's thread completes the reads, meanwhile:
        context->stop();
        context->join();
        // As a server's stop() does: its registry goes, closing the sockets; their cancelled
        // operations go to the reactor's thread, which completes them into the stopped context
        // while the destructor below shuts down.
        sessions.clear();
        context.reset();
      });
    }
    REQUIRE(lives(life) == 0);
  }
}

#if defined(ASYNC_TEST_CO_SPAWN)
namespace {

// The coroutine echo server of Asio's examples, in short: the accept loop's frame owns the
// acceptor, each session's frame its socket.
net::awaitable<void> echo_coroutine(tcp::socket socket, asio_context& context, token life) {
  static_cast<void>(life); // held by the frame: counts it as alive
  std::array<char, 64> data{};
  for (;;) {
    const std::size_t n = co_await socket.async_read_some(net::buffer(data), net::use_awaitable);
    if (std::string(data.data(), n).find("stop") != std::string::npos) {
      context.stop();
    }
    co_await net::async_write(socket, net::buffer(data.data(), n), net::use_awaitable);
  }
}

net::awaitable<void> accept_loop(tcp::acceptor acceptor, asio_context& context, token life) {
  for (;;) {
    tcp::socket socket = co_await acceptor.async_accept(net::use_awaitable);
    net::co_spawn(acceptor.get_executor(), echo_coroutine(std::move(socket), context, life),
                  net::detached);
  }
}

} // namespace

TEST_CASE("a co_spawn'ed server on the context ends with it, from outside and from a handler",
          "[asio]") {
  threadpool pool(2);
  for (bool inside : {false, true}) {
    serve_then_end(pool, inside, "a context with a co_spawn'ed server",
                   [](asio_context& context, const token& life) {
                     tcp::acceptor acceptor(context.get_executor(),
                                            tcp::endpoint(net::ip::address_v4::loopback(), 0));
                     const unsigned short port = acceptor.local_endpoint().port();
                     net::co_spawn(context.get_executor(),
                                   accept_loop(std::move(acceptor), context, life), net::detached);
                     return port;
                   });
  }
}
#endif

TEST_CASE("blocking.always runs the function before execute returns", "[asio]") {
  threadpool pool(2);
  asio_context context(pool);
  const auto always = net::require(context.get_executor(), net::execution::blocking.always);
  CHECK(net::query(always, net::execution::blocking) == net::execution::blocking.always);
  CHECK(net::query(net::require(always, net::execution::blocking.never),
                   net::execution::blocking) == net::execution::blocking.never);
  CHECK(net::query(net::require(always, net::execution::blocking.possibly),
                   net::execution::blocking) == net::execution::blocking.possibly);
  CHECK(net::query(context.get_executor(), net::execution::occupancy) == 2);
  CHECK(net::query(context.get_executor(), net::execution::mapping) ==
        net::execution::mapping.thread);
  // Asio's second bank-account example, in short: a deposit through blocking.always.
  int balance = 0;
  for (int i = 0; i < 100; ++i) {
    net::execution::execute(always, [&balance] { ++balance; });
    REQUIRE(balance == i + 1); // ran before execute returned, on the pool
  }
  bool on_pool = false;
  net::execution::execute(always, [&] { on_pool = pool.running_in_this_thread(); });
  CHECK(on_pool);
  CHECK_THROWS_AS(net::execution::execute(always, [] { throw std::runtime_error("f"); }),
                  std::runtime_error);
  // On the pool: inline, on the caller's thread.
  std::promise<bool> inline_run;
  net::post(context.get_executor(), [&] {
    const auto caller = std::this_thread::get_id();
    bool same = false;
    net::execution::execute(always, [&] { same = std::this_thread::get_id() == caller; });
    inline_run.set_value(same);
  });
  CHECK(inline_run.get_future().get());
  // A function that will not run (stopped) does not keep the caller waiting.
  context.stop();
  bool ran = false;
  ends_within(10s, "blocking.always on a stopped context",
              [&] { net::execution::execute(always, [&ran] { ran = true; }); });
  CHECK_FALSE(ran);
}

TEST_CASE("blocking.always waits for a queued function that a stop then discards", "[asio]") {
  threadpool pool(0); // paused: the function stays queued until stop() discards it
  asio_context context(pool);
  const auto always = net::require(context.get_executor(), net::execution::blocking.always);
  std::atomic<bool> returned{false};
  bool ran = false;
  std::thread caller([&] {
    net::execution::execute(always, [&ran] { ran = true; });
    returned = true;
  });
  std::this_thread::sleep_for(20ms);
  CHECK_FALSE(returned.load());
  context.stop();
  context.join(); // discards it: the caller goes on
  caller.join();
  CHECK(returned.load());
  CHECK_FALSE(ran);
}

TEST_CASE("blocking.always callers racing stop() all return before the destructor", "[asio]") {
  // A call that came just after stop() was set aside with the functions posted after it, and
  // its caller waited until the destructor (helper-3: 6 runs of 6 hung within 300 rounds).
  const int rounds = static_cast<int>(async_test::scaled(200, 40));
  threadpool pool(2);
  for (int round = 0; round < rounds; ++round) {
    asio_context context(pool);
    const auto always = net::require(context.get_executor(), net::execution::blocking.always);
    std::atomic<long> ran{0};
    std::vector<std::thread> callers;
    for (int t = 0; t < 3; ++t) {
      callers.emplace_back([&] {
        while (!context.stopped()) {
          net::execution::execute(always, [&ran] { ran.fetch_add(1); });
        }
      });
    }
    std::this_thread::sleep_for(std::chrono::microseconds(50 * (round % 8)));
    context.stop();
    ends_within(20s, "blocking.always callers after stop()", [&] {
      for (auto& c : callers) {
        c.join();
      }
    });
  }
}

TEST_CASE("the destructor takes back a function waiting behind a busy worker's task", "[asio]") {
  // A plain task posts to the context (its worker's next slot) and goes on running; the pool
  // has no other worker to take it: the destructor waited for it (helper-3).
  threadpool pool(1);
  auto life = std::make_shared<int>(0);
  std::atomic<int> ran{0};
  std::atomic<bool> gone{false};
  std::promise<void> posted;
  std::unique_ptr<asio_context> context(new asio_context(pool));
  auto ex = context->get_executor();
  pool.execute([&, ex] {
    net::post(ex, [&ran, life] { ran.fetch_add(1); });
    posted.set_value();
    while (!gone.load()) {
      std::this_thread::sleep_for(1ms);
    }
  });
  posted.get_future().wait();
  ends_within(20s, "destroying a context whose function waits in a busy worker's next slot",
              [&] { context.reset(); });
  gone = true;
  CHECK(pool.wait_idle_for(20s));
  CHECK(ran.load() == 0);
  CHECK(lives(life) == 0);
}

TEST_CASE("a plain pool task may destroy a context; its own post to it is discarded", "[asio]") {
  // The post lands in the task's next slot (its worker's only successor), which nobody else
  // would take from a pool of one: the destructor takes it back first.
  threadpool pool(1);
  auto life = std::make_shared<int>(0);
  std::atomic<int> ran{0};
  std::promise<void> done;
  pool.execute([&] {
    std::unique_ptr<asio_context> context(new asio_context(pool));
    auto guard = net::make_work_guard(context->get_executor()); // outlives the context
    net::post(context->get_executor(), [&ran, life] { ran.fetch_add(1); });
    context.reset();
    done.set_value();
  });
  ends_within(20s, "a pool task destroying a context", [&] { done.get_future().get(); });
  CHECK(ran.load() == 0);
  CHECK(lives(life) == 0);
}

TEST_CASE("a tracked executor outlives its context: what it submits is dropped", "[asio]") {
  using executor = asio_context::executor_type;
  threadpool pool(2);
  auto life = std::make_shared<int>(0);
  std::atomic<int> ran{0};
  std::unique_ptr<executor> tracked;
  ends_within(20s, "a context with work tracked", [&] {
    asio_context context(pool);
    tracked.reset(new executor(
        net::prefer(context.get_executor(), net::execution::outstanding_work.tracked)));
    CHECK(context.outstanding_work() == 1);
  }); // the destructor does not wait for tracked work (join() does)
  net::execution::execute(*tracked, [&ran, life] { ran.fetch_add(1); });
  net::post(*tracked, [&ran, life] { ran.fetch_add(1); });
  net::execution::execute(net::require(*tracked, net::execution::blocking.always),
                          [&ran, life] { ran.fetch_add(1); });
  {
    const executor copy = *tracked; // counts on the state the context left
    tracked.reset();
  } // the last one frees it (a leak under AddressSanitizer otherwise)
  CHECK(ran.load() == 0);
  CHECK(lives(life) == 0);
}

TEST_CASE("stop racing a storm of posts: every function runs or is destroyed, once",
          "[asio][stress]") {
  const int rounds = static_cast<int>(async_test::scaled(40, 8));
  for (int round = 0; round < rounds; ++round) {
    threadpool pool(2);
    auto life = std::make_shared<int>(0);
    std::atomic<long> ran{0};
    std::atomic<long> made{0};
    {
      asio_context context(pool);
      auto ex = context.get_executor();
      auto strand = net::make_strand(ex);
      std::atomic<bool> quit{false};
      std::vector<std::thread> posters;
      for (int t = 0; t < 2; ++t) {
        posters.emplace_back([&, t] {
          while (!quit.load()) {
            made.fetch_add(1);
            auto handler = [&ran, &made, life, ex] {
              ran.fetch_add(1);
              made.fetch_add(1);
              net::post(ex, [&ran, life] { ran.fetch_add(1); }); // re-posts from a handler
            };
            if (t == 0) {
              net::post(ex, handler);
            } else {
              net::post(strand, handler);
            }
          }
        });
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1 + round % 5));
      std::thread stopper([&] { context.stop(); });
      context.stop(); // two callers race the same call
      stopper.join();
      quit = true;
      for (auto& p : posters) {
        p.join();
      }
      context.join();
    } // the destructor destroys what was set aside
    CHECK(lives(life) == 0);
    CHECK(ran.load() <= made.load());
    CHECK(pool.wait_idle_for(20s));
  }
}
