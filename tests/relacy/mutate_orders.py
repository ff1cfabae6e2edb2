#!/usr/bin/env python3
# SPDX-License-Identifier: BSL-1.0
"""Memory-order mutation score of the Relacy tests.

Every memory order that the library's headers pass explicitly (seq_cst, acq_rel, release,
acquire; relaxed cannot be weakened) is weakened one step, one mutant at a time, on a copy of
include/. The Relacy test sources (tests/relacy/*.cpp) whose dependencies contain the mutated
header are rebuilt against that copy, with the flags of their compile_commands.json entries, and
run. A mutant is caught when one of them fails (nonzero exit or timeout), and survives when all
of them pass. The score is caught / total; a mutant whose header no test includes is "not
reached" and counts as not caught.

  tests/relacy/mutate_orders.py --list                  # the mutants, nothing built
  tests/relacy/mutate_orders.py                         # baseline, then every mutant
  tests/relacy/mutate_orders.py --only 'bounded/turn.h' --report /tmp/turn.md

Progress goes to stderr, the Markdown report to stdout (and to --report FILE).
Python 3 standard library only.
"""

import argparse
import bisect
import collections
import concurrent.futures
import glob
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

# Headers left out of the default scope, relative to the repository root (--exclude replaces
# this list; --exclude= with nothing excludes nothing).
DEFAULT_EXCLUDES = [
    # Asio front end: needs Asio and real threads; no Relacy test includes it.
    "include/async/asio.h",
    # Test-only schedule perturbation (ASYNC_PERTURB): its own counters, no protocol order.
    "include/async/detail/perturb.h",
    # Process-wide membarrier state and std::atomic_thread_fence: plain std::atomic, off the
    # traits' atomic seam, so Relacy does not see these orders or fences.
    "include/async/detail/asymmetric_fence.h",
    # Futex parking: under Relacy rl_model::atomic::park replaces it (not on the atomic seam).
    "include/async/detail/park.h",
    # Public pool front end over real std::threads; the Relacy tests drive the scheduler.
    "include/async/threadpool.h",
    # The spin's compiler barrier (atomic_signal_fence): Relacy does not model signal fences.
    "include/async/detail/backoff.h",
]

DEFAULT_BUILD_DIR = "build/relacy"
DEFAULT_TESTS = "tests/relacy/*.cpp"
DEFAULT_INCLUDE_DIR = "include"
DEFAULT_TIMEOUT = 300

WEAKENABLE = ("seq_cst", "acq_rel", "release", "acquire")
ORDER_RE = re.compile(
    r"\bstd\s*::\s*memory_order_(relaxed|consume|acquire|release|acq_rel|seq_cst)\b")

# Atomic operations: call name -> (kind, index of the first order argument). For a CAS that is
# the success order, and the failure order follows it.
OPS = {
    "load": ("load", 0),
    "store": ("store", 1),
    "exchange": ("rmw", 1),
    "fetch_add": ("rmw", 1),
    "fetch_sub": ("rmw", 1),
    "fetch_or": ("rmw", 1),
    "fetch_and": ("rmw", 1),
    "fetch_xor": ("rmw", 1),
    "compare_exchange_weak": ("cas", 2),
    "compare_exchange_strong": ("cas", 2),
    "atomic_thread_fence": ("fence", 0),
    "atomic_signal_fence": ("signal_fence", 0),
    "atomic_load_explicit": ("load", 1),
    "atomic_store_explicit": ("store", 2),
    "atomic_exchange_explicit": ("rmw", 2),
    "atomic_fetch_add_explicit": ("rmw", 2),
    "atomic_fetch_sub_explicit": ("rmw", 2),
    "atomic_fetch_or_explicit": ("rmw", 2),
    "atomic_fetch_and_explicit": ("rmw", 2),
    "atomic_fetch_xor_explicit": ("rmw", 2),
    "atomic_compare_exchange_weak_explicit": ("cas", 3),
    "atomic_compare_exchange_strong_explicit": ("cas", 3),
}

# Relacy's test_result_str() values, and its internal assert (an invalid order pair, when
# Relacy is built with RL_DO_ASSERT or _DEBUG).
RELACY_KINDS = [
    "UNTIL CONDITION HIT", "INCONSISTENT TEST SUITE", "USER ASSERT FAILED",
    "USER INVARIANT FAILED", "DATA RACE", "ACCESS TO FREED MEMORY", "DOUBLE FREE",
    "MEMORY LEAK", "RESOURCE LEAK", "ACCESS TO UNINITIALIZED VARIABLE", "DEADLOCK", "LIVELOCK",
    "RECURSION ON NON-RECURSIVE MUTEX", "UNLOCKING MUTEX W/O OWNERSHIP",
    "DESTROYING OWNED MUTEX", "DOUBLE INITIALIZATION OF MUTEX",
    "USAGE OF NON INITIALIZED MUTEX", "DOUBLE INITIALIZATION OF CONDITION VARIABLE",
    "USAGE OF NON INITIALIZED CONDITION VARIABLE", "RELACY INTERNAL ASSERT FAILED",
]
KIND_RE = re.compile("|".join(re.escape(k) for k in RELACY_KINDS))
FAILED_KIND_RE = re.compile(r"FAILED \(([^,()]+)")

_print_lock = threading.Lock()


def log(msg):
    with _print_lock:
        sys.stderr.write(msg + "\n")
        sys.stderr.flush()


class Fatal(Exception):
    pass


# --------------------------------------------------------------------------------------------
# Scanning the headers

def _ident(c):
    return c.isalnum() or c == "_"


