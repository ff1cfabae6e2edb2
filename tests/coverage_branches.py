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

usage: coverage_branches.py <build dir> <source dir> <output file>
"""
import collections
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


def main():
    build, source, output = sys.argv[1:4]
    include = os.path.join(os.path.realpath(source), "include", "async") + os.sep
    # (file, line, index of the branch on that line) -> [times taken, is an exception edge]
    branches = collections.defaultdict(lambda: [0, False])
    with tempfile.TemporaryDirectory() as scratch:
        for gcda in gcda_files(build):
            subprocess.run(["gcov", "-b", "--json-format", "-o", os.path.dirname(gcda), gcda],
                           cwd=scratch, check=True, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
            for name in os.listdir(scratch):
                path = os.path.join(scratch, name)
                with gzip.open(path, "rt") as f:
                    data = json.load(f)
                os.remove(path)
                for entry in data["files"]:
                    file = os.path.realpath(os.path.join(data.get("current_working_directory", ""),
                                                         entry["file"]))
                    if not file.startswith(include):
                        continue
                    relative = "include/async/" + file[len(include):]
                    for line in entry["lines"]:
                        for i, branch in enumerate(line["branches"]):
                            slot = branches[(relative, line["line_number"], i)]
                            slot[0] += branch["count"]
                            slot[1] = slot[1] or branch["throw"]

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


if __name__ == "__main__":
    main()
