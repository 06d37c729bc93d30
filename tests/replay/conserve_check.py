#!/usr/bin/env python3
"""Description: replay of the MegaTrain pipeline conserves bytes, exactly:
every byte a kernel reads is on the device (fetched, or resident) or, for
a launch larger than the GPU, in a host copy reached through host
mappings; every gradient reaches the host optimizer once per step; the
optimizer state read equals the state written in every step.

Usage: conserve_check.py MT_TRACE CONF WORKDIR

The trace: CONF (the replay test's small model, 13,155,328 parameters,
fp32, 6 parameter groups) with the host optimizer, activation
checkpointing every layer, micro-batch 2 x gradient accumulation 2, for 3
iterations. Replayed (a) in 40 MiB of GPU (smaller than weights plus
activations, so weights, activations and the partial gradients between
micro-batches are paged) with the correlation predictor, an NVMe tier and
50 MiB of host memory for the optimizer (the rest of its state through
NVMe), and (b) in 10 MiB, where most launches run host-mapped. In both:
  - kernel_read_bytes = kernel_read_on_device_bytes +
    kernel_read_host_mapped_bytes, kernel_read_missing_bytes = 0; in (a)
    nothing is host-mapped; in (b) the host-mapped reads are at most the
    bytes the host-mapped launches reached over the link;
  - the reads are the same in both (they are the trace's, not the pager's);
  - 6 groups x 3 iterations = 18 hand-offs; every iteration complete and
    conserved (host_opt_conserved_iterations = 3: in each, state read =
    state written = the whole state, 8 bytes per parameter; through NVMe,
    read = written = the state placed there; gradient bytes in = weight
    bytes handed off); gradient bytes = 3 x 4 x params, parameters updated
    = 3 x params, state read = written = 3 x 8 x params in total;
  - --no-belady gives the same JSON but for the bound's keys (null).
"""
import json
import os
import subprocess
import sys

mt, conf, work = sys.argv[1:4]
os.makedirs(work, exist_ok=True)
trace = os.path.join(work, "conserve.trace")
P = 13155328
fails = []


def run(*args):
    return subprocess.run([mt, *args], capture_output=True, text=True)


def check(cond, what):
    print(("ok    " if cond else "FAIL  ") + what)
    if not cond:
        fails.append(what)


r = run("synth", "--model", conf, "--iterations", "3", "--optimizer-placement", "host", "--checkpoint", "1",
        "--micro-batch", "2", "--grad-accum", "2", "-o", trace)
check(r.returncode == 0 and "parameters: %d " % P in r.stdout and "micro_batch 2 x grad_accum 2" in r.stdout
      and "checkpointing: every 1" in r.stdout, "synth: host optimizer, checkpointing, 2 x 2 micro-batches: "
      + r.stderr.strip())

runs = {
    "40M": ["--gpu-mem", "40M", "--host-mem", "1G", "--nvme-mem", "1G", "--host-opt-mem", "50M",
            "--nvme-read-bw", "2G", "--nvme-write-bw", "1G", "--predictor", "correlation"],
    "10M": ["--gpu-mem", "10M", "--host-mem", "1G"],
}
reads = {}
for name, args in runs.items():
    r = run("replay", trace, *args, "--writes", "aware", "--json")
    check(r.returncode == 0, "%s: replay runs: %s" % (name, r.stderr.strip()[-300:]))
    j = json.loads(r.stdout) if r.returncode == 0 else {}
    g = lambda k: j.get(k, -1)
    rd, dev, hm, miss = (g("kernel_read_bytes"), g("kernel_read_on_device_bytes"),
                         g("kernel_read_host_mapped_bytes"), g("kernel_read_missing_bytes"))
    reads[name] = rd
    check(rd > 0 and rd == dev + hm and miss == 0,
          "%s: every byte read was on the device or host-mapped: %d = %d + %d, missing %d" % (name, rd, dev, hm, miss))
    if name == "40M":
        check(hm == 0 and g("launches_host_mapped") == 0, "40M: no launch host-mapped")
        check(g("bytes_h2d") > 0 and g("fetches") > 0 and g("bytes_nvme_read") > 0, "40M: paged over PCIe and NVMe")
    else:
        check(g("launches_host_mapped") > 0 and 0 < hm <= g("host_mapped_bytes"),
              "10M: launches host-mapped, their reads within the bytes they reached (%d <= %d)"
              % (hm, g("host_mapped_bytes")))
    check(g("host_opt_groups") == 6 and g("host_opt_handoffs") == 18, "%s: 6 groups, 18 hand-offs" % name)
    check(g("host_opt_complete_iterations") == 3 and g("host_opt_conserved_iterations") == 3,
          "%s: every group handed off once per step, state and gradients balanced in each of the 3 steps" % name)
    check(g("host_opt_grad_bytes") == 3 * 4 * P and g("host_opt_params") == 3 * P,
          "%s: gradient bytes = 3 x 4 x params, parameters updated = 3 x params" % name)
    check(g("host_opt_state_bytes") == 8 * P and g("host_opt_state_read") == g("host_opt_state_written") == 3 * 8 * P,
          "%s: state 8 bytes per parameter, read = written = 3 x 8 x params" % name)
    nv = g("host_opt_state_nvme_bytes")
    check(g("host_opt_state_nvme_read") == g("host_opt_state_nvme_written") == 3 * nv,
          "%s: NVMe state read = written = 3 x the %d bytes there" % (name, nv))
    if name == "40M":
        check(nv == 8 * P - 50 * 2**20, "40M: the state past 50 MiB is on NVMe")
# --no-belady (what plan's replays use) skips the bound and changes nothing else
full = run("replay", trace, *runs["40M"], "--writes", "aware", "--json")
nob = run("replay", trace, *runs["40M"], "--writes", "aware", "--json", "--no-belady")
a = json.loads(full.stdout) if full.returncode == 0 else {}
b = json.loads(nob.stdout) if nob.returncode == 0 else {}
skip = {"belady_bytes", "belady_fetches", "belady_writebacks", "replay_wall_s", "replay_max_rss_bytes"}
check(a.get("belady_bytes", 0) > 0 and b.get("belady_bytes", 0) is None and b.get("belady_fetches", 0) is None
      and {k: v for k, v in a.items() if k not in skip} == {k: v for k, v in b.items() if k not in skip},
      "--no-belady: the bound is null, every other number the same")
check(reads.get("40M") == reads.get("10M"), "the bytes kernels read are the trace's, whatever the GPU: %s" % reads)

print("conserve_check: %d failed" % len(fails))
sys.exit(1 if fails else 0)
