#!/usr/bin/env python3
"""Description: `mt-trace plan --trace` plans from a trace: the settings
mtalloc can change without recording again, the answer in tokens/s or
steps/s, "does not fit" with the shortfall, and clear errors for bad
traces and options.

Usage: plan_trace_check.py MT_TRACE CONF WORKDIR

CONF is the replay test's small model (13,155,328 parameters, fp32),
synthesised with the host optimizer for 2 iterations (micro-batch 1 x 64
tokens). On 40 MiB of GPU and 1 GiB of host memory:
  - exit 0; the JSON lists every replayed setting fastest first, each with
    a paging unit of 2 MiB (40 MiB / 64 allows no larger), a predictor and
    depth from the searched set, a state compression (the trace hands
    gradients to the host optimizer), host memory for the state within
    --host-mem, step time above the ideal (the trace's kernel time),
    tokens/s = 64 / step time, and a known binding resource;
  - the search covered prefetching (none and four depths) and all three
    state compressions;
  - the text names the MT_* settings (MT_CHUNK, MT_PREDICTOR,
    MT_OPTIMIZER=host, MT_OPTIMIZER_COMPRESSION), says the training flags
    are the trace's and why the others lose;
  - without --tokens-per-step the JSON's tokens_per_s is null and the text
    is in steps/s;
  - GPU 16 MiB + host 16 MiB + NVMe 16 MiB: "does not fit", exit 1, with the
    trace's peak and the shortfall in GB;
  - a truncated trace, a file that is not a trace, a missing file, --trace
    with --model, --gpu-tflops with --trace, --tokens-per-step without
    --trace and a bad --tokens-per-step exit 2 with a message.
"""
import json
import os
import subprocess
import sys

mt, conf, work = sys.argv[1:4]
os.makedirs(work, exist_ok=True)
trace = os.path.join(work, "plan-trace.trace")
fails = []


def run(*args):
    return subprocess.run([mt, *args], capture_output=True, text=True)


def check(cond, what):
    print(("ok    " if cond else "FAIL  ") + what)
    if not cond:
        fails.append(what)


r = run("synth", "--model", conf, "--iterations", "2", "--optimizer-placement", "host", "-o", trace)
check(r.returncode == 0, "synth wrote the trace: " + r.stderr.strip())
machine = ["--gpu-mem", "40M", "--host-mem", "1G", "--pcie-bw", "25G", "--nvme-read-bw", "3G", "--nvme-write-bw", "2G"]
r = run("plan", "--trace", trace, *machine, "--tokens-per-step", "64", "--json")
check(r.returncode == 0, "a plan from the trace: " + r.stderr.strip()[-300:])
j = json.loads(r.stdout) if r.returncode == 0 else {"plans": []}
plans = [p for p in j["plans"] if not p["failed"]]
known = {"GPU compute", "host link (host to GPU)", "host link (GPU to host)", "NVMe", "host optimizer"}
check(j.get("host_optimizer") is True and j.get("tokens_per_step") == 64, "the trace's host optimizer is seen")
check(len(plans) >= 10 and len(plans) == len(j["plans"]), "%d settings replayed, none failed" % len(plans))
check(all(p["chunk"] == 2 << 20 for p in plans), "paging unit 2 MiB (40 MiB / 64 allows no larger)")
check({(p["predictor"], p["prefetch_depth"]) for p in plans} ==
      {("none", 0), ("correlation", 4), ("correlation", 8), ("correlation", 16), ("correlation", 32)},
      "prefetching searched: none and depths 4, 8, 16, 32")
check({p["state"] for p in plans} == {"none", "8bit", "4bit"}, "all three state compressions searched")
check(all(0 < p["host_opt_mem"] < 2**30 and p["mt_max_host"] == 2**30 for p in plans),
      "the state's host memory is part of --host-mem")
check(all(p["step_s"] >= p["ideal_step_s"] > 0 and 0 < p["pct_of_ideal"] <= 100 for p in plans),
      "each step takes at least the trace's kernel time")
check(all(abs(p["tokens_per_s"] - 64 / p["step_s"]) <= 1e-3 * p["tokens_per_s"] for p in plans),
      "tokens/s = 64 / step time")
check(all(p["binding"] in known for p in plans), "each names a binding resource")
check(all(plans[i]["step_s"] <= plans[i + 1]["step_s"] for i in range(len(plans) - 1)), "fastest first")
none_state = [p for p in plans if p["state"] == "none"]
check(any(p["host_opt_mem"] == p["host_opt_state_bytes"] == 8 * 13155328 for p in none_state),
      "uncompressed state is 8 bytes per parameter, and a split that holds all of it was tried")

t = run("plan", "--trace", trace, *machine, "--tokens-per-step", "64")
check(t.returncode == 0 and "MT_CHUNK=2097152" in t.stdout and "MT_PREDICTOR=" in t.stdout
      and "MT_OPTIMIZER=host MT_OPTIMIZER_COMPRESSION=" in t.stdout and "as recorded" in t.stdout
      and "why the others lose" in t.stdout and "tokens/s" in t.stdout,
      "the text names the MT_* settings, the fixed training flags and why the others lose")
s = run("plan", "--trace", trace, *machine)
check(s.returncode == 0 and "steps/s" in s.stdout, "without --tokens-per-step: steps/s")
sj = run("plan", "--trace", trace, *machine, "--json")
check(sj.returncode == 0 and json.loads(sj.stdout)["plans"][0]["tokens_per_s"] is None,
      "without --tokens-per-step: tokens_per_s is null")

r = run("plan", "--trace", trace, "--gpu-mem", "16M", "--host-mem", "16M", "--nvme-mem", "16M", *machine[4:])
check(r.returncode == 1 and "does not fit" in r.stderr and "GB short" in r.stderr and "peak" in r.stderr,
      "48 MiB in all: does not fit, with the peak and the shortfall: " + r.stderr.strip())

data = open(trace, "rb").read()
trunc = os.path.join(work, "plan-trace-truncated.trace")
open(trunc, "wb").write(data[:len(data) // 2 + 3])
junk = os.path.join(work, "plan-trace-junk.trace")
open(junk, "wb").write(b"not a trace at all\n" * 100)
for args, what, needle in [
        (["--trace", trunc] + machine, "a truncated trace", "byte"),
        (["--trace", junk] + machine, "a file that is not a trace", "not an mtalloc trace"),
        (["--trace", os.path.join(work, "nonexistent.trace")] + machine, "a missing trace", "cannot open"),
        (["--trace", trace, "--model", conf] + machine, "--trace with --model", "exclude"),
        (["--trace", trace, "--gpu-tflops", "100"] + machine, "--gpu-tflops with --trace", "does not apply"),
        (["--model", conf, "--tokens-per-step", "64"] + machine, "--tokens-per-step without --trace", "needs --trace"),
        (["--trace", trace, "--tokens-per-step", "0"] + machine, "--tokens-per-step 0", "bad value"),
        (["--trace", trace, "--gpu-mem", "1G"], "--trace without --host-mem", "required")]:
    r = run("plan", *args)
    check(r.returncode == 2 and needle in r.stderr, what + ": exit 2 with a message: " + r.stderr.strip()[-200:])

print("plan_trace_check: %d failed" % len(fails))
sys.exit(1 if fails else 0)
