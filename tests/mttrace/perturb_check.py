#!/usr/bin/env python3
"""Description: `mt-trace perturb` rewrites a workload less regularly and the
replay still runs it correctly.

A synth trace of a small decoder (perturb-small.conf, 4 iterations) is
perturbed each way (--jitter, --eval-every, --branch-every, all three) and:
  - the output is a well-formed workload: region ids from 1 in allocation
    order, every span inside a live region, every FREE of a live region,
    ITER numbered from 0, time never going back, no pager records;
  - the counts add up: launches out = in - skipped + evaluation launches (as
    printed, and as `mt-trace summary` counts them); allocations - frees is
    the input's (an evaluation pass frees what it allocates);
  - --jitter keeps every launch within +-F of its duration, changes the
    total, and the same seed writes the same bytes (another seed does not);
  - `mt-trace replay` runs every output with the demand pager and with the
    correlation predictor (a misprediction may cost time, never
    correctness: replay exits 0 and reports a percent of ideal in (0, 100]).
Bad input exits 2 with a message: no perturbation, out-of-range values, a
missing file, a truncated trace, --jitter on a recorded trace.

Usage: perturb_check.py MT_TRACE CONF WORKDIR
"""
import json
import os
import re
import struct
import subprocess
import sys

mt, conf, work = sys.argv[1:4]
os.makedirs(work, exist_ok=True)
fails = []


def check(cond, what):
    print(("ok    " if cond else "FAIL  ") + what)
    if not cond:
        fails.append(what)


def run(*args):
    return subprocess.run([mt, *args], capture_output=True, text=True)


def parse(path):
    """Records of a trace: (type, flags, t, body bytes)."""
    data = open(path, "rb").read()
    hb, clock = struct.unpack_from("<II", data, 12)
    off, out = hb, []
    while off + 16 <= len(data):
        typ, fl, _th, size, t = struct.unpack_from("<BBHIQ", data, off)
        out.append((typ, fl, t, data[off + 16:off + size]))
        off += size
    return clock, out


def walk(path):
    """Checks the workload invariants; returns launch durations in order."""
    _clock, recs = parse(path)
    live, next_id, last_t, it, durs, bad = set(), 1, 0, 0, [], []
    for typ, _fl, t, b in recs:
        if t < last_t:
            bad.append("time goes back at %d" % t)
        last_t = max(last_t, t)
        if typ == 1:
            reg = struct.unpack_from("<Q", b)[0]
            if reg != next_id:
                bad.append("region %d allocated, %d expected" % (reg, next_id))
            next_id, _ = reg + 1, live.add(reg)
        elif typ == 2:
            reg = struct.unpack_from("<Q", b)[0]
            if reg not in live:
                bad.append("free of region %d, not live" % reg)
            live.discard(reg)
        elif typ == 3:
            _lid, _fn, dur, _st, nf = struct.unpack_from("<QQQII", b)
            durs.append(dur)
            for i in range(nf):
                reg = struct.unpack_from("<Q", b, 32 + 24 * i)[0]
                if reg not in live:
                    bad.append("launch uses region %d, not live" % reg)
        elif typ == 9:
            n = struct.unpack_from("<Q", b)[0]
            if n != it:
                bad.append("ITER %d, %d expected" % (n, it))
            it += 1
        elif typ in (5, 6, 7):
            bad.append("a pager record (type %d) was kept" % typ)
    return durs, it, bad


def summary(path):
    s = run("summary", path, "--json")
    return json.loads(s.stdout)["total"] if s.returncode == 0 else {}


base = os.path.join(work, "base.trace")
r = run("synth", "--model", conf, "--iterations", "4", "-o", base)
check(r.returncode == 0, "synth writes the base trace: " + r.stderr.strip())
base_durs, base_iters, bad = walk(base)
t0 = summary(base)
check(not bad and base_iters == 4, "the base trace is well formed")

