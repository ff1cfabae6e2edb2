#!/usr/bin/env bash
# The runs of this folder: every binary of a Release build (cmake --preset bench && cmake --build
# build/bench), ours and the peers in 5 interleaved rounds each, on the 2-core VM.
#   bash bench/results/2core-epyc-vm-2026-11-24-issue14/measure.sh [build/bench/bench]
set -u
B=${1:-build/bench/bench}
out=$(cd "$(dirname "$0")" && pwd)
R=(--async_rounds=5 --benchmark_min_time=0.1 --async_threads=2)
run() {
  local name=$1
  shift
  "$B/$name" "${R[@]}" "$@" --benchmark_out="$out/$name.json" --benchmark_out_format=json \
    --async_csv="$out/$name.csv" >"$out/$name.txt" 2>&1
  echo "$name: exit $?"
}
run bench_queue_throughput --async_oversubscribe --async_items=262144 --benchmark_filter=-8p8c
run bench_unbounded_throughput --async_oversubscribe --async_items=262144 --benchmark_filter=-8p8c
run bench_funnel --async_items=262144 --benchmark_filter='cap:1024|unbounded'
run bench_ping_pong
run bench_pool_window
run bench_pool_post
run bench_pool_chain
run bench_asio_strands
run bench_pinball --async_items=262144
"$B/bench_memory" >"$out/bench_memory.txt" 2>&1
echo "bench_memory: exit $?"
# 1p1c again with the default 2^20 items per iteration (the queue fills; with 2^18 a quarter of
# the run is the producer filling an empty ring of 65536):
"$B/bench_queue_throughput" "${R[@]}" --benchmark_filter='1p1c/(async::bounded_queue|atomic_queue)' \
  --async_csv="$out/bench_queue_throughput_1p1c_2e20.csv" >"$out/bench_queue_throughput_1p1c_2e20.txt" 2>&1
