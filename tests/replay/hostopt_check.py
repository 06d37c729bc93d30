#!/usr/bin/env python3
"""Description: the host optimizer pipeline in mt-trace replay conserves
what it moves.

Usage: hostopt_check.py MT_TRACE CONF WORKDIR

A synth trace with optimizer_placement = host (CONF, 3 iterations, the
replay test's small model: 13,155,328 parameters, fp32, 6 parameter
groups) replayed in a GPU smaller than its weights and with host memory
for only a third of the optimizer state:
  - every gradient reaches the host optimizer exactly once per iteration
    (every group in every iteration; gradient bytes = 3 x 4 x params;
    parameters updated = 3 x params);
  - the state the pool reads equals the state it writes, in total and
    through NVMe, and is 8 bytes per parameter per iteration (m and v; the
    FP32 weights are their own master, in the pager's host copy); what does not fit --host-opt-mem is read and written through the
    drive every step, and the drive's byte counts include it;
  - the weights come back: the GPU fetches at least the weights that do
    not fit it in each iteration after the first (their device copies were
    dropped stale at the hand-off);
  - the pool is a resource of the clock: at 1e-3 G params/s it alone takes
    3 x params / 1e6 s, and the replay takes at least that;
  - bad --host-opt-gparams-per-s and --host-opt-mem exit 2.
"""
import json
import os
import subprocess
import sys

mt, conf, work = sys.argv[1:4]
trace = os.path.join(work, "hostopt.trace")
fails = []
P = 13155328


def run(*args):
    return subprocess.run([mt, *args], capture_output=True, text=True)


def check(cond, what):
    print(("ok    " if cond else "FAIL  ") + what)
    if not cond:
        fails.append(what)


r = run("synth", "--model", conf, "--iterations", "3", "--optimizer-placement", "host", "-o", trace)
check(r.returncode == 0, "synth wrote the trace: " + r.stderr.strip())
check("parameters: %d " % P in r.stdout, "the model has %d parameters" % P)

r = run("replay", trace, "--gpu-mem", "40M", "--host-mem", "1G", "--writes", "aware", "--host-opt-mem", "50M",
        "--nvme-read-bw", "2G", "--nvme-write-bw", "1G", "--json")
check(r.returncode == 0, "replay runs: " + r.stderr.strip())
j = json.loads(r.stdout) if r.returncode == 0 else {}
g = lambda k: j.get(k, -1)
check(g("host_opt_groups") == 6 and g("host_opt_handoffs") == 18, "6 groups, 18 hand-offs")
check(g("host_opt_complete_iterations") == 3, "every group handed off once in each of the 3 iterations")
check(g("host_opt_grad_bytes") == 3 * 4 * P, "gradient bytes = 3 x 4 x params (%d)" % g("host_opt_grad_bytes"))
check(g("host_opt_params") == 3 * P, "parameters updated = 3 x params")
check(g("host_opt_state_bytes") == 8 * P, "state = 8 bytes per parameter (m, v; fp32 weights are their own master)")
check(g("host_opt_state_read") == g("host_opt_state_written") == 3 * 8 * P, "state read = written = 3 x 8 x params")
nv = g("host_opt_state_nvme_bytes")
check(nv == 8 * P - 50 * 2**20, "the state past --host-opt-mem is on NVMe (%d bytes)" % nv)
check(g("host_opt_state_nvme_read") == g("host_opt_state_nvme_written") == 3 * nv,
      "NVMe state read = written = 3 x its bytes")
check(g("bytes_nvme_read") >= 3 * nv and g("bytes_nvme_write") >= 3 * nv, "the drive carries the state traffic")
check(g("bytes_h2d") >= 2 * (4 * P - 40 * 2**20), "the new weights are fetched in iterations 1 and 2")
check(g("sim_s") >= g("nvme_busy_s") > 0, "the drive's time is within the simulated time")

slow = run("replay", trace, "--gpu-mem", "1G", "--host-mem", "1G", "--host-opt-gparams-per-s", "0.001", "--json")
s = json.loads(slow.stdout) if slow.returncode == 0 else {}
pool = 3 * P / 1e6
check(abs(s.get("host_opt_busy_s", 0) - pool) < 1e-3 and s.get("sim_s", 0) >= pool,
      "a pool of 1e-3 G params/s is busy %.3f s and bounds the replay (%s s)" % (pool, s.get("sim_s")))

for args, what in [(("--host-opt-gparams-per-s", "0"), "zero pool rate"), (("--host-opt-gparams-per-s", "x"), "bad pool rate"),
                   (("--host-opt-mem", "12Q"), "bad --host-opt-mem")]:
    r = run("replay", trace, "--gpu-mem", "1G", *args)
    check(r.returncode == 2 and r.stderr.strip() != "", what + ": exit 2 with a message")

print("hostopt_check: %d failed" % len(fails))
sys.exit(1 if fails else 0)
