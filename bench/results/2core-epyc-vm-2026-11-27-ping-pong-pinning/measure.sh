#!/usr/bin/env bash
# The runs of this folder: bench_ping_pong of a Release build at c3662a6 (cmake --preset bench &&
# cmake --build build/bench), three times without and with --async_pin, alternating, 10
# interleaved rounds each, on the 2-core VM.
#   bash bench/results/2core-epyc-vm-2026-11-27-ping-pong-pinning/measure.sh [build/bench/bench]
set -u
B=${1:-build/bench/bench}
out=$(cd "$(dirname "$0")" && pwd)
for i in 1 2 3; do
  for mode in unpinned pinned; do
    extra=()
    if [ "$mode" = pinned ]; then extra=(--async_pin); fi
    "$B/bench_ping_pong" --async_rounds=10 --benchmark_min_time=0.1 --async_threads=2 "${extra[@]}" \
      --benchmark_filter='bounded_queue|atomic_queue' --async_csv="$out/${mode}_$i.csv" \
      >"$out/${mode}_$i.txt" 2>&1
    echo "$mode $i: exit $?"
  done
done
