#!/usr/bin/env python3
"""Our FP32 AdamW step against DeepSpeed's DeepSpeedCPUAdam, in alternating
rounds, so that a shared machine's load swings hit both sides alike.

Each round runs, for each thread count, `optim_bench --codecs none
--no-torch --no-deepspeed --json` (our step over N FP32 parameters) and
`optim_deepspeed.py N THREADS REPS` (DeepSpeedCPUAdam, FP32 state, AdamW
mode, the same N as 100 tensors) back to back, flipping which goes first
every round. Each side's rate is its median of REPS steps; the round's
ratio is ours / DeepSpeed's. Prints every round and, per thread count,
the median of each side and of the ratios (the number to quote: a ratio
from one round is measured under one load).

  optim_vs_deepspeed.py --bench build/tools/bench/optim_bench \\
      --ds-python DSVENV/bin/python [--params 100000000] [--threads 1,2] \\
      [--rounds 5] [--reps 5] [--json]

DSVENV: `python3 -m venv --system-site-packages DSVENV` and
`DSVENV/bin/pip install deepspeed` (its cpu_adam op builds on first use).
A side that fails is an error that names it, not a silent gap.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def ours(bench, n, threads, reps):
    out = subprocess.run([bench, "--params", str(n), "--threads", str(threads), "--reps", str(reps),
                          "--codecs", "none", "--no-torch", "--no-deepspeed", "--json"],
                         capture_output=True, text=True, check=False)
    if out.returncode != 0:
        sys.exit("optim_vs_deepspeed: %s failed (%d): %s" % (bench, out.returncode, out.stderr.strip()[-400:]))
    try:
        doc = json.loads(out.stdout)
        runs = doc["runs"] if isinstance(doc, dict) else doc
        return float(runs[0]["none"]["gparams_per_s"])
    except (ValueError, KeyError, IndexError, TypeError) as e:
        sys.exit("optim_vs_deepspeed: cannot read %s's JSON (%s): %s" % (bench, e, out.stdout[:400]))


def deepspeed(py, n, threads, reps):
    out = subprocess.run([py, os.path.join(HERE, "optim_deepspeed.py"), str(n), str(threads), str(reps)],
                         capture_output=True, text=True, check=False)
    try:
        doc = json.loads(out.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        sys.exit("optim_vs_deepspeed: %s printed no JSON (%d): %s" % (py, out.returncode, out.stderr.strip()[-400:]))
    rate = doc.get("deepspeed_gparams_per_s")
    if rate is None:
        sys.exit("optim_vs_deepspeed: DeepSpeedCPUAdam did not run: %s" % doc.get("reason", "?"))
    return float(rate), doc.get("deepspeed_version")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bench", required=True, help="path to optim_bench")
    ap.add_argument("--ds-python", required=True, help="a python that can import deepspeed")
    ap.add_argument("--params", type=int, default=100_000_000)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    try:
        threads = [int(t) for t in a.threads.split(",")]
    except ValueError:
        sys.exit("optim_vs_deepspeed: bad --threads %r (a comma list of counts)" % a.threads)
    if a.rounds < 1 or a.reps < 1 or a.params < 1 or any(t < 1 for t in threads):
        sys.exit("optim_vs_deepspeed: --rounds, --reps, --params and thread counts must be positive")
    res = {t: {"ours": [], "deepspeed": [], "ratio": []} for t in threads}
    version = None
    for r in range(a.rounds):
        for t in threads:
            if r % 2 == 0:
                o = ours(a.bench, a.params, t, a.reps)
                d, version = deepspeed(a.ds_python, a.params, t, a.reps)
            else:
                d, version = deepspeed(a.ds_python, a.params, t, a.reps)
                o = ours(a.bench, a.params, t, a.reps)
            res[t]["ours"].append(o)
            res[t]["deepspeed"].append(d)
            res[t]["ratio"].append(o / d)
            if not a.json:
                print("round %d, %d thread(s): ours %.3f, DeepSpeedCPUAdam %.3f G params/s, ratio %.2f"
                      % (r + 1, t, o, d, o / d), flush=True)
    summary = {"params": a.params, "rounds": a.rounds, "reps": a.reps, "deepspeed_version": version,
               "threads": []}
    for t in threads:
        s = {k: statistics.median(v) for k, v in res[t].items()}
        s.update({"threads": t, "rounds_ours_faster": sum(x > 1 for x in res[t]["ratio"]),
                  "ratios": [round(x, 3) for x in res[t]["ratio"]]})
        summary["threads"].append(s)
        if not a.json:
            print("%d thread(s), medians of %d rounds: ours %.3f, DeepSpeedCPUAdam %.3f G params/s; "
                  "ratio %.2f (ours faster in %d of %d rounds)"
                  % (t, a.rounds, s["ours"], s["deepspeed"], s["ratio"], s["rounds_ours_faster"], a.rounds))
    if a.json:
        print(json.dumps(summary))


if __name__ == "__main__":
    main()