def mask_code(text):
    """The text with comments and the insides of string and character literals blanked to
    spaces (newlines kept), so that offsets and line numbers stay those of the text."""
    out = list(text)
    n = len(text)

    def blank(a, b):
        for k in range(a, b):
            if out[k] != "\n":
                out[k] = " "

    i = 0
    while i < n:
        c = text[i]
        if c == "/" and text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            blank(i, j)
            i = j
        elif c == "/" and text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            blank(i, j)
            i = j
        elif c == '"':
            p = i - 1
            raw = False
            if p >= 0 and text[p] == "R":
                q = p
                if text[q - 2:q] == "u8":
                    q -= 2
                elif q >= 1 and text[q - 1] in "uUL":
                    q -= 1
                raw = q == 0 or not _ident(text[q - 1])
            if raw:
                paren = text.find("(", i + 1)
                delim = text[i + 1:paren] if paren >= 0 else ""
                end = text.find(")" + delim + '"', paren + 1) if paren >= 0 else -1
                j = n if end < 0 else end + len(delim) + 2
                blank(i + 1, j - 1)
                i = j
                continue
            j = i + 1
            while j < n and text[j] not in '"\n':
                j += 2 if text[j] == "\\" else 1
            blank(i + 1, min(j, n))
            i = j + 1
        elif c == "'":
            # A digit separator (1'000'000) when the token before it is a number.
            k = i - 1
            while k >= 0 and (_ident(text[k]) or text[k] in "'."):
                k -= 1
            if i > 0 and _ident(text[i - 1]) and text[k + 1].isdigit():
                i += 1
                continue
            j = i + 1
            while j < n and text[j] not in "'\n":
                j += 2 if text[j] == "\\" else 1
            blank(i + 1, min(j, n))
            i = j + 1
        else:
            i += 1
    return "".join(out)


def enclosing_call(masked, pos):
    """The innermost call whose parentheses hold `pos`: (name, offset of its '(', index of the
    argument that holds pos, number of arguments). None when pos is in no call's parentheses
    (or in braces or brackets first). name is '' when no identifier precedes the '('."""
    depth = 0
    commas = 0
    i = pos - 1
    while i >= 0:
        c = masked[i]
        if c in ")]}":
            depth += 1
        elif c in "([{":
            if depth == 0:
                if c != "(":
                    return None
                break
            depth -= 1
        elif depth == 0:
            if c == ",":
                commas += 1
            elif c == ";":
                return None
        i -= 1
    if i < 0:
        return None
    open_at = i
    k = open_at - 1
    while k >= 0 and masked[k].isspace():
        k -= 1
    end = k + 1
    while k >= 0 and _ident(masked[k]):
        k -= 1
    name = masked[k + 1:end]
    # Count the arguments after pos up to the matching ')'.
    nargs = commas + 1
    depth = 0
    j = pos
    n = len(masked)
    while j < n:
        c = masked[j]
        if c in "([{":
            depth += 1
        elif c in ")]}":
            if depth == 0:
                break
            depth -= 1
        elif c == "," and depth == 0:
            nargs += 1
        elif c == ";" and depth == 0:
            break
        j += 1
    return name, open_at, commas, nargs, j


def split_args(masked, open_at, close_at):
    """The top-level arguments of the call whose '(' is at open_at: [(start, end)]."""
    args = []
    depth = 0
    start = open_at + 1
    for j in range(open_at + 1, close_at):
        c = masked[j]
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif c == "," and depth == 0:
            args.append((start, j))
            start = j + 1
    args.append((start, close_at))
    return args


class Site(object):
    """One memory-order literal in a header."""

    def __init__(self, header, offset, end, order, line, col):
        self.header = header          # Header
        self.offset = offset          # of the literal in the file
        self.end = end
        self.order = order            # 'seq_cst', ...
        self.line = line
        self.col = col
        self.kind = "unknown"         # load store rmw cas fence signal_fence unknown
        self.role = "unknown"         # kind, or cas_success cas_failure cas_single
        self.callee = ""              # the call name it is an argument of ('' when none)
        self.call_open = None
        self.call_line = line         # the line of the call name
        self.partner = None           # CAS success: the failure literal's Site, if any
        self.partner_expr = None      # CAS success: the failure argument's text if no literal
        self.passthrough = None       # unknown: what the callee does with the order, if found

    def op_label(self):
        if self.role in ("load", "store", "fence"):
            return self.role
        if self.role == "signal_fence":
            return "signal fence"
        if self.role == "rmw":
            return "rmw (%s)" % self.callee
        if self.role == "cas_success":
            return "CAS success (%s)" % self.callee
        if self.role == "cas_failure":
            return "CAS failure (%s)" % self.callee
        if self.role == "cas_single":
            return "CAS one order (%s)" % self.callee
        if self.callee:
            return "unknown (argument of %s())" % self.callee
        return "unknown (not a call argument)"


class Header(object):
    def __init__(self, path, rel):
        self.path = path              # absolute
        self.rel = rel                # relative to the repository root
        with open(path, encoding="utf-8", errors="surrogateescape") as f:
            self.text = f.read()
        self.masked = mask_code(self.text)
        self.line_starts = [0] + [m.end() for m in re.finditer("\n", self.text)]
        self.lines = self.text.split("\n")
        self.sites = []               # every order literal, relaxed and consume included

    def line_of(self, offset):
        return bisect.bisect_right(self.line_starts, offset)

    def snippet(self, first_line, last_line, limit=160):
        parts = [self.lines[k - 1].strip() for k in range(first_line, last_line + 1)]
        s = " ".join(p for p in parts if p)
        s = re.sub(r"\s+", " ", s)
        if len(s) > limit:
            s = s[:limit - 3] + "..."
        return s


