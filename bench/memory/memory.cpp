// SPDX-License-Identifier: BSL-1.0
// Memory: what each queue costs in bytes. For every queue, in a child process of its own (so
// that no other queue's freed memory is reused and counted as free):
//   empty:    sizeof the queue object + the heap it allocates when constructed empty;
//   backlog:  the peak heap and resident bytes while it holds B elements and then serves
//             4 x B operations at that steady backlog (pop one, push one), divided by B;
//   returned: whether destroying the drained queue gave every heap byte back.
// Bounded queues are made with capacity B (full at the backlog); unbounded ones with
// capacity 0 (they grow). Resident bytes come from /proc/self/statm (page granularity: exact
// for a backlog, not for a small empty queue); heap bytes from glibc's allocator statistics
// (every malloc, new, aligned allocation and mmap'd block), with its per-thread cache of freed
// blocks switched off (the program restarts itself with GLIBC_TUNABLES) so that a freed block
// counts as free. TBB allocates through its own allocator (libtbbmalloc, beside glibc's heap):
// its heap figures are lower bounds, its resident ones are right. Single-threaded: the memory of
// a queue, not of its contention.
#include "adapters/queues.h"

#include <malloc.h>
#include <sys/wait.h>
#include <unistd.h>

namespace async_bench {
namespace {

/// Bytes the process has allocated and not freed, by glibc's count.
std::size_t heap_in_use() {
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 33))
  const struct mallinfo2 m = mallinfo2();
  return m.uordblks + m.hblkhd;
#else
  const struct mallinfo m = mallinfo();
  return static_cast<std::size_t>(static_cast<unsigned>(m.uordblks)) +
         static_cast<std::size_t>(static_cast<unsigned>(m.hblkhd));
#endif
}

/// Resident bytes of the process.
std::size_t resident() {
  std::ifstream statm("/proc/self/statm");
  std::size_t pages = 0;
  std::size_t rss = 0;
  statm >> pages >> rss;
  return rss * static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
}

struct footprint {
  double empty_bytes = 0;
  double heap_per_element = 0;
  double rss_per_element = 0;
  double returned = 0; // 1: every heap byte came back
  double order_ok = 0; // 1: the elements came out in the order they went in (one thread)
};

template <typename Adapter>
footprint measure(std::size_t backlog) {
  footprint out;
  const std::size_t heap0 = heap_in_use();
  const std::size_t rss0 = resident();
  {
    auto q = Adapter::make(Adapter::bounded ? backlog : 0);
    out.empty_bytes = static_cast<double>(sizeof(typename Adapter::queue) + heap_in_use() - heap0);
    std::size_t heap_peak = 0;
    std::size_t rss_peak = 0;
    const auto sample = [&] {
      heap_peak = std::max(heap_peak, heap_in_use());
      rss_peak = std::max(rss_peak, resident());
    };
    std::uint64_t next_in = 1;
    std::uint64_t next_out = 1;
    bool in_order = true;
    for (std::size_t i = 0; i < backlog; ++i) {
      Adapter::push(*q, next_in++);
    }
    sample();
    for (std::size_t i = 0; i < 4 * backlog; ++i) {
      in_order = Adapter::pop(*q) == next_out++ && in_order;
      Adapter::push(*q, next_in++);
      if (i % 1024 == 0) {
        sample();
      }
    }
    sample();
    for (std::size_t i = 0; i < backlog; ++i) {
      in_order = Adapter::pop(*q) == next_out++ && in_order;
    }
    out.order_ok = in_order ? 1 : 0;
    const double b = static_cast<double>(backlog);
    out.heap_per_element = static_cast<double>(heap_peak - heap0) / b;
    out.rss_per_element = static_cast<double>(rss_peak > rss0 ? rss_peak - rss0 : 0) / b;
  }
  out.returned = heap_in_use() == heap0 ? 1 : 0;
  return out;
}

