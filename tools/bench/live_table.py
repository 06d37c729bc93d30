#!/usr/bin/env python3
"""live_table.py - issue 9's live proof: tinytrain's wall time per step at 8x
oversubscription on the fake driver with a PCIe-like link, per configuration.

Usage: tools/bench/live_table.py [--build build] [--bw 2G] [--runs 3]
           [--steps 12] [--warmup 4] [--configs NAME,...] [--stats]

Every run is `tinytrain --steps STEPS --times` (step_time lines on stderr:
the wall time of each step, up to the loss read-back that waits for all of
its work). A run's time per step is the median of its steps after the first
WARMUP (the predictor and the next-use clock learn in the first two); a
configuration's is the median over its runs, and also the fastest run
(load on a shared machine only ever adds time, so the fastest run is the
one least disturbed; both are printed, with a ratio each). Runs go
round-robin over the configurations, so a burst of load hits all of them.

The configurations (FAKECUDA_BW=BW in every one, so the unconstrained runs
pay for the same per-step copies):
  unconstrained         tinytrain alone on the fake driver, no interposer
  unconstrained+mt      under libmtalloc.so with no memory limit
  demand + LRU          MT_MAX_VRAM = footprint/8, MT_PREDICTOR=none MT_POLICY=lru
  default               MT_MAX_VRAM = footprint/8, the library's defaults
  correlation + nextuse MT_PREDICTOR=correlation
  correlation + LRU     MT_PREDICTOR=correlation MT_POLICY=lru
Extra = a configuration's time per step minus the unconstrained one (no
interposer). The last line is the ratio of demand + LRU's extra to the best
paging configuration's (issue 9's target: at least 5). Every run's losses
are compared with the unconstrained run's, bit for bit; a difference is
printed and makes the exit status 1. --stats adds, per paging configuration,
counters of its last run's MT_STATS line divided by the steps run (the
stats cover the whole run, warm-up and the final accuracy pass included).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

ap = argparse.ArgumentParser()
ap.add_argument("--build", default="build")
ap.add_argument("--bw", default="2G", help="FAKECUDA_BW, bytes/s (K/M/G suffixes)")
ap.add_argument("--runs", type=int, default=3)
ap.add_argument("--steps", type=int, default=12)
ap.add_argument("--warmup", type=int, default=4)
ap.add_argument("--configs", default="", help="comma-separated subset of the names below")
ap.add_argument("--stats", action="store_true")
ap.add_argument("--extra-env", default="", help="VAR=value[,VAR=value...] for every paging run")
a = ap.parse_args()
if a.warmup >= a.steps:
    sys.exit("live_table: --warmup must be below --steps")

tt = os.path.join(a.build, "tests", "e2e", "tinytrain")
lib = os.path.abspath(os.path.join(a.build, "preload", "libmtalloc.so"))
fake = os.path.abspath(os.path.join(a.build, "tests", "fakecuda"))
for f in (tt, lib, os.path.join(fake, "libcuda.so.1")):
    if not os.path.exists(f):
        sys.exit("live_table: %s is missing (build it: ninja -C %s)" % (f, a.build))

base = dict(os.environ)
for k in list(base):
    if k.startswith("MT_") or k.startswith("FAKECUDA_") or k == "LD_PRELOAD":
        del base[k]
base["LD_LIBRARY_PATH"] = fake + (":" + base["LD_LIBRARY_PATH"] if base.get("LD_LIBRARY_PATH") else "")
base["FAKECUDA_BW"] = a.bw


def run(env):
    r = subprocess.run([tt, "--steps", str(a.steps), "--times"], env=env, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit("live_table: tinytrain failed (%d): %s" % (r.returncode, r.stderr.strip()[-2000:]))
    times = {}
    stats = None
    for line in r.stderr.splitlines():
        w = line.split()
        if len(w) == 3 and w[0] == "step_time":
            times[int(w[1])] = float(w[2])
        elif line.startswith("mtalloc: stats {"):
            stats = json.loads(line[len("mtalloc: stats "):])
    losses = [l for l in r.stdout.splitlines() if l.startswith("step ")]
    foot = [int(l.split()[1]) for l in r.stdout.splitlines() if l.startswith("footprint_bytes ")]
    kept = [times[s] for s in range(a.warmup + 1, a.steps + 1)]
    return statistics.median(kept), losses, foot[0] if foot else None, stats


# The footprint (and the reference losses) from one plain run.
_, ref_losses, footprint, _ = run(dict(base))
budget = footprint // 8

paging = {"MT_MAX_VRAM": str(budget), "LD_PRELOAD": lib, "MT_STATS": "1"}
for kv in filter(None, a.extra_env.split(",")):
    k, v = kv.split("=", 1)
    paging[k] = v
configs = [
    ("unconstrained", {}),
    ("unconstrained+mt", {"LD_PRELOAD": lib}),
    ("demand + LRU", dict(paging, MT_PREDICTOR="none", MT_POLICY="lru")),
    ("default", dict(paging)),
    ("correlation + nextuse", dict(paging, MT_PREDICTOR="correlation", MT_POLICY="nextuse")),
    ("correlation + LRU", dict(paging, MT_PREDICTOR="correlation", MT_POLICY="lru")),
]
want = set(filter(None, a.configs.split(",")))
if want:
    unknown = want - {n for n, _ in configs}
    if unknown:
        sys.exit("live_table: unknown configuration(s): %s" % ", ".join(sorted(unknown)))
    configs = [(n, e) for n, e in configs if n in want or n == "unconstrained"]

load0 = os.getloadavg()[0]
per_run = {n: [] for n, _ in configs}
last_stats = {}
bad = 0
for i in range(a.runs):
    for name, extra in configs:
        t, losses, _, stats = run(dict(base, **extra))
        per_run[name].append(t)
        if stats is not None:
            last_stats[name] = stats
        if losses != ref_losses:
            bad = 1
            print("live_table: %s run %d: losses differ from the unconstrained run's" % (name, i + 1),
                  file=sys.stderr)

print("tinytrain --steps %d, FAKECUDA_BW=%s, MT_MAX_VRAM=%d (footprint %d / 8), "
      "median of steps %d-%d per run, %d runs; load average %.1f before, %.1f after" %
      (a.steps, a.bw, budget, footprint, a.warmup + 1, a.steps, a.runs, load0, os.getloadavg()[0]))
print()
print("| configuration | s/step (median run) | extra | s/step (fastest run) | extra | runs (s/step) |")
print("|---|---:|---:|---:|---:|---|")
med = {n: statistics.median(v) for n, v in per_run.items()}
low = {n: min(v) for n, v in per_run.items()}
for name, _ in configs:
    e1 = "-" if name == "unconstrained" else "%+.3f" % (med[name] - med["unconstrained"])
    e2 = "-" if name == "unconstrained" else "%+.3f" % (low[name] - low["unconstrained"])
    print("| %s | %.3f | %s | %.3f | %s | %s |" % (name, med[name], e1, low[name], e2,
                                                  " ".join("%.3f" % x for x in per_run[name])))

if a.stats and last_stats:
    keys = ["bytes_h2d", "bytes_d2h", "fetches", "evictions_dirty", "evictions_clean", "stall_ns",
            "unmap_waits", "unmap_wait_ns", "prefetches", "prefetch_used", "prefetch_late",
            "prefetch_waits", "prefetches_free", "write_behind", "write_behind_used", "handoffs"]
    print()
    print("per step (whole run / %d steps; stats of the last run):" % a.steps)
    print("| configuration | " + " | ".join(keys) + " |")
    print("|---|" + "---:|" * len(keys))
    for name, st in last_stats.items():
        cells = []
        for k in keys:
            v = st.get(k, 0) / a.steps
            cells.append("%.1f ms" % (v / 1e6) if k.endswith("_ns") else
                         "%.1f MB" % (v / 1e6) if k.startswith("bytes") else "%.1f" % v)
        print("| %s | %s |" % (name, " | ".join(cells)))

paged = [n for n, _ in configs if n not in ("unconstrained", "unconstrained+mt", "demand + LRU")]
if "demand + LRU" in med and paged:
    print()
    for what, t in (("median runs", med), ("fastest runs", low)):
        best = min(paged, key=lambda n: t[n])
        lru = t["demand + LRU"] - t["unconstrained"]
        got = t[best] - t["unconstrained"]
        ratio = lru / got if got > 0 else float("inf")
        print("%s: best %s, extra %.3f s/step against demand + LRU's %.3f: %.1fx (target: 5x)" %
              (what, best, got, lru, ratio))
print("losses: %s" % ("all bit-identical to the unconstrained run" if not bad else "DIFFERENT (see above)"))
sys.exit(bad)