def classify(header):
    text, masked = header.text, header.masked
    by_call = collections.defaultdict(list)
    for m in ORDER_RE.finditer(masked):
        line = header.line_of(m.start())
        col = m.start() - header.line_starts[line - 1] + 1
        s = Site(header, m.start(), m.end(), m.group(1), line, col)
        call = enclosing_call(masked, m.start())
        if call is not None:
            name, open_at, index, nargs, close_at = call
            s.callee = name
            s.call_open = open_at
            s.call_close = close_at
            s.call_line = header.line_of(open_at)
            s.arg_index = index
            s.nargs = nargs
            op = OPS.get(name)
            if op is not None:
                kind, first = op
                s.kind = kind
                if kind != "cas":
                    s.role = kind
                elif nargs == first + 2 and index == first:
                    s.role = "cas_success"
                elif nargs == first + 2 and index == first + 1:
                    s.role = "cas_failure"
                elif nargs == first + 1 and index == first:
                    s.role = "cas_single"
                else:
                    s.kind = "unknown"
            by_call[open_at].append(s)
        header.sites.append(s)
    # CAS partners: the failure argument of the same call.
    for s in header.sites:
        if s.role != "cas_success":
            continue
        for o in by_call[s.call_open]:
            if o.role == "cas_failure":
                s.partner = o
        if s.partner is None:
            args = split_args(masked, s.call_open, s.call_close)
            if len(args) > s.arg_index + 1:
                a, b = args[s.arg_index + 1]
                s.partner_expr = re.sub(r"\s+", " ", text[a:b].strip())


def find_passthroughs(headers):
    """For an order passed to a function of the library (not an atomic operation), what that
    function does with it: the atomic call that takes the parameter, found by name."""
    defs = {}
    param_re = re.compile(r"std\s*::\s*memory_order\s+(\w+)")
    for h in headers:
        for m in re.finditer(r"\b(\w+)\s*\(", h.masked):
            name = m.group(1)
            if name in OPS:
                continue
            call = None
            open_at = m.end() - 1
            depth = 0
            j = open_at
            while j < len(h.masked):
                c = h.masked[j]
                if c == "(":
                    depth += 1
                elif c == ")":
                    depth -= 1
                    if depth == 0:
                        break
                j += 1
            rest = h.masked[j + 1:j + 200]
            body = re.match(r"\s*(?:const\s*)?(?:noexcept\s*)?(?:->\s*[\w:<>, ]+)?\{", rest)
            if body is None:
                continue
            params = split_args(h.masked, open_at, j)
            names = []
            for a, b in params:
                pm = param_re.search(h.masked[a:b])
                names.append(pm.group(1) if pm else None)
            if not any(names):
                continue
            call = (h, j + 1 + body.end() - 1, names)
            defs.setdefault(name, []).append(call)
    for h in headers:
        for s in h.sites:
            if s.kind != "unknown" or not s.callee or s.callee not in defs:
                continue
            notes = []
            for dh, brace, names in defs[s.callee]:
                if s.arg_index >= len(names) or names[s.arg_index] is None:
                    continue
                pname = names[s.arg_index]
                end = _matching_brace(dh.masked, brace)
                for um in re.finditer(r"\b%s\b" % re.escape(pname), dh.masked[brace:end]):
                    pos = brace + um.start()
                    call = enclosing_call(dh.masked, pos)
                    if call is None or call[0] not in OPS:
                        continue
                    kind, first = OPS[call[0]]
                    line = dh.line_of(pos)
                    what = "%s() at %s:%d" % (call[0], dh.rel, line)
                    if kind == "cas" and call[3] == first + 2 and call[2] == first:
                        fail = [o for o in dh.sites if o.call_open == call[1] and
                                o.role == "cas_failure"]
                        if fail:
                            what = "success order of %s, whose failure order is %s" % (
                                what, fail[0].order)
                            s.passthrough_failure = fail[0]
                        else:
                            what = "success order of " + what
                    notes.append(what)
            if notes:
                s.passthrough = "; ".join(notes)


def _matching_brace(masked, brace):
    depth = 0
    for j in range(brace, len(masked)):
        if masked[j] == "{":
            depth += 1
        elif masked[j] == "}":
            depth -= 1
            if depth == 0:
                return j
    return len(masked)


def implicit_and_variable_orders(header):
    """Atomic calls whose order is not a literal that this tool can weaken: a default argument
    (seq_cst) or an expression. Member calls only (after '.' or '->'), and the free fences."""
    notes = []
    masked = header.masked
    for m in re.finditer(r"\b(\w+)\s*\(", masked):
        name = m.group(1)
        op = OPS.get(name)
        if op is None:
            continue
        k = m.start() - 1
        while k >= 0 and masked[k].isspace():
            k -= 1
        member = masked[k] == "." or (masked[k] == ">" and k > 0 and masked[k - 1] == "-")
        if not member and not name.startswith("atomic_"):
            continue
        open_at = m.end() - 1
        call = None
        depth = 0
        for j in range(open_at, len(masked)):
            c = masked[j]
            if c in "([{":
                depth += 1
            elif c in ")]}":
                depth -= 1
                if depth == 0:
                    call = j
                    break
        if call is None:
            continue
        args = split_args(masked, open_at, call)
        if len(args) == 1 and not masked[args[0][0]:args[0][1]].strip():
            args = []
        kind, first = op
        line = header.line_of(m.start())
        wanted = [first, first + 1] if kind == "cas" else [first]
        if len(args) <= first:
            # A declaration (a wrapper's own signature) has types in it: skip those.
            decl = re.search(r"\b(?:std\s*::\s*)?memory_order\s+\w", masked[open_at:call])
            if decl is None:
                notes.append((line, "%s(): no order argument (default seq_cst)" % name))
            continue
        for idx in wanted:
            if idx >= len(args):
                continue
            a, b = args[idx]
            expr = re.sub(r"\s+", " ", header.text[a:b].strip())
            if not ORDER_RE.search(masked[a:b]) and not re.search(r"\bmemory_order\s+\w", expr):
                notes.append((line, "%s(): order argument %d is `%s` (not a literal)" % (
                    name, idx + 1, expr)))
    return notes


# --------------------------------------------------------------------------------------------
# Mutants

def weakenings(order, role):
    if order == "seq_cst":
        to = {"load": "acquire", "store": "release", "cas_failure": "acquire"}
        return [to.get(role, "acq_rel")]
    if order == "acq_rel":
        if role == "load" or role == "cas_failure":
            return ["acquire"]
        if role == "store":
            return ["release"]
        return ["acquire", "release"]
    return ["relaxed"]