/// Runs measure<Adapter> in a child process and reads its footprint back through a pipe.
template <typename Adapter>
bool measure_apart(std::size_t backlog, footprint& out) {
  int fds[2];
  if (pipe(fds) != 0) {
    return false;
  }
  const pid_t child = fork();
  if (child == 0) {
    close(fds[0]);
    const footprint f = measure<Adapter>(backlog);
    const ssize_t n = write(fds[1], &f, sizeof f);
    _exit(n == static_cast<ssize_t>(sizeof f) ? 0 : 1);
  }
  close(fds[1]);
  const ssize_t n = child > 0 ? read(fds[0], &out, sizeof out) : -1;
  close(fds[0]);
  int status = 0;
  if (child > 0) {
    waitpid(child, &status, 0);
  }
  return n == static_cast<ssize_t>(sizeof out) && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

} // namespace
} // namespace async_bench

int main(int argc, char** argv) {
  using namespace async_bench;
  // glibc's tcache keeps freed blocks counted as in use: restart once without it.
  if (std::getenv("ASYNC_BENCH_MEMORY_CHILD") == nullptr) {
    setenv("ASYNC_BENCH_MEMORY_CHILD", "1", 1);
    setenv("GLIBC_TUNABLES", "glibc.malloc.tcache_count=0", 1);
    execv("/proc/self/exe", argv);
    std::perror("bench_memory: restarting without glibc's tcache failed; heap figures include it");
  }
  opts().info = binary_info{"the memory of each queue: empty, and per element of a backlog"};
  parse_options(argc, argv);
  benchmark::Initialize(&argc, argv); // accepts (and ignores) the common benchmark flags
  const std::size_t backlog =
      static_cast<std::size_t>(std::min<std::uint64_t>(opts().items / 16, 1u << 20));
  std::printf("%sasync bench memory: backlog %zu elements of 8 bytes\n\n", context("").c_str(),
              backlog);
  std::ofstream csv;
  if (!opts().csv.empty()) {
    csv.open(opts().csv);
    csv << "case,implementation,empty_bytes,heap_bytes_per_element,resident_bytes_per_element,"
           "heap_returned\n";
  }
  bool ok = true;
  std::vector<std::vector<std::string>> rows;
  for_each_competitor(queue_competitors<std::uint64_t>(), [&](auto competitor) {
    using queue = typename decltype(competitor)::type;
    if constexpr (queue::primary) {
      footprint f;
      if (!measure_apart<queue>(backlog, f)) {
        rows.push_back({queue::name(), "failed", "-", "-", "-"});
        ok = false;
        return;
      }
      if (f.order_ok != 1) {
        std::fprintf(stderr, "VERIFICATION FAILED: %s: elements out of order or lost\n",
                     queue::name());
        ok = false;
      }
      rows.push_back({queue::name(), short_number(f.empty_bytes), short_number(f.rss_per_element),
                      short_number(f.heap_per_element), f.returned == 1 ? "yes" : "NO"});
      if (csv.is_open()) {
        csv << "memory/backlog:" << backlog << ',' << queue::name() << ',' << f.empty_bytes << ','
            << f.heap_per_element << ',' << f.rss_per_element << ',' << f.returned << '\n';
      }
    }
  });
  const std::string summary =
      "## " + opts().binary + ": " + opts().info.what + "\n\n" +
      wrap("Machine: " + machine_line() + ". Commit " ASYNC_BENCH_COMMIT ", " + compiler_line() +
           ", " + today() + ". A backlog of " + std::to_string(backlog) +
           " uint64_t elements; bytes per element (lower is better). Resident: what the "
           "process holds; heap: what malloc handed out.") +
      "\n" +
      markdown_table({"queue", "empty", "resident/element", "heap/element", "heap returned"}, rows,
                     {false, true, true, true, false});
  std::printf("%s", summary.c_str());
  if (csv.is_open()) {
    std::ofstream(beside_csv(".md")) << summary;
    write_meta_json();
  }
  std::fflush(stdout);
  return ok ? 0 : 1;
}
