#!/usr/bin/env bash
# Builds and runs per_element.cpp (g++ -O2, the headers of this checkout, Debian's
# libconcurrentqueue-dev), three times, on an otherwise quiet machine.
#   bash bench/results/2core-epyc-vm-2026-11-27-per-element/measure.sh
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
g++ -O2 -std=c++14 -Wall -Wextra -I"$root/include" -o /tmp/async_per_element "$here/per_element.cpp" -pthread
for run in 1 2 3; do
  echo "run $run"
  /tmp/async_per_element
done