def _stronger_failure(success, failure):
    """True when a CAS failure order is not allowed with that success order (C++14's rule,
    which Relacy's compare_exchange checks)."""
    reads = {"relaxed", "consume", "acquire"}
    allowed = {"relaxed": {"relaxed"}, "release": {"relaxed"},
               "consume": {"relaxed", "consume"}, "acquire": reads, "acq_rel": reads,
               "seq_cst": reads | {"seq_cst"}}
    return failure not in allowed.get(success, reads | {"seq_cst"})


class Mutant(object):
    def __init__(self, site, to):
        self.site = site
        self.to = to
        self.header = site.header
        self.edits = [(site.offset, site.end, to)]
        notes = []
        if site.role == "cas_success":
            p = site.partner
            if p is not None:
                lower = None
                if to in ("relaxed", "release") and p.order != "relaxed":
                    lower = "relaxed"
                elif to in ("acquire", "acq_rel") and p.order == "seq_cst":
                    lower = "acquire"
                if lower is not None:
                    self.edits.append((p.offset, p.end, lower))
                    notes.append("failure order %s -> %s%s, not stronger than success" % (
                        p.order, lower, "" if p.line == site.line else " (line %d)" % p.line))
            elif site.partner_expr and to in ("relaxed", "release"):
                notes.append("failure order `%s` is not a literal: may now be stronger than "
                             "success" % site.partner_expr)
        if site.kind == "unknown" and site.passthrough:
            notes.append("passed as: " + site.passthrough)
            f = getattr(site, "passthrough_failure", None)
            if f is not None and _stronger_failure(to, f.order):
                notes.append("WARNING: that failure order (%s) is now stronger than the "
                             "success order; not adjusted (shared by other callers)" % f.order)
        if site.role == "signal_fence":
            notes.append("a signal fence: Relacy does not model it")
        self.description = "%s: %s -> %s" % (site.op_label(), site.order, to)
        if notes:
            self.description += "; " + "; ".join(notes)
        self.base_id = "%s:%d:%s->%s" % (self.header.rel, site.line, site.order, to)
        self.id = self.base_id

    def source_line(self):
        return self.header.snippet(min(self.site.call_line, self.site.line), self.site.line)

    def mutated_text(self):
        text = self.header.text
        for a, b, to in sorted(self.edits, reverse=True):
            text = text[:a] + "std::memory_order_" + to + text[b:]
        return text


def scan(repo, include_dir, excludes):
    root = os.path.join(repo, include_dir, "async")
    if not os.path.isdir(root):
        raise Fatal("no headers under %s" % root)
    paths = sorted(glob.glob(os.path.join(root, "**", "*.h"), recursive=True))
    excl = set(os.path.normpath(e) for e in excludes if e)
    for e in sorted(excl):
        if not os.path.exists(os.path.join(repo, e)):
            log("warning: excluded header %s does not exist" % e)
    headers = []
    for p in paths:
        rel = os.path.relpath(p, repo)
        if os.path.normpath(rel) in excl:
            continue
        h = Header(p, rel)
        classify(h)
        headers.append(h)
    find_passthroughs(headers)
    mutants = []
    seen = collections.Counter()
    for h in headers:
        for s in h.sites:
            if s.order not in WEAKENABLE:
                continue
            for to in weakenings(s.order, s.role):
                m = Mutant(s, to)
                seen[m.base_id] += 1
                if seen[m.base_id] > 1:
                    m.id = "%s#%d" % (m.base_id, seen[m.base_id])
                mutants.append(m)
    return headers, mutants


# --------------------------------------------------------------------------------------------
# Building and running

_procs = set()
_procs_lock = threading.Lock()
_stop = threading.Event()


def run_process(args, cwd, log_path, timeout=None):
    """Runs args with output to log_path. Returns (returncode, seconds, timed_out)."""
    start = time.monotonic()
    with open(log_path, "wb") as out:
        try:
            p = subprocess.Popen(args, cwd=cwd, stdout=out, stderr=subprocess.STDOUT,
                                 stdin=subprocess.DEVNULL, start_new_session=True)
        except OSError as e:
            out.write(("cannot run %s: %s\n" % (args[0], e)).encode())
            return 127, 0.0, False
        with _procs_lock:
            _procs.add(p)
        timed_out = False
        try:
            rc = p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            _kill(p)
            rc = p.wait()
        finally:
            with _procs_lock:
                _procs.discard(p)
    return rc, time.monotonic() - start, timed_out


def _kill(p):
    try:
        os.killpg(p.pid, signal.SIGKILL)
    except OSError:
        pass


def kill_all():
    with _procs_lock:
        for p in list(_procs):
            _kill(p)


def tail_lines(path, count=8):
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - 16384))
            data = f.read().decode("utf-8", "replace")
    except OSError:
        return []
    lines = [l.rstrip() for l in data.split("\n") if l.strip()]
    return lines[-count:]


def failure_summary(path, rc, timed_out, timeout):
    """(error kind, the last ~5 lines that say FAILED or name a Relacy error kind)."""
    hits = collections.deque(maxlen=5)
    kind = None
    first_kind = None
    try:
        with open(path, "rb") as f:
            for raw in f:
                line = raw.decode("utf-8", "replace").rstrip()
                km = KIND_RE.search(line)
                if "FAILED" in line or km:
                    hits.append(line[:240])
                    fm = FAILED_KIND_RE.search(line)
                    if fm:
                        kind = fm.group(1).strip()
                    if km and first_kind is None:
                        first_kind = km.group(0)
    except OSError:
        pass
    if timed_out:
        kind = "TIMEOUT (%ds)" % timeout
    elif kind is None:
        kind = first_kind
    if kind == "RELACY INTERNAL ASSERT FAILED":
        kind += " (an invalid order pair?)"
    if kind is None:
        if rc < 0:
            try:
                kind = "signal " + signal.Signals(-rc).name
            except ValueError:
                kind = "signal %d" % -rc
        else:
            kind = "exit %d" % rc
    lines = []
    for l in hits:
        if l not in lines:
            lines.append(l)
    if not lines:
        lines = [l[:240] for l in tail_lines(path, 5)]
    return kind, lines


