#!/usr/bin/env bash
# SPDX-License-Identifier: BSL-1.0
# Before/after comparison of two builds of the benchmarks in alternating rounds, so that a
# machine that changes speed from minute to minute (a cloud VM) shifts both sides alike.
#
#   bench/ab_rounds.sh <folder> <results> [rounds=5] [threads=nproc]
#
# <folder> holds before/ and after/, each with the binaries named in ASYNC_AB_BINARIES (default:
# bench_ping_pong bench_queue_throughput bench_unbounded_throughput bench_funnel), copied from two
# bench-static builds. Each round
# runs every binary once per side, ABBA from round to round, our implementations only
# (--benchmark_filter=async::), and writes r<round>_<side>_<binary>.csv into <results>.
# ASYNC_AB_ARGS adds flags to every run (for example --async_items=100000).
set -u
dir=$(cd "$1" && pwd)
out=$2
rounds=${3:-5}
threads=${4:-$(nproc)}
mkdir -p "$out"
for r in $(seq 1 "$rounds"); do
  for b in ${ASYNC_AB_BINARIES:-bench_ping_pong bench_queue_throughput bench_unbounded_throughput bench_funnel}; do
    if [ $((r % 2)) -eq 1 ]; then order="before after"; else order="after before"; fi
    for side in $order; do
      args=(--async_threads="$threads" --benchmark_min_time=0.1 --benchmark_filter='async::'
        --async_csv="$out/r${r}_${side}_${b}.csv")
      if [ "$b" = bench_funnel ]; then args+=(--async_items=262144); fi
      # shellcheck disable=SC2206 # extra flags, split on purpose (ASYNC_AB_ARGS="--x=1 --y=2")
      args+=(${ASYNC_AB_ARGS:-})
      timeout 300 "$dir/$side/$b" "${args[@]}" >/dev/null 2>"$out/r${r}_${side}_${b}.err"
      echo "round $r $side $b: exit $?"
    done
  done
done
