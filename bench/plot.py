#!/usr/bin/env python3
# SPDX-License-Identifier: BSL-1.0
"""Charts for the benchmark CSVs: one PNG per scenario group, the measured value against the
thread (or worker) count, one line per implementation; and, where the run had interleaved rounds
(--async_rounds), a second PNG per group, <group>_ratio.png: how many times better ours is than
each peer (ours / peer for a rate, peer / ours for a cost: above 1 is ours ahead), the median of
the per-round ratios as a point and their range, lowest to highest round, as a bar.

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
import math
import os
import re
import sys
from collections import defaultdict


SWEEPS = {"funnel": ("cap", "capacity"), "pinball": ("balls", "balls per rig")}


def split_case(case):
    """(group, x, x_label) for a case name; a case without a thread count is a group of its own,
    at x = 0. In a sweep, x is None for a level without a parameter (an unbounded queue in the
    capacity sweep)."""
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
    # No thread count in the name (ping_pong/round_trip: two threads always): a chart of its own.
    return case, 0, "implementation"


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
    # group -> peer -> x -> (median, lowest, highest) of ours / peer over the rounds
    ratios = defaultdict(lambda: defaultdict(dict))
    reference = {}  # (group, x) -> the implementation of ours that the case's ratios are of
    labels = {}
    for path in sorted(glob.glob(os.path.join(folder, "*.csv"))):
        with open(path, newline="") as f:
            lines = [line for line in f if not line.startswith("#")]  # context lines
            for row in csv.DictReader(lines):
                if not row.get("value"):
                    continue  # another table (bench_memory's bytes per element): no chart
                group, x, label = split_case(row["case"])
                impl = row["implementation"]
                series[group][impl][x] = float(row["value"])
                labels[group] = (label, row.get("metric", "items/s"))
                if not row.get("ours_vs_this"):
                    reference[(group, x)] = impl  # the case's ours, which the ratios are of
                elif not impl.startswith("async::") and row.get("ours_vs_this_high"):
                    # (Ours against another of ours is no comparison with a peer: left out.)
                    ratios[group][impl][x] = (float(row["ours_vs_this"]),
                                              float(row["ours_vs_this_low"]),
                                              float(row["ours_vs_this_high"]))

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
    for group, peers in sorted(ratios.items()):
        name = draw_ratios(plt, matplotlib, out, group, peers, reference, labels[group][0])
        print("plot.py: wrote", os.path.join(out, name))
    return 0


def ratio_text(r):
    """"1.07x (0.98-1.21)": a median ratio and its range."""
    return "%.2fx (%.2f-%.2f)" % r


def draw_ratios(plt, matplotlib, out, group, peers, reference, x_label):
    """The ratio chart of one group: ours / peer per peer, median and range. Returns its name."""
    xs_all = sorted({x for points in peers.values() for x in points},
                    key=lambda x: -1 if x is None else x)
    bars = len(xs_all) == 1 and group.split("/")[0] not in SWEEPS
    fig, ax = plt.subplots(figsize=(7, 1.6 + 0.6 * len(peers)) if bars else (7, 4.5))
    refs = sorted({reference[(group, x)] for x in xs_all if (group, x) in reference})
    title = "%s: %s against each peer" % (group, " / ".join(refs) or "ours")
    note = "median of the per-round ratios; bar: lowest to highest round"
    axis = "times better than the peer (above 1: ours ahead)"
    tab20 = plt.get_cmap("tab20").colors
    colors = list(tab20[0::2]) + list(tab20[1::2])
    if bars:
        # One comparison per peer: horizontal bars, log scale centred on 1.
        names = sorted(peers)
        rows = [next(iter(peers[n].values())) for n in names]
        ys = range(len(names))
        # Bars from the level (1x) to the median: left of it, the peer is ahead.
        ax.barh(ys, [r[0] - 1.0 for r in rows], left=1.0, alpha=0.35, height=0.6,
                color=["tab:blue" if r[0] >= 1.0 else "tab:red" for r in rows])
        ax.errorbar([r[0] for r in rows], ys, fmt="o", color="tab:blue", capsize=4,
                    xerr=[[r[0] - r[1] for r in rows], [r[2] - r[0] for r in rows]])
        for y, r in zip(ys, rows):
            ax.annotate(ratio_text(r), (r[2], y), xytext=(4, -3), textcoords="offset points",
                        fontsize=7)
        ax.set_yticks(list(ys))
        ax.set_yticklabels(names)
        ax.invert_yaxis()
        ax.set_xscale("log")
        ax.axvline(1.0, color="black", linewidth=1)
        ax.set_xlabel(axis + "\n" + note, fontsize=8)
        x_only = xs_all[0]
        ax.set_title(title + ("" if x_only == 0 else ", %d %s" % (x_only, x_label.split()[0])),
                     fontsize=9)
    else:
        sweep = group.split("/")[0] in SWEEPS
        numeric = [x for x in xs_all if x is not None]
        for k, (peer, points) in enumerate(sorted(peers.items())):
            color = colors[k % len(colors)]
            if None in points:  # no parameter to sweep: a dashed level, its range in the legend
                r = points[None]
                ax.axhline(r[0], color=color, linestyle="--", linewidth=1,
                           label="%s, unbounded: %s" % (peer, ratio_text(r)))
            xs = sorted(x for x in points if x is not None)
            if not xs:
                continue
            # Neighbouring peers' bars side by side rather than on top of one another.
            shift = (k - (len(peers) - 1) / 2.0) * 0.04
            at = [x * (1 + shift) if sweep else x + shift * 5 for x in xs]
            rows = [points[x] for x in xs]
            ax.errorbar(at, [r[0] for r in rows], marker="o", color=color, capsize=3,
                        yerr=[[r[0] - r[1] for r in rows], [r[2] - r[0] for r in rows]],
                        label=peer)
        if sweep and numeric:
            # The measured parameters as the ticks (one capacity alone would get none).
            ax.set_xscale("log")
            ax.set_xlim(min(numeric) / 2.0, max(numeric) * 2.0)
            ax.set_xticks(numeric)
            ax.set_xticklabels([str(x) for x in numeric])
            ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        elif numeric:
            ax.xaxis.set_major_locator(matplotlib.ticker.MaxNLocator(integer=True))
        ax.set_yscale("log")
        ax.axhline(1.0, color="black", linewidth=1)
        ax.set_title(title, fontsize=9)
        ax.set_xlabel(x_label)
        ax.set_ylabel(axis + "\n" + note, fontsize=7)
        ax.legend(fontsize=7)
    # Ratio ticks at round values within the data's span (a log axis of less than a decade
    # would otherwise show the 1x tick alone).
    ratio_axis = ax.xaxis if bars else ax.yaxis
    low = min([1.0] + [r[1] for points in peers.values() for r in points.values()])
    high = max([1.0] + [r[2] for points in peers.values() for r in points.values()])
    # The span of the data and the level, with room for the bars' labels.
    (ax.set_xlim if bars else ax.set_ylim)(low / 1.3, high * (3.0 if bars else 1.3))
    ticks = [t * 10.0**e for e in range(-3, 4) for t in (1, 1.5, 2, 3, 5, 7)]
    shown = [t for t in ticks if low / 1.3 <= t <= high * 1.3]
    for keep in ((1, 1.5, 2, 3, 5, 7), (1, 2, 5), (1,)):
        thinned = [t for t in shown if round(t / 10.0 ** math.floor(math.log10(t) + 1e-9), 6)
                   in keep]
        if len(thinned) <= (7 if bars else 10):
            break
    ratio_axis.set_major_locator(matplotlib.ticker.FixedLocator(sorted(set(thinned + [1.0]))))
    ratio_axis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: "%gx" % v))
    ratio_axis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    ax.grid(True, which="major", alpha=0.3)
    fig.tight_layout()
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", group) + "_ratio.png"
    fig.savefig(os.path.join(out, name), dpi=110)
    plt.close(fig)
    return name


if __name__ == "__main__":
    sys.exit(main())