_DEP_FLAGS_ARG = ("-MF", "-MT", "-MQ")
_DEP_FLAGS = ("-M", "-MM", "-MD", "-MMD", "-MP", "-MG")
_INCLUDE_FLAGS = ("-isystem", "-iquote", "-idirafter", "-I")
_LINK_RELEVANT = ("-fsanitize", "-fno-sanitize", "--coverage", "-fprofile-", "-flto", "-m32",
                  "-m64", "-static", "-stdlib=", "-pthread", "-fuse-ld=", "-rtlib=",
                  "-fopenmp")


def parse_make_deps(path):
    with open(path, encoding="utf-8", errors="surrogateescape") as f:
        data = f.read()
    data = data.replace("\\\r\n", " ").replace("\\\n", " ")
    deps = set()
    for rule in data.split("\n"):
        m = re.search(r":(\s|$)", rule)
        if m is None:
            continue
        body = rule[m.end():]
        tokens = re.findall(r"(?:\\.|[^\s\\])+", body)
        for t in tokens:
            t = re.sub(r"\\(.)", r"\1", t).replace("$$", "$")
            deps.add(t)
    return deps


def ninja_unescape(value):
    return re.sub(r"\$([ :$])", r"\1", value)


def ninja_split(s):
    """Splits a ninja path list on unescaped spaces."""
    out, cur, i = [], [], 0
    while i < len(s):
        c = s[i]
        if c == "$" and i + 1 < len(s):
            cur.append(s[i + 1] if s[i + 1] in " :$" else s[i:i + 2])
            i += 2
            continue
        if c == " ":
            if cur:
                out.append("".join(cur))
                cur = []
        else:
            cur.append(c)
        i += 1
    if cur:
        out.append("".join(cur))
    return out


def parse_ninja_links(build_dir):
    """Executable link statements of build.ninja: {explicit input: (inputs, variables)}."""
    path = os.path.join(build_dir, "build.ninja")
    if not os.path.exists(path):
        return {}
    with open(path, encoding="utf-8", errors="surrogateescape") as f:
        raw = f.read().split("\n")
    lines = []
    cur = None
    for l in raw:
        part = l if cur is None else l.lstrip()
        dollars = len(part) - len(part.rstrip("$"))
        if dollars % 2 == 1:
            cur = (cur or "") + part[:-1]
            continue
        lines.append((cur or "") + part)
        cur = None
    links = {}
    i = 0
    while i < len(lines):
        l = lines[i]
        i += 1
        if not l.startswith("build "):
            continue
        body = l[len("build "):]
        m = re.search(r"(?<!\$):", body)
        if m is None:
            continue
        rest = ninja_split(body[m.end():].strip())
        if not rest or "EXECUTABLE_LINKER" not in rest[0]:
            continue
        inputs = []
        for t in rest[1:]:
            if t in ("|", "||", "|@"):
                break
            inputs.append(t)
        variables = {}
        while i < len(lines) and lines[i].startswith((" ", "\t")):
            vm = re.match(r"\s+(\w+)\s*=\s?(.*)$", lines[i])
            if vm:
                variables[vm.group(1)] = ninja_unescape(vm.group(2))
            i += 1
        for inp in inputs:
            links[os.path.normpath(inp)] = (inputs, variables)
    return links


class Source(object):
    """One Relacy test source and how to build it."""

    def __init__(self, path, entry, repo, include_root, links):
        self.path = path
        self.stem = os.path.splitext(os.path.basename(path))[0]
        self.name = "relacy_" + self.stem
        self.directory = entry["directory"]
        args = entry.get("arguments")
        if args is None:
            args = shlex.split(entry["command"])
        self.args = list(args)
        self.compiler = self.args[0]
        self.include_root = include_root
        self.deps = set()
        self.baseline_seconds = 0.0
        self.orig_object = None
        a = self.args
        for k, t in enumerate(a):
            if t == "-o" and k + 1 < len(a):
                self.orig_object = a[k + 1]
            elif t.startswith("-o") and len(t) > 2:
                self.orig_object = t[2:]
        if self.orig_object is None and entry.get("output"):
            self.orig_object = entry["output"]
        self.link = None
        if self.orig_object is not None:
            self.link = links.get(os.path.normpath(self.orig_object))
        if not self._include_index():
            raise Fatal("%s: its compile command has no -I/-isystem for %s" % (
                os.path.relpath(path, repo), include_root))

    def _same(self, p):
        return os.path.realpath(os.path.join(self.directory, p)) == os.path.realpath(
            self.include_root)

    def _include_index(self):
        return self.compile_args(self.include_root, "/dev/null/obj", "/dev/null/dep")[1] > 0

    def compile_args(self, include_to, obj, dep):
        out = []
        found = 0
        a = self.args
        k = 0
        while k < len(a):
            t = a[k]
            if t in ("-o",) + _DEP_FLAGS_ARG:
                k += 2
                continue
            if t in _DEP_FLAGS or (t.startswith(_DEP_FLAGS_ARG) and len(t) > 3) or (
                    t.startswith("-o") and len(t) > 2):
                k += 1
                continue
            flag = next((f for f in _INCLUDE_FLAGS if t.startswith(f)), None)
            if flag is not None:
                if t == flag and k + 1 < len(a) and self._same(a[k + 1]):
                    out += [flag, include_to]
                    found += 1
                    k += 2
                    continue
                if t != flag and self._same(t[len(flag):]):
                    out.append(flag + include_to)
                    found += 1
                    k += 1
                    continue
            out.append(t)
            k += 1
        if "-c" not in out:
            out.append("-c")
        out += ["-MD", "-MF", dep, "-o", obj]
        return out, found

    def link_args(self, obj, exe):
        if self.link is not None:
            inputs, v = self.link
            others = [os.path.join(self.directory, i) for i in inputs
                      if os.path.normpath(i) != os.path.normpath(self.orig_object)]
            args = [self.compiler] + shlex.split(v.get("FLAGS", "")) + shlex.split(
                v.get("LINK_FLAGS", "")) + [obj] + others + ["-o", exe] + shlex.split(
                v.get("LINK_PATH", "")) + shlex.split(v.get("LINK_LIBRARIES", ""))
        else:
            flags = [t for t in self.args[1:] if t.startswith(_LINK_RELEVANT)]
            args = [self.compiler] + flags + [obj, "-o", exe]
        if "-pthread" not in args:
            args.append("-pthread")
        return args

    def build(self, include_to, workdir, expect_header=None):
        """Compiles and links into workdir. Returns (exe, deps, None) or (None, None, error)."""
        obj = os.path.join(workdir, self.name + ".o")
        dep = os.path.join(workdir, self.name + ".d")
        exe = os.path.join(workdir, self.name)
        args, found = self.compile_args(include_to, obj, dep)
        if found == 0:
            return None, None, "no include path to replace"
        clog = os.path.join(workdir, self.name + ".compile.log")
        rc, _, _ = run_process(args, self.directory, clog)
        if rc != 0:
            return None, None, "compile failed (%s):\n%s" % (
                " ".join(shlex.quote(a) for a in args), "\n".join(tail_lines(clog, 15)))
        deps = set(os.path.realpath(os.path.join(self.directory, d))
                   for d in parse_make_deps(dep))
        if expect_header is not None and os.path.realpath(expect_header) not in deps:
            return None, None, "the mutated copy %s is not among the compile's dependencies" % (
                expect_header)
        llog = os.path.join(workdir, self.name + ".link.log")
        largs = self.link_args(obj, exe)
        rc, _, _ = run_process(largs, self.directory, llog)
        if rc != 0:
            return None, None, "link failed (%s):\n%s" % (
                " ".join(shlex.quote(a) for a in largs), "\n".join(tail_lines(llog, 15)))
        try:
            os.remove(obj)
        except OSError:
            pass
        return exe, deps, None


