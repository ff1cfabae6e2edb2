#!/usr/bin/env python3
# SPDX-License-Identifier: BSL-1.0
"""Charts for the benchmark CSVs: one PNG per scenario group, the measured value against the
thread (or worker) count, one line per implementation; and, where the run had interleaved rounds
(--async_rounds), a second PNG per group, <group>_ratio.png: how many times better ours is than
each peer (ours / peer for a rate, peer / ours for a cost: above 1 is ours ahead), the median of
the per-round ratios as a point and their range, lowest to highest round, as a bar.

    python3 bench/plot.py <results folder>      # reads *.csv there, writes charts/*.png
                                                # and charts/index.md, which shows them all

Every chart is titled in words, says in its lower corner the machine, commit, element type and
date of its run (from the <binary>.meta.json beside each CSV, or the "# " lines of older CSVs),
and draws ours in one colour (red; dashed for ours' other call styles) and each peer in a colour
of its own, the same in every chart.

A case such as "throughput/cap:1024/4p4c" is drawn in the group "throughput/cap:1024" at
x = 8 threads; "pool_post/w:4/s:1" in "pool_post/s:1" at x = 4 workers. The sweeps of the
tachyonix scenarios use a logarithmic x: "funnel/13p1c/cap:16" is drawn in "funnel/13p1c" at
capacity 16 (its "unbounded" row as a dashed level line per queue), "pinball/balls:7" in
"pinball" at 7 balls. Needs matplotlib (Debian: python3-matplotlib); without it the script says
so and exits 0.
"""
import csv
import glob
import json
import math
import os
import re
import sys
import textwrap
from collections import defaultdict


SWEEPS = {"funnel": ("cap", "capacity"), "pinball": ("balls", "balls per rig")}

# What each scenario is, in words (the chart titles).
SCENARIOS = {
    "throughput": "queues, single calls",
    "bulk16": "unbounded queues, bulk calls of 16",
    "funnel": "funnel",
    "pinball": "pinball: messages hopping between queues drained by pool tasks",
    "ping_pong": "ping-pong: one element between two threads",
    "pool_post": "pool: post + future.get of tiny tasks",
    "pool_window_post": "busy pool: post with a future, 1024 tasks in flight per submitter",
    "pool_window_execute": "busy pool: no future, 1024 tasks in flight per submitter",
    "pool_chain": "pool: chained tasks",
    "outside_wait_p50": "pool fairness: the median wait of an outside task while every worker "
                        "re-posts itself",
    "outside_wait_p99": "pool fairness: the 99th percentile wait of an outside task while every "
                        "worker re-posts itself",
    "asio_strands": "Asio's work queue with strands",
    "idle_cost": "idle cost",
    "fetch_add_ceiling": "the ceiling of one shared ticket (fetch_add on one line)",
}

# The binaries whose element type --async_type chooses (the others move tasks or messages).
QUEUE_BINARIES = {"bench_queue_throughput.csv", "bench_unbounded_throughput.csv",
                  "bench_funnel.csv", "bench_ping_pong.csv"}

OURS_COLOR = "#d62728"  # ours, in every chart
# Peers: one colour each, the same in every chart (red is ours alone).
PEER_COLORS = ["#1f77b4", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#17becf", "#7f7f7f",
               "#bcbd22", "#e377c2", "#393b79", "#637939", "#8c6d31"]


def is_ours(impl):
    return impl.startswith("async::")


def style_of(impl, peers_seen):
    """(colour, line style, marker) of an implementation: ours red, its try calls dark red and
    dashed, its other variants light red and dotted; each peer its own colour, kept across the
    charts of a run by `peers_seen` (name -> colour)."""
    if is_ours(impl):
        variant = impl.split(" ", 1)[1] if " " in impl else ""
        if not variant or variant.endswith("+strand"):
            return OURS_COLOR, "-", "o"
        return ("#8b0000", "--", "s") if "try" in variant else ("#f08080", ":", "^")
    if impl not in peers_seen:
        peers_seen[impl] = PEER_COLORS[len(peers_seen) % len(PEER_COLORS)]
    return peers_seen[impl], "-", "o"


