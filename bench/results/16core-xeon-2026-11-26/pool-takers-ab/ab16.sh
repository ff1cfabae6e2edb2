#!/usr/bin/env bash
# Before/after in alternating rounds (ABBA) on the device, bounded by a deadline; the after side
# runs every competitor (peer ratios of the same round), the before side ours alone.
set -u
D=$(cd "$(dirname "$0")" && pwd)
R=/tmp/ab; mkdir -p $R
deadline=$(( $(date +%s) + ${BUDGET:-270} ))
nproc; lscpu | grep 'Model name'
for r in 1 2 3 4 5 6 7 8 9; do
  if [ $((r % 2)) -eq 1 ]; then order="before after"; else order="after before"; fi
  for b in bench_pool_window bench_pool_post bench_pool_chain; do
    for side in $order; do
      left=$(( deadline - $(date +%s) ))
      if [ $left -lt 5 ]; then echo "deadline at round $r"; tar -C /tmp -czf $OUT/ab.tgz ab; exit 0; fi
      filt=async::
      if [ $side = after ] && [ $b != bench_pool_chain ]; then filt=.; fi
      timeout --signal=INT -k 3 $left "$D/$side/$b" --async_threads=16 --async_items=131072 \
        --benchmark_min_time=0.05 --benchmark_filter="$filt" \
        --async_csv=$R/r${r}_${side}_${b}.csv > $R/r${r}_${side}_${b}.txt 2>&1
      echo "round $r $side $b: exit $? at $(( deadline - $(date +%s) )) s before the deadline"
    done
  done
  tar -C /tmp -czf $OUT/ab.tgz ab
done