class Context(object):
    pass


def load_sources(ctx):
    ccj = os.path.join(ctx.build_dir, "compile_commands.json")
    if not os.path.exists(ccj):
        raise Fatal("%s not found (configure the Relacy build with "
                    "CMAKE_EXPORT_COMPILE_COMMANDS=ON, or pass --build-dir)" % ccj)
    with open(ccj, encoding="utf-8") as f:
        db = json.load(f)
    entries = {}
    for e in db:
        p = os.path.realpath(os.path.join(e["directory"], e["file"]))
        command = e.get("command") or " ".join(e.get("arguments", []))
        if "/mutants/" in command:
            continue  # a ctest mutant's build of the same source (tests/relacy/CMakeLists.txt)
        entries.setdefault(p, e)
    links = parse_ninja_links(ctx.build_dir)
    sources = []
    for p in sorted(glob.glob(os.path.join(ctx.repo, ctx.tests))):
        rp = os.path.realpath(p)
        if rp not in entries:
            log("warning: %s has no compile_commands.json entry: skipped" %
                os.path.relpath(p, ctx.repo))
            continue
        s = Source(rp, entries[rp], ctx.repo, ctx.include_root, links)
        if s.link is None and links:
            log("note: %s: no link statement in build.ninja for %s; linking with "
                "<compiler> <object> -o <exe> -pthread" % (s.name, s.orig_object))
        sources.append(s)
    if not sources:
        raise Fatal("no Relacy test sources (%s) in %s" % (ctx.tests, ccj))
    return sources


def baseline(ctx):
    work = os.path.join(ctx.tmp_root, "baseline")
    os.makedirs(work)
    for s in ctx.sources:
        log("[baseline] building %s" % s.name)
        t0 = time.monotonic()
        exe, deps, err = s.build(ctx.include_root, work)
        if err:
            raise Fatal("baseline %s: %s" % (s.name, err))
        s.deps = deps
        log("[baseline] running %s (built in %.1fs)" % (s.name, time.monotonic() - t0))
        out = os.path.join(work, s.name + ".log")
        rc, secs, timed_out = run_process([exe] + ctx.test_args, work, out, ctx.timeout)
        s.baseline_seconds = secs
        if rc != 0 or timed_out:
            kind, lines = failure_summary(out, rc, timed_out, ctx.timeout)
            raise Fatal("baseline %s fails unmutated (%s):\n  %s\n%s" % (
                s.name, kind, "\n  ".join(lines or tail_lines(out)),
                "(log: %s)" % out if ctx.keep else "(--keep keeps its log)"))
        log("[baseline] %s passed in %.1fs" % (s.name, secs))
    if not ctx.keep:
        shutil.rmtree(work, ignore_errors=True)


def run_mutant(ctx, m):
    r = {"id": m.id, "mutant": m, "status": None, "binary": "", "kind": "", "lines": [],
         "ran": [], "error": "", "seconds": 0.0}
    t0 = time.monotonic()
    header_real = os.path.realpath(m.header.path)
    affected = [s for s in ctx.sources if header_real in s.deps]
    if not affected:
        r["status"] = "not reached"
        return r
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", m.id)[-80:]
    work = tempfile.mkdtemp(prefix=safe + ".", dir=ctx.tmp_root)
    try:
        inc = os.path.join(work, "include")
        shutil.copytree(ctx.include_root, inc, symlinks=True)
        rel = os.path.relpath(m.header.path, ctx.include_root)
        target = os.path.join(inc, rel)
        with open(target, "w", encoding="utf-8", errors="surrogateescape") as f:
            f.write(m.mutated_text())
        r["status"] = "survived"
        for s in sorted(affected, key=lambda x: x.baseline_seconds):
            if _stop.is_set():
                r["status"] = "interrupted"
                break
            exe, _, err = s.build(inc, work, expect_header=target)
            if err:
                r["status"] = "error"
                r["binary"] = s.name
                r["error"] = err
                break
            out = os.path.join(work, s.name + ".log")
            rc, secs, timed_out = run_process([exe] + ctx.test_args, work, out, ctx.timeout)
            if _stop.is_set():
                r["status"] = "interrupted"
                break
            r["ran"].append(s.name)
            if rc != 0 or timed_out:
                kind, lines = failure_summary(out, rc, timed_out, ctx.timeout)
                if r["status"] != "caught":
                    r["status"] = "caught"
                    r["binary"] = s.name
                    r["kind"] = kind
                    r["lines"] = lines
                else:
                    r["binary"] += ", " + s.name
                if not ctx.all_binaries:
                    break
            if not ctx.keep:
                try:
                    os.remove(exe)
                except OSError:
                    pass
    finally:
        if not ctx.keep:
            shutil.rmtree(work, ignore_errors=True)
        r["seconds"] = time.monotonic() - t0
    return r