def words(group):
    """A group's name in words: "throughput/cap:1024" -> "queues, single calls, capacity 1024"."""
    parts = group.split("/")
    out = [SCENARIOS.get(parts[0], parts[0].replace("_", " "))]
    for part in parts[1:]:
        if part.startswith("element:"):
            out.append(part[len("element:"):] + " elements")
            continue
        m = re.fullmatch(r"(\d+)p(\d+)c", part)
        if m:
            p, c = int(m.group(1)), int(m.group(2))
            out.append("%d producer%s, %d consumer%s" % (p, "s" * (p != 1), c, "s" * (c != 1)))
            continue
        m = re.fullmatch(r"([a-z_]+):(\d+)", part)
        if m:
            key, n = m.group(1), int(m.group(2))
            name = {"cap": "capacity %d", "s": "%d submitter", "w": "%d worker",
                    "strands": "%d strand", "k": "%d follow-ups", "balls": "%d ball",
                    "threads": "%d thread", "backlog": "backlog %d", "roots": "%d root"}.get(key, key + " %d")
            text = name % n
            if name.endswith(("submitter", "worker", "strand", "ball", "thread", "root")) and n != 1:
                text += "s"
            out.append(text)
            continue
        out.append(part.replace("_", " "))
    return ", ".join(out)


def read_context(path, lines):
    """(machine, commit, element type, date) of a CSV's run: its .meta.json, else its "# "
    lines (older runs; no date there)."""
    meta_path = os.path.splitext(path)[0] + ".meta.json"
    if os.path.exists(meta_path):
        with open(meta_path) as f:
            m = json.load(f)
        return (m.get("machine", "?"), m.get("commit", "?"), m.get("element_type") or "",
                m.get("date", "")[:10])
    info = {}
    for line in lines:
        if line.startswith("# ") and ":" in line:
            key, _, value = line[2:].partition(":")
            info[key.strip()] = value.strip()
    machine = info.get("cpu", "?")
    threads = re.match(r"(\d+)", info.get("hardware threads", ""))
    if threads:
        machine += ", %s hardware threads" % threads.group(1)
    queues = os.path.basename(path) in QUEUE_BINARIES  # older runs moved uint64_t only
    return machine, info.get("commit", "?"), "uint64_t" if queues else "", ""


def corner(fig, context):
    """The run's context in the lower right corner of a figure."""
    machine, commit, element, date = context
    text = " | ".join([machine, "commit " + commit] + (["element " + element] if element else [])
                      + ([date] if date else []))
    fig.text(0.99, -0.01, text, ha="right", va="top", fontsize=6, color="#555555")


def wrap_title(text, width=70):
    return "\n".join(textwrap.wrap(text, width))


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


