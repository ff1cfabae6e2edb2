#!/usr/bin/env python3
# SPDX-License-Identifier: BSL-1.0
"""Median and range of per-round after/before ratios from bench/ab_rounds.sh results:

    python3 bench/ab_ratios.py <results folder>   # prints a Markdown table
"""
import csv, glob, re, statistics, sys
from collections import defaultdict
d = sys.argv[1]
vals = defaultdict(lambda: defaultdict(dict))  # (bin, case, impl) -> round -> side -> value
for f in glob.glob(d + '/r*_*.csv'):
    m = re.match(r'.*/r(\d+)_(before|after)_(\w+)\.csv', f)
    r, side, b = int(m.group(1)), m.group(2), m.group(3)
    for row in csv.reader(l for l in open(f) if not l.startswith('#')):
        if row[0] == 'case': continue
        case, impl, value, metric = row[0], row[1], float(row[2]), row[3]
        if not impl.startswith('async::'): continue
        vals[(b, case, impl)][r][side] = (value, metric)
rows = []
for key in sorted(vals):
    ratios = []
    for r, sides in vals[key].items():
        if 'before' in sides and 'after' in sides:
            (a, metric), (bb, _) = sides['after'], sides['before']
            ratios.append(a / bb if 'items' in metric or '/s' in metric else bb / a)
    if ratios:
        rows.append((key, statistics.median(ratios), min(ratios), max(ratios), len(ratios)))
print('| binary | case | implementation | after/before (median) | range | rounds |')
print('|---|---|---|---|---|---|')
for (b, case, impl), med, lo, hi, n in rows:
    print(f'| {b.replace("bench_","")} | {case} | {impl} | {med:.2f}x | {lo:.2f}-{hi:.2f} | {n} |')
allr = [m for _, m, _, _, _ in rows]
print(f'\nall cases: median of medians {statistics.median(allr):.2f}x, min {min(allr):.2f}x, max {max(allr):.2f}x ({len(allr)} cases)')
