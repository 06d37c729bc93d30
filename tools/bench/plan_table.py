#!/usr/bin/env python3
"""plan_table.py - the README's "100B on one GPU, on paper" table, in one run.

Usage: tools/bench/plan_table.py [--mt-trace build/tools/mt-trace] [--work build/plan-table]

Runs `mt-trace plan` (synth + analytic bound + replay of the best six) for
7B, 30B, 100B and 175B at the issue's fixed inputs, and for 100B on the
variants, and prints one markdown table. The fixed inputs (not tuned):
  GPU: H200, MT_MAX_VRAM 128 GiB, 400 TFLOP/s sustained (TF32 dense);
  host: 512 GiB; host link PCIe Gen5 x16, 55 GB/s each way;
  NVMe: 4 drives in RAID-0, 27 GB/s read, 11 GB/s write;
  sequence 4096, at most 1,000,000 tokens per optimizer step;
  host AdamW 10 G params/s with FP32 state (compressed: scaled by bytes moved).
Variants: host 256 GiB, host 1.5 TiB, one NVMe drive (a quarter: 6.75 /
2.75 GB/s), uncompressed state only. The plan's JSON for every row is
left in --work.
"""
import argparse
import json
import os
import subprocess
import sys
import time

ap = argparse.ArgumentParser()
ap.add_argument("--mt-trace", default="build/tools/mt-trace")
ap.add_argument("--work", default="build/plan-table")
a = ap.parse_args()
os.makedirs(a.work, exist_ok=True)
models = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "models")

BASE = {"--gpu-mem": "128G", "--host-mem": "512G", "--pcie-bw": "55G", "--nvme-read-bw": "27G",
        "--nvme-write-bw": "11G", "--gpu-tflops": "400", "--host-opt-gparams-per-s": "10", "--seq": "4096",
        "--max-step-tokens": "1000000"}
rows = [("7B", "7b", "H200, 512 GiB, 4 NVMe", {}),
        ("30B", "30b", "H200, 512 GiB, 4 NVMe", {}),
        ("100B", "100b", "H200, 512 GiB, 4 NVMe", {}),
        ("175B", "175b", "H200, 512 GiB, 4 NVMe", {}),
        ("100B", "100b", "host 256 GiB", {"--host-mem": "256G"}),
        ("100B", "100b", "host 1.5 TiB", {"--host-mem": "1536G"}),
        ("100B", "100b", "one NVMe drive (6.75 / 2.75 GB/s)", {"--nvme-read-bw": "6.75G", "--nvme-write-bw": "2.75G"}),
        ("100B", "100b", "uncompressed state", {"--state-compression": "none"})]

print("| model | machine | best configuration | settings | tokens/s | % of ideal | binding (busy) | peak host | peak NVMe | plan wall |")
print("|---|---|---|---|---:|---:|---|---:|---:|---:|")
for name, conf, machine, change in rows:
    opts = dict(BASE, **change)
    args = [a.mt_trace, "plan", "--model", os.path.join(models, conf + ".conf"), "--json"]
    for k, v in opts.items():
        args += [k, v]
    t0 = time.time()
    r = subprocess.run(args, capture_output=True, text=True)
    wall = time.time() - t0
    tag = "%s-%s" % (conf, machine.split()[0] + machine.split()[1] if len(machine.split()) > 1 else machine)
    with open(os.path.join(a.work, "".join(ch if ch.isalnum() else "_" for ch in tag) + ".json"), "w") as f:
        f.write(r.stdout if r.returncode == 0 else r.stderr)
    if r.returncode != 0:
        print("| %s | %s | %s | | | | | | | %.0f s |" % (name, machine, r.stderr.strip().replace("|", "/"), wall))
        sys.stdout.flush()
        continue
    b = json.loads(r.stdout)["plans"][0]
    cfg = "mb %d x ga %d, ckpt %s, %s optimizer, %s state" % (
        b["micro_batch"], b["grad_accum"], "every layer" if b["checkpoint"] else "off", b["optimizer"], b["state"])
    mt = ["MT_PREDICTOR=" + b["predictor"]]
    if b.get("policy", "nextuse") != "nextuse":
        mt.append("MT_POLICY=" + b["policy"])
    if b.get("handoff", "auto") != "auto":
        mt.append("MT_HANDOFF=" + b["handoff"])
    if b.get("spill_policy", "auto") != "auto":
        mt.append("MT_SPILL_POLICY=" + b["spill_policy"])
    if b.get("runahead", 24) != 24:
        mt.append("MT_RUNAHEAD=%d" % b["runahead"])
    busy = {"GPU compute": "busy_gpu", "host link (host to GPU)": "busy_h2d", "host link (GPU to host)": "busy_d2h",
            "NVMe": "busy_nvme", "host optimizer": "busy_host_opt"}[b["binding"]]
    print("| %s | %s | %s | %s | %.0f | %.1f%% | %s (%.0f%%) | %.0f GB | %.0f GB | %.0f s |" % (
        name, machine, cfg, ", ".join(mt), b["tokens_per_s"], b["pct_of_ideal"], b["binding"], 100 * b[busy],
        b["peak_host_bytes"] / 1e9, b["peak_nvme_bytes"] / 1e9, wall))
    sys.stdout.flush()
