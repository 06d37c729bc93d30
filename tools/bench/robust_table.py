#!/usr/bin/env python3
"""robust_table.py - the README's robustness table: what a less regular
training loop costs, in one run.

Usage: tools/bench/robust_table.py [--mt-trace build/tools/mt-trace]
           [--g10 ../shared/traces/g10] [--work build/robust-table]
           [--iterations 6] [--full] [--predictors none,correlation]

Each G10 workload (BERT_Base, VIT, Inceptionv3; --full adds ResNet152 and
SENet154, minutes each) is imported with --iterations iterations and
rewritten by `mt-trace perturb` four ways: kernel times +-25% (--jitter
0.25), an evaluation pass after every third iteration (--eval-every 3), a
different branch every third iteration (--branch-every 3), and all three.
Each trace is replayed at G10's parameters (PCIe 15.754 GB/s, 128 GiB host,
--nvme-mem 2T, write-aware) with demand paging and with the correlation
predictor (--predictors: any MT_PREDICTOR values, one column pair each,
e.g. none,correlation,context). Printed: percent of ideal over the whole run (every kernel's
ideal time over the replayed time, evaluation passes included) and the
worst iteration after the first. A markdown table; raw JSON under --work.
"""
import argparse
import json
import os
import subprocess
import sys

ap = argparse.ArgumentParser()
ap.add_argument("--mt-trace", default="build/tools/mt-trace")
ap.add_argument("--g10", default="../shared/traces/g10")
ap.add_argument("--work", default="build/robust-table")
ap.add_argument("--iterations", type=int, default=6)
ap.add_argument("--full", action="store_true")
ap.add_argument("--predictors", default="none,correlation")
a = ap.parse_args()
os.makedirs(a.work, exist_ok=True)


def mt(*args):
    r = subprocess.run([a.mt_trace, *args], capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit("mt-trace %s failed: %s" % (" ".join(args), r.stderr.strip()))
    return r.stdout


variants = [("as recorded", []), ("jitter 25%", ["--jitter", "0.25"]), ("eval every 3", ["--eval-every", "3"]),
            ("branch every 3", ["--branch-every", "3"]),
            ("all three", ["--jitter", "0.25", "--eval-every", "3", "--branch-every", "3"])]
names = ["BERT_Base", "VIT", "Inceptionv3"] + (["ResNet152", "SENet154"] if a.full else [])
preds = a.predictors.split(",")
head = ["demand" if p == "none" else p for p in preds]
print("| workload | order | " + " | ".join("%s: run | %s: worst iteration" % (h, h) for h in head) + " |")
print("|---|---|" + "---:|---:|" * len(preds))
for w in names:
    base = os.path.join(a.work, "%s.%d.trace" % (w, a.iterations))
    if not os.path.exists(base):
        mt("import-g10", os.path.join(a.g10, w), "--iterations", str(a.iterations), "-o", base)
    for label, opts in variants:
        t = base
        if opts:
            t = os.path.join(a.work, "%s.%s.trace" % (w, label.replace(" ", "_").replace("%", "")))
            mt("perturb", base, "-o", t, *opts)
        cells = []
        for pred in preds:
            d = json.loads(mt("replay", t, "--pcie-bw", "15.754G", "--host-mem", "128G", "--nvme-mem", "2T",
                              "--writes", "aware", "--predictor", pred, "--json"))
            with open(t + "." + pred + ".json", "w") as f:
                json.dump(d, f)
            worst = min(100 * i / s for s, i in zip(d["iter_sim_s"][1:], d["iter_ideal_s"][1:]))
            cells += ["%.1f%%" % d["pct_of_ideal"], "%.1f%%" % worst]
        print("| %s | %s | %s |" % (w, label, " | ".join(cells)))
        sys.stdout.flush()
