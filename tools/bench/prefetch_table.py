#!/usr/bin/env python3
"""prefetch_table.py - the README's prefetch table, regenerated in one run.

Usage: tools/bench/prefetch_table.py [--mt-trace build/tools/mt-trace]
           [--g10 ../shared/traces/g10] [--work build/prefetch-table] [--quick]
           [--only NAME[,NAME...]]

For each of the five G10 workloads at G10's own parameters (40 GiB GPU from
the trace, 128 GiB host, PCIe 15.754 GB/s each way, a 3.2 GB/s SSD as
--nvme-mem 2T) and for the synth 7B and 30B models at a GPU budget of a
quarter of their footprint (host 2T, PCIe 25 GB/s): the second iteration's
time and percent of ideal, bytes on the PCIe link against the Belady bound,
and prefetch coverage / accuracy / timeliness, for four configurations,
each with --writes all and --writes aware (--writes picks one):
  demand + LRU          --predictor none --policy lru --handoff off
                        (the baseline: what the pager did before next-use
                        eviction and the stream-ordered handoff)
  demand + nextuse      --predictor none (the defaults: nextuse, handoff
                        auto, which is on once chunks live on NVMe)
  correlation + nextuse --predictor correlation
  correlation + nextuse, handoff on   the same with --handoff on
  correlation + nextuse, paced        the same with --prefetch-pace on
                        (MT_PREFETCH_PACE: a prefetch starts only while
                        the h2d link is idle)
--quick skips ResNet152, SENet154 and 30B (the slow ones); --only keeps
the named workloads (BERT_Base, VIT, Inceptionv3, ResNet152, SENet154,
7b, 30b). Prints a markdown table; the raw JSON of every replay is left
in --work.
"""
import argparse
import json
import os
import subprocess
import sys

ap = argparse.ArgumentParser()
ap.add_argument("--mt-trace", default="build/tools/mt-trace")
ap.add_argument("--g10", default="../shared/traces/g10")
ap.add_argument("--work", default="build/prefetch-table")
ap.add_argument("--quick", action="store_true")
ap.add_argument("--only", default="")
ap.add_argument("--writes", default="all,aware", help="all,aware (default) or one of them")
a = ap.parse_args()
os.makedirs(a.work, exist_ok=True)


def mt(*args):
    r = subprocess.run([a.mt_trace, *args], capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit("mt-trace %s failed: %s" % (" ".join(args), r.stderr.strip()))
    return r.stdout


workloads = []
only = set(x for x in a.only.split(",") if x)
for w in ["BERT_Base", "VIT", "Inceptionv3", "ResNet152", "SENet154"]:
    if (a.quick and w in ("ResNet152", "SENet154")) or (only and w not in only):
        continue
    t = os.path.join(a.work, w + ".trace")
    if not os.path.exists(t):
        mt("import-g10", os.path.join(a.g10, w), "--iterations", "2", "-o", t)
    workloads.append((w, t, ["--pcie-bw", "15.754G", "--host-mem", "128G", "--nvme-mem", "2T"]))
models = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "models")
for m in ["7b", "30b"]:
    if (a.quick and m == "30b") or (only and m not in only):
        continue
    t = os.path.join(a.work, m + ".trace")
    if not os.path.exists(t):
        mt("synth", "--model", os.path.join(models, m + ".conf"), "--iterations", "2", "-o", t)
    s = json.loads(mt("summary", t, "--json"))
    foot = s["total"]["peak_gpu_bytes"]  # the synth trace places everything on the GPU: its footprint
    gpu = max(foot // 4, 1 << 30)
    workloads.append(("synth " + m, t, ["--gpu-mem", str(gpu), "--host-mem", "2T", "--pcie-bw", "25G"]))

print("| workload | config | 2nd iteration | of ideal | PCIe bytes / Belady | coverage | accuracy | timeliness |")
print("|---|---|---:|---:|---:|---:|---:|---:|")
configs = [("demand + LRU", ["--predictor", "none", "--policy", "lru", "--handoff", "off"]),
           ("demand + nextuse", ["--predictor", "none", "--policy", "nextuse", "--handoff", "auto"]),
           ("correlation + nextuse", ["--predictor", "correlation", "--policy", "nextuse", "--handoff", "auto"]),
           ("correlation + nextuse, handoff on", ["--predictor", "correlation", "--policy", "nextuse", "--handoff", "on"]),
           ("correlation + nextuse, paced", ["--predictor", "correlation", "--policy", "nextuse", "--handoff", "auto",
                                             "--prefetch-pace", "on"])]
for name, t, extra in workloads:
    for label, cfg in configs:
        for writes in a.writes.split(","):
            out = os.path.join(a.work, "%s.%s.%s.json" % (name.replace(" ", "_"), label.replace(" + ", "_"), writes))
            d = json.loads(mt("replay", t, *extra, *cfg, "--writes", writes, "--json"))
            with open(out, "w") as f:
                json.dump(d, f)
            it, ii = d["iter_sim_s"][-1], d["iter_ideal_s"][-1]
            fmt = lambda v: "-" if v is None else "%.2f" % v
            print("| %s | %s, writes %s | %.3f s | %.1f%% | %.1f / %.1f GB | %s | %s | %s |" % (
                name, label, writes, it, 100 * ii / it,
                (d["bytes_h2d"] + d["bytes_d2h"]) / 1e9, d["belady_bytes"] / 1e9, fmt(d["coverage"]),
                fmt(d["accuracy"]), fmt(d["timeliness"])))
            sys.stdout.flush()
