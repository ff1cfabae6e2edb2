#!/usr/bin/env bash
# SPDX-License-Identifier: BSL-1.0
# The pool binaries against TBB's task_group and Asio's thread_pool in interleaved rounds, for
# a machine with many cores that is lent for minutes: bounded by a deadline, results kept after
# every binary. Run it from a self-contained benchmark folder (the bench-static preset's
# build/bench-static/bench/, where this script is copied):
#
#   bash pool16.sh [results folder]       BUDGET=<seconds> (420)  ROUNDS=<rounds> (5)
#
# Every binary runs with --async_threads=$(nproc) (workers 1, 2, 4 ... N), --async_rounds and a
# share of what is left of the budget; the results folder (machine.txt, and per binary its
# tables, CSV and JSON) is tarred into results.tgz beside it, or into $OUT when that is set,
# after each binary, so that a run cut short still returns what it did. About 6 minutes on 16
# cores.
set -u
dir=$(cd "$(dirname "$0")" && pwd)
out=${1:-$dir/results-pool16}
mkdir -p "$out"
out=$(cd "$out" && pwd)
tarball=${OUT:+$OUT/}results.tgz
[ -n "${OUT:-}" ] || tarball=$(dirname "$out")/results.tgz
rounds=${ROUNDS:-5}
threads=$(nproc)
deadline=$(($(date +%s) + ${BUDGET:-420}))
{
  date -u +%FT%TZ
  uname -srm
  echo "cpus: $threads"
  lscpu 2>/dev/null | grep -E 'Model name|Socket|Core|Thread|NUMA node\(s\)|L3' || true
  ldd --version 2>&1 | head -n1
  echo "rounds: $rounds"
} >"$out/machine.txt"
cat "$out/machine.txt"

# run <binary> <share of the time left, in percent> [flags...]
run() {
  local name=$1 share=$2
  shift 2
  local left=$((deadline - $(date +%s)))
  if [ "$left" -lt 20 ]; then
    echo "=== $name skipped: the budget is spent"
    return
  fi
  local limit=$((left * share / 100))
  [ "$limit" -ge 20 ] || limit=20
  echo "=== $name $(date -u +%T), ${limit} s of ${left} s left"
  local start
  start=$(date +%s)
  timeout --signal=INT --kill-after=5 "$limit" "$dir/$name" --async_threads="$threads" \
    --benchmark_min_time=0.05 --benchmark_out="$out/$name.json" --benchmark_out_format=json \
    --async_csv="$out/$name.csv" "$@" >"$out/$name.txt" 2>&1
  echo "=== $name exit $? after $(($(date +%s) - start)) s"
  tar -C "$(dirname "$out")" -czf "$tarball" "$(basename "$out")"
}

# The targets first: execute() against TBB and post() + future against Asio, S = 1 and 4.
run bench_pool_window 35 --async_rounds="$rounds" --async_items=131072
run bench_pool_post 35 --async_rounds="$rounds" --async_items=131072
# An outside post's wait while every worker runs an endless chain (p50, p99).
run bench_pool_fairness 45 --async_rounds="$rounds" --async_items=1048576
run bench_pool_chain 70 --async_rounds="$rounds" --async_items=131072
run bench_idle_cost 100 --async_rounds=1
echo "=== done $(date -u +%T): $tarball"
