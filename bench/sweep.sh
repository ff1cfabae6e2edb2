#!/usr/bin/env bash
# SPDX-License-Identifier: BSL-1.0
# A reference run: every bench_* binary of a benchmark folder, one after the other, ours and the
# peers in interleaved rounds; per binary its console output with the tables (.txt), the CSV
# and the JSON, and the machine's description (machine.txt), in one results folder. The
# benchmark folder is a Release build's build/bench/bench/ or the bench-static preset's
# build/bench-static/bench/, which is self-contained, holds a copy of this script and can be
# copied to the machine under test (then: ./sweep.sh . results).
#
#   bench/sweep.sh <folder with bench_*> <results folder> [threads] [flags for every binary...]
#
# threads: --async_threads, the machine's (nproc) unless given. A binary gets the flags of its
# row below (rounds, items per iteration, --benchmark_min_time=0.05), then the flags given
# here, then those of $ASYNC_ARGS_<binary> (split at spaces, for example
# ASYNC_ARGS_bench_funnel='--benchmark_filter=cap:1024|unbounded'); a later flag wins.
#
#   ASYNC_SWEEP_ONLY    the binaries to run, by name (default: all, in the order of the rows)
#   ASYNC_SWEEP_ROUNDS  interleaved rounds for every binary that runs in rounds (default: its
#                       row's); the single-shot binaries (rounds 1 below) stay at 1
#   ASYNC_SWEEP_BUDGET  seconds for the whole sweep: a binary may use its row's share of the
#                       time left, and is skipped once less than 20 s is left (default: none)
#   ASYNC_SWEEP_LIMIT   seconds for any one binary (default 900): past it the binary is stopped
#                       (SIGINT, SIGKILL 10 s later) and the sweep goes on with the next
#   ASYNC_SWEEP_TAR     a .tgz of the results folder, written again after every binary so that
#                       a run cut short keeps what it did (default: $OUT/results.tgz when OUT
#                       is set, as on a lent device machine; otherwise none)
#
# If the folder holds glibc/ (ld-linux-x86-64.so.2, libc.so.6, libm.so.6 of the build machine)
# and the binaries do not start with the machine's own glibc, they are started through that
# loader. Exit status 1 when a binary failed (a wrong result, a crash, the limit).
set -uo pipefail

# binary, rounds, items per iteration (- : the binary's default, 2^20), share of the time left
# in percent (with ASYNC_SWEEP_BUDGET). The pool binaries come first: on a machine lent for
# minutes they are the figures most often owed.
rows=(
  "bench_pool_window          5 131072  35"
  "bench_pool_post            5 131072  35"
  "bench_pool_fairness        5 1048576 45"
  "bench_unbounded_throughput 5 262144  50"
  "bench_pool_chain           5 131072  50"
  "bench_queue_throughput     3 262144  50"
  "bench_funnel               3 262144  50"
  "bench_ping_pong            3 131072  50"
  "bench_pinball              3 -       50"
  "bench_asio_strands         3 -       60"
  "bench_idle_cost            1 -       100"
  "bench_fetch_add_ceiling    1 -       100"
  "bench_memory               1 -       100"
)