# --------------------------------------------------------------------------------------------
# Output

def md_cell(s):
    return s.replace("|", "\\|").replace("\n", " ")


def md_code(s):
    s = md_cell(s)
    return "`` %s ``" % s if "`" in s else "`%s`" % s


def list_report(headers, mutants, excludes):
    out = ["# Memory-order mutants", ""]
    out.append("%d mutants in %d headers (excluded: %s)." % (
        len(mutants), len(headers), ", ".join(excludes) if excludes else "none"))
    out += ["", "| id | op | mutation | source |", "|---|---|---|---|"]
    for m in mutants:
        out.append("| %s | %s | %s | %s |" % (md_code(m.id), md_cell(m.site.op_label()),
                                             md_cell(m.description), md_code(m.source_line())))
    out += ["", "## Mutants per header", "", "| header | order literals | weakenable | mutants |",
            "|---|---|---|---|"]
    per = collections.Counter(m.header.rel for m in mutants)
    for h in headers:
        weak = sum(1 for s in h.sites if s.order in WEAKENABLE)
        if h.sites:
            out.append("| %s | %d | %d | %d |" % (h.rel, len(h.sites), weak, per[h.rel]))
    out.append("| **total** | %d | %d | %d |" % (
        sum(len(h.sites) for h in headers),
        sum(1 for h in headers for s in h.sites if s.order in WEAKENABLE), len(mutants)))
    out += notes_section(headers, mutants)
    return "\n".join(out) + "\n"


def notes_section(headers, mutants):
    out = []
    odd = [m for m in mutants if m.site.kind == "unknown" or m.site.role == "signal_fence" or
           "not a literal" in m.description or "WARNING" in m.description]
    if odd:
        out += ["", "## Mutants the scan could not classify fully", ""]
        for m in odd:
            out.append("- %s: %s" % (md_code(m.id), m.description))
    rest = []
    for h in headers:
        for line, what in implicit_and_variable_orders(h):
            rest.append("- %s:%d: %s" % (h.rel, line, what))
    if rest:
        out += ["", "## Atomic calls not mutated (no literal order to weaken)", "",
                "Calls named like atomic operations (member calls and the atomic_* free "
                "functions), so a method of another type with the same name may show up.",
                ""] + rest
    return out


def score_report(ctx, results, interrupted):
    total = len(results)
    caught = [r for r in results if r["status"] == "caught"]
    survived = [r for r in results if r["status"] in ("survived", "not reached")]
    errors = [r for r in results if r["status"] in ("error", "interrupted", None)]
    reached = sum(1 for r in results if r["status"] != "not reached")
    pct = 100.0 * len(caught) / total if total else 0.0
    out = ["# Memory-order mutation score", ""]
    if interrupted:
        out += ["**Interrupted**: only the mutants below finished.", ""]
    out.append("**Score: %d / %d caught (%.1f%%)**" % (len(caught), total, pct))
    out += ["",
            "- survived: %d (reached by a test: %d, not reached: %d)" % (
                len(survived), sum(1 for r in survived if r["status"] == "survived"),
                sum(1 for r in survived if r["status"] == "not reached")),
            "- errors: %d (counted as not caught)" % len(errors),
            "- mutants reached by at least one test: %d" % reached,
            "- tests: %s" % ", ".join("%s (%.1fs)" % (s.name, s.baseline_seconds)
                                      for s in ctx.sources),
            "- build dir: %s; test args: %s; timeout %ds" % (
                ctx.build_dir, " ".join(ctx.test_args) or "(none)", ctx.timeout),
            "- excluded headers: %s" % (", ".join(ctx.excludes) or "none")]
    if ctx.only:
        out.append("- only ids matching: `%s`" % ctx.only)
    out += ["", "## Survivors (%d)" % len(survived), ""]
    if survived:
        out += ["| id | op | status | source |", "|---|---|---|---|"]
        for r in survived:
            m = r["mutant"]
            status = r["status"] if r["status"] == "not reached" else \
                "survived (%s)" % ", ".join(r["ran"])
            out.append("| %s | %s | %s | %s |" % (md_code(m.id), md_cell(m.site.op_label()),
                                                  md_cell(status), md_code(m.source_line())))
    out += ["", "## Caught (%d)" % len(caught), ""]
    if caught:
        out += ["| id | caught by | error kind |", "|---|---|---|"]
        for r in caught:
            out.append("| %s | %s | %s |" % (md_code(r["id"]), md_cell(r["binary"]),
                                            md_cell(r["kind"])))
    if errors:
        out += ["", "## Errors (%d)" % len(errors), ""]
        for r in errors:
            out += ["- %s: %s %s" % (md_code(r["id"]), r["status"], r["binary"]), "",
                    "```", r["error"] or "(no message)", "```"]
    cas_notes = [r for r in results if ";" in r["mutant"].description]
    if cas_notes:
        out += ["", "## Mutants that change more than the one order, or carry a note", ""]
        for r in cas_notes:
            out.append("- %s: %s" % (md_code(r["id"]), r["mutant"].description))
    if caught:
        out += ["", "## What caught them", ""]
        for r in caught:
            out += ["%s (%s, %s):" % (md_code(r["id"]), r["binary"], r["kind"]), "", "```"]
            out += r["lines"] or ["(no output)"]
            out += ["```", ""]
    return "\n".join(out) + "\n"


# --------------------------------------------------------------------------------------------

