// SPDX-License-Identifier: BSL-1.0
// What runs the broker's handlers: async::asio_context over an async::threadpool of a fixed
// size, or Asio's io_context run by as many threads (the usual design; the benchmark's peer).
#ifndef ASYNC_EXAMPLES_PUBSUB_EVENT_LOOP_H
#define ASYNC_EXAMPLES_PUBSUB_EVENT_LOOP_H

#include "frame.h"

#include <async/asio.h>
#include <async/threadpool.h>

#include <thread>
#include <vector>

namespace pubsub {

namespace detail {

class runtime {
public:
  virtual ~runtime() = default;
  virtual net::any_io_executor executor() = 0;
  /// Nothing more starts; returns once no handler runs.
  virtual void stop() = 0;
};

class pool_runtime final : public runtime {
public:
  explicit pool_runtime(unsigned threads) : pool_(static_cast<int>(threads)), context_(pool_) {}
  net::any_io_executor executor() override { return context_.get_executor(); }
  void stop() override {
    context_.stop();
    context_.join(); // once stopped: until no function of the context runs
  }

private:
  async::threadpool pool_;
  async::asio_context context_; // after the pool: destroyed first
};

class io_runtime final : public runtime {
public:
  explicit io_runtime(unsigned threads) : work_(io_.get_executor()) {
    for (unsigned i = 0; i < threads; ++i) {
      threads_.emplace_back([this] { io_.run(); });
    }
  }
  ~io_runtime() override { stop(); }
  net::any_io_executor executor() override { return io_.get_executor(); }
  void stop() override {
    io_.stop();
    for (auto& t : threads_) {
      if (t.joinable()) {
        t.join();
      }
    }
  }

private:
  net::io_context io_;
  net::executor_work_guard<net::io_context::executor_type> work_;
  std::vector<std::thread> threads_;
};

} // namespace detail

} // namespace pubsub

#endif // ASYNC_EXAMPLES_PUBSUB_EVENT_LOOP_H