if [ $# -lt 2 ]; then
  sed -n '10p' "$0" >&2
  exit 2
fi
dir=$(cd "$1" && pwd) || exit 2
out=$2
shift 2
threads=$(nproc)
if [ $# -gt 0 ] && [[ $1 =~ ^[0-9]+$ ]]; then
  threads=$1
  shift
fi
mkdir -p "$out"
out=$(cd "$out" && pwd)
limit=${ASYNC_SWEEP_LIMIT:-900}
only=${ASYNC_SWEEP_ONLY:-}
tarball=${ASYNC_SWEEP_TAR:-${OUT:+$OUT/results.tgz}}
deadline=
[ -z "${ASYNC_SWEEP_BUDGET:-}" ] || deadline=$(($(date +%s) + ASYNC_SWEEP_BUDGET))

# The binaries in the order of the rows, then any other bench_* of the folder.
plan=()
for row in "${rows[@]}"; do
  read -r name _ <<<"$row"
  [ -x "$dir/$name" ] && plan+=("$row")
done
for bin in "$dir"/bench_*; do
  name=$(basename "$bin")
  case "$name" in *.so* | *.*) continue ;; esac
  [ -x "$bin" ] || continue
  grep -q "^$name " < <(printf '%s\n' "${rows[@]}") || plan+=("$name 3 - 50")
done
if [ ${#plan[@]} -eq 0 ]; then
  echo "sweep: no bench_* binary in $dir" >&2
  exit 1
fi

launcher=()
read -r probe _ <<<"${plan[0]}"
if ! "$dir/$probe" --benchmark_list_tests >/dev/null 2>&1; then
  if [ -x "$dir/glibc/ld-linux-x86-64.so.2" ]; then
    launcher=("$dir/glibc/ld-linux-x86-64.so.2" --library-path "$dir/glibc:$dir")
    echo "sweep: starting the binaries through the bundled glibc loader"
  else
    echo "sweep: $probe does not start here (glibc too old?) and no loader is bundled" >&2
    exit 1
  fi
fi

{
  echo "date: $(date -u +%FT%TZ)"
  echo "host: $(uname -srm)"
  echo "cpus: $(nproc)"
  if command -v lscpu >/dev/null; then
    lscpu | grep -E '^(Model name|Socket|Core|Thread|NUMA node\(s\)|L3)' || true
  else
    grep -m1 'model name' /proc/cpuinfo || true
  fi
  ldd --version 2>&1 | head -n1
  echo "threads: $threads"
  echo "rounds: ${ASYNC_SWEEP_ROUNDS:-per binary (sweep.sh)}"
  echo "budget: ${ASYNC_SWEEP_BUDGET:-none} s"
  echo "flags: $*"
} | tee "$out/machine.txt"

save() {
  [ -z "$tarball" ] || tar -C "$(dirname "$out")" -czf "$tarball" "$(basename "$out")"
}
save

status=0
for row in "${plan[@]}"; do
  read -r name rounds items share <<<"$row"
  if [ -n "$only" ] && ! grep -qw -- "$name" <<<"$only"; then continue; fi
  if [ "$rounds" != 1 ] && [ -n "${ASYNC_SWEEP_ROUNDS:-}" ]; then rounds=$ASYNC_SWEEP_ROUNDS; fi
  cap=$limit
  if [ -n "$deadline" ]; then
    left=$((deadline - $(date +%s)))
    if [ "$left" -lt 20 ]; then
      echo "=== $name skipped: the budget is spent"
      continue
    fi
    cap=$((left * share / 100))
    [ "$cap" -ge 20 ] || cap=20
    [ "$cap" -le "$limit" ] || cap=$limit
  fi
  args=(--async_threads="$threads" --async_rounds="$rounds" --benchmark_min_time=0.05)
  [ "$items" = - ] || args+=(--async_items="$items")
  var=ASYNC_ARGS_$name
  # shellcheck disable=SC2206 # split on purpose: several flags in one variable
  own=(${!var:-})
  echo "=== $name ($(date -u +%T), at most $cap s)"
  start=$(date +%s)
  timeout --signal=INT --kill-after=10 "$cap" "${launcher[@]}" "$dir/$name" "${args[@]}" "$@" \
    "${own[@]}" --benchmark_out="$out/$name.json" --benchmark_out_format=json \
    --async_csv="$out/$name.csv" >"$out/$name.txt" 2>&1
  rc=$?
  echo "=== $name: exit $rc after $(($(date +%s) - start)) s"
  [ $rc -eq 0 ] || status=1
  save
done
[ -z "$tarball" ] || echo "=== results: $tarball"
exit $status