def metric_words(metric):
    """(scale, axis label, unit) of a CSV metric: "tasks/s" -> millions of tasks per second."""
    if metric.endswith("/s"):
        unit = metric[:-2]
        return 1e6, "millions of %s per second (higher is better)" % unit, unit
    if metric == "wait_us":
        return 1.0, "microseconds an outside post waited (lower is better)", "microseconds"
    return 1.0, "CPU seconds per wall second (lower is better)", "CPU seconds"


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
    reference = {}  # (group, peer) -> the implementation of ours the peer's ratios are of
    labels = {}
    contexts = {}  # group -> the run's (machine, commit, element type, date)
    for path in sorted(glob.glob(os.path.join(folder, "*.csv"))):
        with open(path, newline="") as f:
            raw = f.readlines()
        context = read_context(path, raw)
        lines = [line for line in raw if not line.startswith("#")]  # older runs' context lines
        for row in csv.DictReader(lines):
            if not row.get("value"):
                continue  # another table (bench_memory's bytes per element): no chart
            group, x, label = split_case(row["case"])
            if context[2] not in ("", "uint64_t"):
                # Runs of other element types in the same folder: charts of their own.
                group += "/element:" + context[2]
            impl = row["implementation"]
            metric = row.get("metric", "items/s")
            if metric == "items/s" and group.startswith(("pool_", "asio_")):
                metric = "tasks/s"  # older runs called every rate items
            series[group][impl][x] = float(row["value"])
            labels[group] = (label, metric)
            contexts[group] = context
            if row.get("ours_vs_this") and row.get("ours_vs_this_high") and not is_ours(impl):
                # (Ours against another of ours is no comparison with a peer: left out.)
                ratios[group][impl][x] = (float(row["ours_vs_this"]),
                                          float(row["ours_vs_this_low"]),
                                          float(row["ours_vs_this_high"]))
                if row.get("compared_with"):
                    reference[(group, impl)] = row["compared_with"]

    out = os.path.join(folder, "charts")
    os.makedirs(out, exist_ok=True)
    peers_seen = {}
    index = []  # (title, file, what it answers)
    for group, impls in sorted(series.items()):
        x_label, metric = labels[group]
        scale, y_label, unit = metric_words(metric)
        fig, ax = plt.subplots(figsize=(8, 4.5))
        xs_all = {x for points in impls.values() for x in points}
        title = words(group)
        if group.split("/")[0] in SWEEPS:
            for impl, points in sorted(impls.items()):
                color, line, marker = style_of(impl, peers_seen)
                if None in points:  # no parameter to sweep: a level line across the chart
                    ax.axhline(points[None] / scale, color=color, linestyle=line, linewidth=1,
                               label=impl + " (unbounded)")
                xs = sorted(x for x in points if x is not None)
                if xs:
                    ax.plot(xs, [points[x] / scale for x in xs], marker=marker, color=color,
                            linestyle=line, label=impl)
            ax.set_xscale("log")
            ax.set_xlabel(x_label)
            ax.set_ylabel(y_label, fontsize=8)
            answer = "How many %s per second each implementation moves, by %s." % (unit, x_label)
        elif len(xs_all) == 1:
            # One measurement per implementation (one thread count): bars.
            names = sorted(impls)
            values = [next(iter(impls[n].values())) / scale for n in names]
            ax.barh(names, values, color=[style_of(n, peers_seen)[0] for n in names])
            ax.invert_yaxis()
            ax.set_xlabel(y_label, fontsize=8)
            x_only = next(iter(xs_all))
            if x_only:
                title += ", %d %s" % (x_only, x_label.split()[0])
            answer = "What each implementation measures in this one case (%s)." % y_label
        else:
            for impl, points in sorted(impls.items()):
                color, line, marker = style_of(impl, peers_seen)
                xs = sorted(points)
                ax.plot(xs, [points[x] / scale for x in xs], marker=marker, color=color,
                        linestyle=line, label=impl)
            ax.xaxis.set_major_locator(matplotlib.ticker.MaxNLocator(integer=True))
            values = [v for points in impls.values() for v in points.values() if v > 0]
            if values and max(values) > 100 * min(values):
                ax.set_yscale("log")  # values apart by orders of magnitude: all of them seen
            ax.set_xlabel(x_label)
            ax.set_ylabel(y_label, fontsize=8)
            answer = "How each implementation scales with the %s (%s)." % (x_label, y_label)
        if ax.get_legend_handles_labels()[0]:
            # Beside the plot, never over its lines.
            ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
        ax.set_title(wrap_title(title), fontsize=10)
        ax.grid(True, alpha=0.3)
        corner(fig, contexts[group])
        name = re.sub(r"[^A-Za-z0-9_.-]+", "_", group) + ".png"
        fig.savefig(os.path.join(out, name), dpi=110, bbox_inches="tight", pad_inches=0.15)
        plt.close(fig)
        index.append((title, name, answer))
        print("plot.py: wrote", os.path.join(out, name))
    for group, peers in sorted(ratios.items()):
        name, title = draw_ratios(plt, matplotlib, out, group, peers, reference,
                                  labels[group][0], contexts[group], peers_seen)
        index.append((title, name, "How many times better ours is than each peer, round by "
                      "round: the median of the per-round ratios and their range (above 1x, "
                      "ours is ahead)."))
        print("plot.py: wrote", os.path.join(out, name))
    write_index(out, index)
    return 0


def write_index(out, index):
    """charts/index.md: every chart with its title and the question it answers."""
    lines = ["# Charts", "",
             "Each chart in this folder, with what it answers. The lower corner of each says "
             "the machine, commit, element type and date of its run. Ours is red in every "
             "chart.", ""]
    for title, name, answer in sorted(index, key=lambda e: e[1]):
        heading = title if title.startswith("async::") else title[0].upper() + title[1:]
        lines += ["## " + heading, "", answer, "",
                  "![%s](%s)" % (title, name), ""]
    with open(os.path.join(out, "index.md"), "w") as f:
        f.write("\n".join(lines))
    print("plot.py: wrote", os.path.join(out, "index.md"))


