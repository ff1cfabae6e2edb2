#!/usr/bin/env bash
# SPDX-License-Identifier: BSL-1.0
# Runs every bench_* binary of a self-contained benchmark folder (the bench-static preset's
# build/bench-static/bench/, copied to the machine under test) one after the other and keeps
# each binary's table, JSON and CSV in one results folder.
#
#   bench/sweep.sh <folder with bench_*> <results folder> [threads] [extra benchmark flags...]
#
# threads defaults to the machine's (nproc). Each binary gets ASYNC_SWEEP_LIMIT seconds (default
# 900); one that runs past it is stopped and the sweep goes on with the next. If the folder holds
# glibc/ (ld-linux-x86-64.so.2, libc.so.6, libm.so.6 of the build machine) and the binaries do
# not start with the machine's own glibc, they are started through that loader.
set -uo pipefail
dir=$(cd "$1" && pwd)
out=$2
threads=${3:-$(nproc)}
shift $(( $# < 3 ? $# : 3 ))
mkdir -p "$out"
out=$(cd "$out" && pwd)
limit=${ASYNC_SWEEP_LIMIT:-900}
only=${ASYNC_SWEEP_ONLY:-}

launcher=()
probe=$(ls "$dir"/bench_* | head -n1)
if ! "$probe" --benchmark_list_tests >/dev/null 2>&1; then
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
  grep -m1 'model name' /proc/cpuinfo || true
  echo "threads: $threads"
  echo "flags: $*"
} | tee "$out/machine.txt"

status=0
for bin in "$dir"/bench_*; do
  name=$(basename "$bin")
  case "$name" in *.so*) continue ;; esac
  if [ -n "$only" ] && ! grep -qw "$name" <<<"$only"; then continue; fi
  echo "=== $name ($(date -u +%T))"
  start=$(date +%s)
  timeout --signal=INT --kill-after=10 "$limit" "${launcher[@]}" "$bin" \
    --async_threads="$threads" \
    --benchmark_out="$out/$name.json" --benchmark_out_format=json \
    --async_csv="$out/$name.csv" "$@" >"$out/$name.txt" 2>&1
  rc=$?
  echo "=== $name: exit $rc after $(( $(date +%s) - start )) s"
  [ $rc -eq 0 ] || status=1
done
exit $status
