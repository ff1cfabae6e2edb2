#!/usr/bin/env python3
# SPDX-License-Identifier: BSL-1.0
"""Branch coverage of include/async/ split into decisions and exception edges.

gcov counts two kinds of branches: the two ways of a decision in our code (an if, a loop, a
&&), and the edge from every call that may throw to its landing pad ("throw" in gcov's JSON).
The second kind is most of what lcov reports as untaken, and lcov 1.16 cannot leave it out
with gcc 12's JSON output (its geninfo_no_exception_branch only filters the text format).
This script reads the same counters with `gcov --json-format` and reports both kinds, and
lists every decision branch that no test took, with its line, so that each can get a test or
an entry in docs/coverage.md.

With a fourth argument it also writes the counters of include/async/ as an lcov tracefile
(lines, branches, functions), for genhtml and `lcov --summary`: gcov's JSON read here is what
`lcov --capture` would read again from the text format, five times slower.

usage: coverage_branches.py <build dir> <source dir> <output file> [<tracefile>]
"""
import collections
import concurrent.futures
import gzip
import json
import os
import subprocess
import sys
import tempfile


def gcda_files(build):
    for root, _, files in os.walk(os.path.realpath(build)):
        for name in files:
            if name.endswith(".gcda"):
                yield os.path.join(root, name)


def gcov_json(gcda):
    """The JSON documents that gcov writes for one .gcda file."""
    with tempfile.TemporaryDirectory() as scratch:
        subprocess.run(["gcov", "-b", "--json-format", "-o", os.path.dirname(gcda), gcda],
                       cwd=scratch, check=True, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
        documents = []
        for name in sorted(os.listdir(scratch)):
            with gzip.open(os.path.join(scratch, name), "rt") as f:
                documents.append(json.load(f))
        return documents


def main():
    build, source, output = sys.argv[1:4]
    tracefile = sys.argv[4] if len(sys.argv) > 4 else None
    include = os.path.join(os.path.realpath(source), "include", "async") + os.sep
    # (file, line, index of the branch on that line) -> [times taken, is an exception edge]
    branches = collections.defaultdict(lambda: [0, False])
    # (file, line) -> times executed; (file, function) -> [first line, times called]
    lines = collections.defaultdict(int)
    functions = collections.defaultdict(lambda: [0, 0])
    with concurrent.futures.ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        for documents in pool.map(gcov_json, sorted(gcda_files(build))):
            for data in documents:
                for entry in data["files"]:
                    file = os.path.realpath(os.path.join(data.get("current_working_directory", ""),
                                                         entry["file"]))
                    if not file.startswith(include):
                        continue
                    relative = "include/async/" + file[len(include):]
                    for function in entry.get("functions", []):
                        slot = functions[(relative, function["name"])]
                        slot[0] = function["start_line"]
                        slot[1] += function["execution_count"]
                    for line in entry["lines"]:
                        lines[(relative, line["line_number"])] += line["count"]
                        for i, branch in enumerate(line["branches"]):
                            slot = branches[(relative, line["line_number"], i)]
                            slot[0] += branch["count"]
                            slot[1] = slot[1] or branch["throw"]
    if tracefile:
        write_tracefile(tracefile, source, lines, branches, functions)

    def share(kind):
        chosen = [taken for (taken, throw) in branches.values() if throw == kind]
        hit = sum(1 for taken in chosen if taken > 0)
        return hit, len(chosen)

    decisions_hit, decisions = share(False)
    throws_hit, throws = share(True)
    untaken = sorted(key for key, (taken, throw) in branches.items() if not throw and taken == 0)
    sources = {}
    with open(output, "w") as out:
        out.write("decision branches of include/async: %.1f%% (%d of %d); exception edges: "
                  "%.1f%% (%d of %d)\n" % (100.0 * decisions_hit / max(decisions, 1),
                                           decisions_hit, decisions,
                                           100.0 * throws_hit / max(throws, 1), throws_hit,
                                           throws))
        out.write("untaken decision branches (file:line, branch index on the line, source):\n")
        for file, line, index in untaken:
            if file not in sources:
                with open(os.path.join(source, file)) as f:
                    sources[file] = f.read().split("\n")
            text = sources[file][line - 1].strip()
            out.write("%s:%d [%d] %s\n" % (file, line, index, text))
    with open(output) as f:
        print(f.readline().rstrip())


def write_tracefile(path, source, lines, branches, functions):
    """One lcov record per header of include/async/ (the format of geninfo(1))."""
    files = sorted({file for file, _ in lines})
    with open(path, "w") as out:
        for file in files:
            out.write("TN:\nSF:%s\n" % os.path.join(os.path.realpath(source), file))
            mine = sorted((line, name, count) for (f, name), (line, count) in functions.items()
                          if f == file)
            for line, name, _ in mine:
                out.write("FN:%d,%s\n" % (line, name))
            for _, name, count in mine:
                out.write("FNDA:%d,%s\n" % (count, name))
            out.write("FNF:%d\nFNH:%d\n" % (len(mine), sum(1 for m in mine if m[2] > 0)))
            numbers = sorted(line for f, line in lines if f == file)
            found = hit = 0
            for line in numbers:
                count = lines[(file, line)]
                out.write("DA:%d,%d\n" % (line, count))
                index = 0
                while (file, line, index) in branches:
                    taken = branches[(file, line, index)][0]
                    out.write("BRDA:%d,0,%d,%d\n" % (line, index, taken))
                    found += 1
                    hit += taken > 0
                    index += 1
            out.write("BRF:%d\nBRH:%d\n" % (found, hit))
            out.write("LF:%d\nLH:%d\n" % (len(numbers),
                                           sum(1 for line in numbers if lines[(file, line)] > 0)))
            out.write("end_of_record\n")


if __name__ == "__main__":
    main()
