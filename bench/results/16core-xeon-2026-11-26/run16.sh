#!/usr/bin/env bash
# 16-core sweep in interleaved rounds, bounded by a deadline; results tarred after every binary.
set -u
D=$(cd "$(dirname "$0")" && pwd)
R=/tmp/r; mkdir -p $R
deadline=$(( $(date +%s) + ${BUDGET:-470} ))
{ date -u +%FT%TZ; uname -srm; nproc; lscpu | grep -E 'Model name|Socket|Core|Thread|NUMA node\(s\)|L3|MHz'; ldd --version | head -1; } > $R/machine.txt 2>&1
cat $R/machine.txt
run() {
  name=$1; rounds=$2; shift 2
  left=$(( deadline - $(date +%s) ))
  if [ $left -lt 20 ]; then echo "=== $name skipped (deadline)"; return; fi
  echo "=== $name $(date -u +%T) left ${left}s"
  s=$(date +%s)
  timeout --signal=INT -k 5 $left "$D/$name" --async_threads=16 --async_rounds=$rounds \
    --benchmark_min_time=0.05 --benchmark_out=$R/$name.json --benchmark_out_format=json \
    --async_csv=$R/$name.csv "$@" > $R/$name.txt 2>&1
  echo "=== $name exit $? after $(( $(date +%s) - s )) s"
  tar -C /tmp -czf $OUT/results.tgz r
}
run bench_pool_window 5 --async_items=131072
run bench_pool_post 5 --async_items=131072
run bench_unbounded_throughput 5 --async_items=262144
run bench_pool_chain 5 --async_items=131072
run bench_queue_throughput 3 --async_items=262144
run bench_funnel 3 --async_items=262144
run bench_ping_pong 3 --async_items=131072
run bench_pinball 3
run bench_asio_strands 3
run bench_idle_cost 1
run bench_fetch_add_ceiling 1
echo "=== done $(date -u +%T)"