cases = {
    "jitter": ["--jitter", "0.25"],
    "eval": ["--eval-every", "2"],
    "branch": ["--branch-every", "2"],
    "all": ["--jitter", "0.25", "--eval-every", "3", "--branch-every", "2", "--seed", "7"],
}
for name, opts in cases.items():
    out = os.path.join(work, name + ".trace")
    r = run("perturb", base, "-o", out, *opts)
    check(r.returncode == 0, "%s: perturb exits 0: %s" % (name, r.stderr.strip()))
    if r.returncode != 0:
        continue
    m = re.search(r"(\d+) iterations, (\d+) launches in, (\d+) out \((\d+) skipped by branches, (\d+) in "
                  r"evaluation passes\)", r.stdout)
    check(m is not None, "%s: perturb prints its counts: %s" % (name, r.stdout.strip()))
    iters, lin, lout, skipped, ev = (int(x) for x in m.groups())
    durs, it, bad = walk(out)
    check(not bad, "%s: a well-formed workload %s" % (name, bad[:3]))
    check(it == base_iters == iters, "%s: %d iterations" % (name, it))
    check(lin == len(base_durs) and lout == lin - skipped + ev == len(durs),
          "%s: launches %d in, %d out = in - %d skipped + %d evaluation" % (name, lin, lout, skipped, ev))
    check((skipped > 0) == ("--branch-every" in opts) and (ev > 0) == ("--eval-every" in opts),
          "%s: only what was asked for changed" % name)
    t = summary(out)
    check(t.get("launches") == lout, "%s: mt-trace summary counts %s launches" % (name, t.get("launches")))
    check(t.get("allocations", 0) - t.get("frees", 0) == t0["allocations"] - t0["frees"],
          "%s: what the evaluation passes allocate, they free" % name)
    if name == "jitter":
        within = all(abs(d - b) <= 0.25 * b + 1 for d, b in zip(durs, base_durs))
        check(within and durs != base_durs, "jitter: every launch within +-25%, and some changed")
        again = os.path.join(work, "jitter2.trace")
        run("perturb", base, "-o", again, *opts)
        check(open(again, "rb").read() == open(out, "rb").read(), "jitter: the same seed writes the same file")
        run("perturb", base, "-o", again, *opts, "--seed", "2")
        check(open(again, "rb").read() != open(out, "rb").read(), "jitter: another seed, another file")
    for pred in ("none", "correlation"):
        rp = run("replay", out, "--gpu-mem", "192M", "--host-mem", "4G", "--predictor", pred, "--json")
        ok = rp.returncode == 0
        pct = json.loads(rp.stdout)["pct_of_ideal"] if ok else None
        check(ok and 0 < pct <= 100, "%s: replay with --predictor %s runs it: %s%% of ideal %s"
              % (name, pred, pct, rp.stderr.strip()[-200:]))

# bad input
trunc = os.path.join(work, "truncated.trace")
data = open(base, "rb").read()
open(trunc, "wb").write(data[:len(data) - 13])
recorded = os.path.join(work, "recorded.trace")
open(recorded, "wb").write(data[:16] + struct.pack("<I", 1) + data[20:])  # clock: CLOCK_MONOTONIC
out = os.path.join(work, "bad.trace")
for args, pattern in [
    ([base, "-o", out], "nothing to do"),
    ([base, "-o", out, "--jitter", "1.5"], "--jitter '1.5'"),
    ([base, "-o", out, "--jitter", "x"], "--jitter 'x'"),
    ([base, "-o", out, "--eval-every", "0"], "--eval-every '0'"),
    ([base, "-o", out, "--branch-every", "-3"], "--branch-every '-3'"),
    ([base, "--jitter", "0.1"], "-o OUT is missing"),
    ([os.path.join(work, "missing.trace"), "-o", out, "--jitter", "0.1"], "missing.trace"),
    ([trunc, "-o", out, "--jitter", "0.1"], "truncated.trace: byte"),
    ([recorded, "-o", out, "--jitter", "0.1"], "needs launch durations"),
    ([base, "-o", out, "--bogus", "1"], "unexpected argument '--bogus'"),
]:
    r = run("perturb", *args)
    check(r.returncode == 2 and pattern in r.stderr,
          "perturb %s: exit 2 naming %r (got %d: %s)" % (" ".join(args[1:]), pattern, r.returncode, r.stderr.strip()))
check(not os.path.exists(out), "a failed perturb leaves no output behind")

print("perturb_check: %s" % ("FAIL: %d" % len(fails) if fails else "all passed"))
sys.exit(1 if fails else 0)