def ratio_text(r):
    """"1.07x (0.98-1.21)": a median ratio and its range."""
    return "%.2fx (%.2f-%.2f)" % r


def draw_ratios(plt, matplotlib, out, group, peers, reference, x_label, context, peers_seen):
    """The ratio chart of one group: ours / peer per peer, median and range. Returns its file
    name and its title."""
    xs_all = sorted({x for points in peers.values() for x in points},
                    key=lambda x: -1 if x is None else x)
    bars = len(xs_all) == 1 and group.split("/")[0] not in SWEEPS
    fig, ax = plt.subplots(figsize=(8, 1.8 + 0.6 * len(peers)) if bars else (8, 4.5))
    refs = sorted({reference[(group, p)] for p in peers if (group, p) in reference})
    title = "%s vs each peer: %s" % (" and ".join(refs) or "ours", words(group))
    note = "median of the per-round ratios; bar: lowest to highest round"
    axis = "times better than the peer (above 1: ours ahead)"

    def label(peer):
        # With two of ours in one chart (blocking and try calls), say which a peer is against.
        if len(refs) > 1 and (group, peer) in reference:
            return "%s (vs %s)" % (peer, reference[(group, peer)])
        return peer
    if bars:
        # One comparison per peer: horizontal bars, log scale centred on 1.
        names = sorted(peers)
        rows = [next(iter(peers[n].values())) for n in names]
        ys = range(len(names))
        # Bars from the level (1x) to the median: left of it, the peer is ahead.
        ax.barh(ys, [r[0] - 1.0 for r in rows], left=1.0, alpha=0.35, height=0.6,
                color=[style_of(n, peers_seen)[0] for n in names])
        ax.errorbar([r[0] for r in rows], ys, fmt="o", color="black", capsize=4,
                    xerr=[[r[0] - r[1] for r in rows], [r[2] - r[0] for r in rows]])
        for y, r in zip(ys, rows):
            ax.annotate(ratio_text(r), (r[2], y), xytext=(4, -3), textcoords="offset points",
                        fontsize=7)
        ax.set_yticks(list(ys))
        ax.set_yticklabels([label(n) for n in names])
        ax.invert_yaxis()
        ax.set_xscale("log")
        ax.axvline(1.0, color="black", linewidth=1)
        ax.set_xlabel(axis + "\n" + note, fontsize=8)
        x_only = xs_all[0]
        if x_only:
            title += ", %d %s" % (x_only, x_label.split()[0])
        ax.set_title(wrap_title(title), fontsize=9)
    else:
        sweep = group.split("/")[0] in SWEEPS
        numeric = [x for x in xs_all if x is not None]
        for k, (peer, points) in enumerate(sorted(peers.items())):
            color = style_of(peer, peers_seen)[0]
            if None in points:  # no parameter to sweep: a dashed level, its range in the legend
                r = points[None]
                ax.axhline(r[0], color=color, linestyle="--", linewidth=1,
                           label="%s, unbounded: %s" % (label(peer), ratio_text(r)))
            xs = sorted(x for x in points if x is not None)
            if not xs:
                continue
            # Neighbouring peers' bars side by side rather than on top of one another.
            shift = (k - (len(peers) - 1) / 2.0) * 0.04
            at = [x * (1 + shift) if sweep else x + shift * 5 for x in xs]
            rows = [points[x] for x in xs]
            ax.errorbar(at, [r[0] for r in rows], marker="o", color=color, capsize=3,
                        yerr=[[r[0] - r[1] for r in rows], [r[2] - r[0] for r in rows]],
                        label=label(peer))
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
        ax.set_title(wrap_title(title), fontsize=9)
        ax.set_xlabel(x_label)
        ax.set_ylabel(axis + "\n" + note, fontsize=7)
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
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
    corner(fig, context)
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", group) + "_ratio.png"
    fig.savefig(os.path.join(out, name), dpi=110, bbox_inches="tight", pad_inches=0.15)
    plt.close(fig)
    return name, title


if __name__ == "__main__":
    sys.exit(main())
