#!/usr/bin/env bash
# SPDX-License-Identifier: BSL-1.0
# The pool binaries against TBB's task_group and Asio's thread_pool in interleaved rounds, for
# a machine with many cores that is lent for minutes: sweep.sh (beside this script) over the
# pool binaries only, bounded by a deadline, results kept after every binary. Run it from a
# self-contained benchmark folder (the bench-static preset's build/bench-static/bench/, where
# both scripts are copied):
#
#   bash pool16.sh [results folder]       BUDGET=<seconds> (420)  ROUNDS=<rounds> (5)
#
# Every binary runs with --async_threads=$(nproc) (workers 1, 2, 4 ... N); the results folder
# (machine.txt, and per binary its tables, CSV and JSON) is tarred into $OUT/results.tgz when
# OUT is set, or into results.tgz beside the results folder, after each binary, so that a run
# cut short still returns what it did. About 6 minutes on 16 cores.
set -u
dir=$(cd "$(dirname "$0")" && pwd)
out=${1:-$dir/results-pool16}
mkdir -p "$out"
out=$(cd "$out" && pwd)
export ASYNC_SWEEP_TAR=${OUT:+$OUT/}results.tgz
[ -n "${OUT:-}" ] || ASYNC_SWEEP_TAR=$(dirname "$out")/results.tgz
export ASYNC_SWEEP_BUDGET=${BUDGET:-420}
export ASYNC_SWEEP_ROUNDS=${ROUNDS:-5}
# The targets first: execute() against TBB and post() + future against Asio, S = 1 and 4; an
# outside post's wait while every worker runs an endless chain (p50, p99); chains; idle cost.
export ASYNC_SWEEP_ONLY="bench_pool_window bench_pool_post bench_pool_fairness bench_pool_chain
  bench_idle_cost"
exec bash "$dir/sweep.sh" "$dir" "$out"
