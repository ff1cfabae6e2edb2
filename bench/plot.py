#!/usr/bin/env python3
# SPDX-License-Identifier: BSL-1.0
"""Charts for the benchmark CSVs: one PNG per scenario group, the measured value against the
thread (or worker) count, one line per implementation.

    python3 bench/plot.py <results folder>      # reads *.csv there, writes charts/*.png

A case such as "throughput/cap:1024/4p4c" is drawn in the group "throughput/cap:1024" at
x = 8 threads; "pool_post/w:4/s:1" in "pool_post/s:1" at x = 4 workers. The sweeps of the
tachyonix scenarios use a logarithmic x: "funnel/13p1c/cap:16" is drawn in "funnel/13p1c" at
capacity 16 (its "unbounded" row as a dashed level line per queue), "pinball/balls:7" in
"pinball" at 7 balls. Needs matplotlib (Debian: python3-matplotlib); without it the script says
so and exits 0.
"""
import csv
import glob
import os
import re
import sys
from collections import defaultdict


SWEEPS = {"funnel": ("cap", "capacity"), "pinball": ("balls", "balls per rig")}


def split_case(case):
    """(group, x, x_label) for a case name, or None when it has no thread count. In a sweep, x is
    None for a level without a parameter (an unbounded queue in the capacity sweep)."""
    parts = case.split("/")
    if parts[0] in SWEEPS:
        key, label = SWEEPS[parts[0]]
        m = re.fullmatch(key + r":(\d+)", parts[-1])
        return "/".join(parts[:-1]), (int(m.group(1)) if m else None), label
    for i, part in enumerate(parts):
        m = re.fullmatch(r"(\d+)p(\d+)c", part)
        if m and m.group(1) != m.group(2):
            # 1p15c and 15p1c have the thread count of 8p8c: a chart of their own each.
            return case, 0, "implementation"
        if m:
            x, label = int(m.group(1)) + int(m.group(2)), "threads (producers + consumers)"
        else:
            m = re.fullmatch(r"(?:w|threads):(\d+)", part)
            if not m:
                continue
            x = int(m.group(1))
            label = "workers" if part.startswith("w:") else "threads"
        group = "/".join(parts[:i] + parts[i + 1:])
        return group, x, label
    return None


def main():
    folder = sys.argv[1] if len(sys.argv) > 1 else "."
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        import matplotlib.ticker
    except ImportError:
        print("plot.py: matplotlib not installed (apt-get install python3-matplotlib): no charts")
        return 0

    series = defaultdict(lambda: defaultdict(dict))  # group -> implementation -> x -> value
    labels = {}
    for path in sorted(glob.glob(os.path.join(folder, "*.csv"))):
        with open(path, newline="") as f:
            lines = [line for line in f if not line.startswith("#")]  # context lines
            for row in csv.DictReader(lines):
                placed = split_case(row["case"])
                if placed is None:
                    continue
                group, x, label = placed
                series[group][row["implementation"]][x] = float(row["value"])
                labels[group] = (label, row.get("metric", "items/s"))

    out = os.path.join(folder, "charts")
    os.makedirs(out, exist_ok=True)
    for group, impls in sorted(series.items()):
        x_label, metric = labels[group]
        scale = 1e6 if metric.endswith("/s") else 1.0
        y_label = "millions of " + metric if metric.endswith("/s") else metric
        fig, ax = plt.subplots(figsize=(7, 4.5))
        xs_all = {x for points in impls.values() for x in points}
        if group.split("/")[0] in SWEEPS:
            # Up to 20 distinct colours (tab10's ten, then their light variants from tab20).
            tab20 = plt.get_cmap("tab20").colors
            cycle = iter(list(tab20[0::2]) + list(tab20[1::2]))
            for impl, points in sorted(impls.items()):
                color = next(cycle)
                if None in points:  # no parameter to sweep: a level line across the chart
                    ax.axhline(points[None] / scale, color=color, linestyle="--", label=impl)
                xs = sorted(x for x in points if x is not None)
                if xs:
                    ax.plot(xs, [points[x] / scale for x in xs], marker="o", color=color,
                            label=impl)
            ax.set_xscale("log")
            ax.set_title(group)
            ax.set_xlabel(x_label)
            ax.set_ylabel(y_label)
            ax.legend(fontsize=7)
        elif len(xs_all) == 1:
            # One measurement per implementation (one thread count): bars.
            names = sorted(impls)
            values = [next(iter(impls[n].values())) / scale for n in names]
            ax.barh(names, values, color="tab:blue")
            ax.invert_yaxis()
            ax.set_xlabel(y_label)
            x_only = next(iter(xs_all))
            ax.set_title(group + ("" if x_only == 0 else ", %d %s" % (x_only, x_label.split()[0])),
                         fontsize=10)
        else:
            for impl, points in sorted(impls.items()):
                xs = sorted(points)
                ax.plot(xs, [points[x] / scale for x in xs], marker="o", label=impl)
            ax.xaxis.set_major_locator(matplotlib.ticker.MaxNLocator(integer=True))
            ax.set_title(group)
            ax.set_xlabel(x_label)
            ax.set_ylabel(y_label)
            ax.legend(fontsize=8)
        ax.grid(True, alpha=0.3)
        fig.tight_layout()
        name = re.sub(r"[^A-Za-z0-9_.-]+", "_", group) + ".png"
        fig.savefig(os.path.join(out, name), dpi=110)
        plt.close(fig)
        print("plot.py: wrote", os.path.join(out, name))
    return 0


if __name__ == "__main__":
    sys.exit(main())