def parse_args(argv):
    here = os.path.dirname(os.path.abspath(__file__))
    p = argparse.ArgumentParser(
        description="Weakens the library's memory orders one at a time and runs the Relacy "
                    "tests against each mutant.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="Mutant ids: <header>:<line>:<from>-><to>[#n]. Exit status: 0 done, 1 score "
               "below --fail-under, 2 an error (the baseline fails, no build dir...).")
    p.add_argument("--repo", default=os.path.normpath(os.path.join(here, "..", "..")),
                   help="repository root (default: two levels above this script)")
    p.add_argument("--build-dir", default=DEFAULT_BUILD_DIR,
                   help="CMake build dir with compile_commands.json (default %(default)s, "
                        "relative to --repo)")
    p.add_argument("--tests", default=DEFAULT_TESTS,
                   help="test sources, a glob relative to --repo (default %(default)s)")
    p.add_argument("--include-dir", default=DEFAULT_INCLUDE_DIR,
                   help="the include root that the mutants replace (default %(default)s)")
    p.add_argument("--exclude", action="append", default=None, metavar="HEADER",
                   help="header to leave out, relative to --repo; repeatable; replaces the "
                        "default list (%s); --exclude= excludes nothing" %
                        ", ".join(DEFAULT_EXCLUDES))
    p.add_argument("--only", metavar="REGEX", help="only mutants whose id matches (re.search)")
    p.add_argument("--list", action="store_true", help="list the mutants; build nothing")
    p.add_argument("-j", "--jobs", type=int, default=1,
                   help="mutants built and run at once (default %(default)s)")
    p.add_argument("--timeout", type=int, default=DEFAULT_TIMEOUT,
                   help="seconds per test binary run (default %(default)s)")
    p.add_argument("--test-args", default="",
                   help="arguments for every test binary (one string, shell-split)")
    p.add_argument("--all-binaries", action="store_true",
                   help="run every affected binary even after one caught the mutant")
    p.add_argument("--report", metavar="FILE", help="also write the Markdown report here")
    p.add_argument("--keep", action="store_true", help="keep the temporary directories")
    p.add_argument("--tmp-dir", default=None, help="where the temporary directories go")
    p.add_argument("--fail-under", type=float, default=None, metavar="PCT",
                   help="exit 1 when the score is below PCT percent")
    return p.parse_args(argv)


def main(argv=None):
    a = parse_args(argv)
    ctx = Context()
    ctx.repo = os.path.realpath(a.repo)
    ctx.excludes = [e for e in (DEFAULT_EXCLUDES if a.exclude is None else a.exclude) if e]
    ctx.only = a.only
    ctx.include_root = os.path.realpath(os.path.join(ctx.repo, a.include_dir))
    headers, mutants = scan(ctx.repo, a.include_dir, ctx.excludes)
    if a.only:
        rx = re.compile(a.only)
        mutants = [m for m in mutants if rx.search(m.id)]
    if a.list:
        text = list_report(headers, mutants, ctx.excludes)
        sys.stdout.write(text)
        if a.report:
            with open(a.report, "w", encoding="utf-8") as f:
                f.write(text)
        return 0
    if not mutants:
        log("no mutants")
        return 2
    ctx.build_dir = os.path.realpath(os.path.join(ctx.repo, a.build_dir))
    ctx.tests = a.tests
    ctx.timeout = a.timeout
    ctx.test_args = shlex.split(a.test_args)
    ctx.keep = a.keep
    ctx.all_binaries = a.all_binaries
    ctx.sources = load_sources(ctx)
    ctx.tmp_root = tempfile.mkdtemp(prefix="mutate_orders.", dir=a.tmp_dir)
    if a.keep:
        log("temporary directories under %s" % ctx.tmp_root)
    results = {}
    interrupted = False
    try:
        baseline(ctx)
        log("%d mutants, %d test sources, -j%d" % (len(mutants), len(ctx.sources), a.jobs))
        start = time.monotonic()
        done = 0
        with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, a.jobs)) as pool:
            futures = {pool.submit(run_mutant, ctx, m): m for m in mutants}
            try:
                for f in concurrent.futures.as_completed(futures):
                    m = futures[f]
                    try:
                        r = f.result()
                    except Exception as e:  # noqa: a bug here should not lose the others
                        r = {"id": m.id, "mutant": m, "status": "error", "binary": "",
                             "kind": "", "lines": [], "ran": [], "error": repr(e),
                             "seconds": 0.0}
                    results[m.id] = r
                    done += 1
                    el = time.monotonic() - start
                    eta = el / done * (len(mutants) - done)
                    what = r["status"].upper()
                    if r["status"] == "caught":
                        what += " by %s (%s)" % (r["binary"], r["kind"])
                    elif r["status"] == "survived":
                        what += " (%s)" % ", ".join(r["ran"])
                    elif r["status"] == "error":
                        what += ": " + (r["error"].split("\n")[0])
                    log("[%d/%d] %s: %s [%.0fs; elapsed %.0fs, eta %.0fs]" % (
                        done, len(mutants), m.id, what, r["seconds"], el, eta))
            except KeyboardInterrupt:
                interrupted = True
                _stop.set()
                log("interrupted: stopping the running builds and tests")
                kill_all()
                pool.shutdown(wait=True, cancel_futures=True)
    except Fatal:
        kill_all()
        raise
    finally:
        if not a.keep:
            shutil.rmtree(ctx.tmp_root, ignore_errors=True)
    ordered = [results[m.id] for m in mutants if m.id in results and
               results[m.id]["status"] != "interrupted"]
    text = score_report(ctx, ordered, interrupted)
    sys.stdout.write(text)
    if a.report:
        with open(a.report, "w", encoding="utf-8") as f:
            f.write(text)
    caught = sum(1 for r in ordered if r["status"] == "caught")
    if interrupted:
        return 130
    if a.fail_under is not None and ordered and 100.0 * caught / len(ordered) < a.fail_under:
        return 1
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Fatal as e:
        log("error: %s" % e)
        sys.exit(2)
    except KeyboardInterrupt:
        kill_all()
        sys.exit(130)
