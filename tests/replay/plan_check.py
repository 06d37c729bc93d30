#!/usr/bin/env python3
"""Description: `mt-trace plan` answers for a small model, says "does not
fit" with the short resource and by how much, and refuses bad input.

Usage: plan_check.py MT_TRACE CONF

CONF is the replay test's small model (13,155,328 parameters, fp32).
  - on 40 MiB of GPU, 1 GiB of host memory it prints a plan (exit 0): the
    JSON lists the replayed candidates fastest first, each with tokens/s
    above 0, a share of its ideal in (0, 100], a known binding resource and
    micro-batch x accumulation within --max-step-tokens, its MT_PREDICTOR,
    and for the winner alone the MT_POLICY and MT_HANDOFF that replayed
    fastest; the text names the MT_* settings (MT_POLICY and MT_HANDOFF
    only where they are not the defaults), the training flags and the
    next best;
  - with 16 MiB of host memory and 16 MiB of NVMe the weights (52.6 MB)
    and the smallest state do not fit: exit 1, "does not fit", the
    resource, and the shortfall in GB;
  - missing or bad options exit 2 with a message; `mt-trace --help` lists
    plan.
"""
import json
import subprocess
import sys

mt, conf = sys.argv[1:3]
fails = []


def run(*args):
    return subprocess.run([mt, *args], capture_output=True, text=True)


def check(cond, what):
    print(("ok    " if cond else "FAIL  ") + what)
    if not cond:
        fails.append(what)


# --nvme-mem 1G: the default 8T simulated store is 2^31 pages, which the
# debug_checks=3 build's invariant walk visits at every chunk it allocates
base = ["plan", "--model", conf, "--gpu-mem", "40M", "--host-mem", "1G", "--nvme-mem", "1G", "--pcie-bw", "25G",
        "--nvme-read-bw", "3G", "--nvme-write-bw", "2G", "--max-step-tokens", "4096", "--top", "3"]
r = run(*base, "--json")
check(r.returncode == 0, "a plan for the small model: " + r.stderr.strip()[-200:])
j = json.loads(r.stdout) if r.returncode == 0 else {"plans": []}
plans = j["plans"]
check(len(plans) == 3, "3 candidates replayed")
known = {"GPU compute", "host link (host to GPU)", "host link (GPU to host)", "NVMe", "host optimizer"}
check(all(p["tokens_per_s"] > 0 and 0 < p["pct_of_ideal"] <= 100 and p["binding"] in known for p in plans),
      "each has tokens/s, a share of its ideal and a binding resource")
check(all(plans[i]["tokens_per_s"] >= plans[i + 1]["tokens_per_s"] for i in range(len(plans) - 1)),
      "fastest first")
check(all(p["tokens_per_step"] <= 4096 and p["tokens_per_step"] == p["micro_batch"] * p["grad_accum"] * 64
          for p in plans), "tokens per step = micro-batch x accumulation x 64, at most --max-step-tokens")
check(all(p["predictor"] in ("correlation", "none") for p in plans[1:])
      and bool(plans) and plans[0]["predictor"] in ("correlation", "none", "context"),
      "each names the MT_PREDICTOR setting its replay won with (context: the winner only)")
check(bool(plans) and plans[0]["policy"] in ("nextuse", "lru") and plans[0]["handoff"] in ("auto", "on", "off")
      and plans[0]["spill_policy"] in ("auto", "nextuse"),
      "the winner names the MT_POLICY, MT_HANDOFF and MT_SPILL_POLICY it replayed fastest with")
check(bool(plans) and plans[0]["runahead"] in (24, 0) and all(p["runahead"] == 24 for p in plans[1:]),
      "the winner names its MT_RUNAHEAD; the others ran at the default, 24")
check(all(p["policy"] == "nextuse" and p["handoff"] == "auto" and p["spill_policy"] == "auto" for p in plans[1:]),
      "the others were replayed at the library's defaults (only the winner is tuned)")
t = run(*base)
check(t.returncode == 0 and "MT_MAX_VRAM=41943040" in t.stdout and "training flags:" in t.stdout
      and "next best:" in t.stdout, "the text names MT_* settings, training flags and the next best")
check(t.returncode == 0 and "MT_PREDICTOR=" + plans[0]["predictor"] in t.stdout if plans else False,
      "the text's MT_PREDICTOR is the best replay's")
if plans:
    pol, ho, sp = plans[0]["policy"], plans[0]["handoff"], plans[0]["spill_policy"]
    check(("MT_POLICY=" + pol in t.stdout) == (pol != "nextuse") and "MT_POLICY=nextuse" not in t.stdout
          and ("MT_HANDOFF=" + ho in t.stdout) == (ho != "auto") and "MT_HANDOFF=auto" not in t.stdout
          and ("MT_SPILL_POLICY=" + sp in t.stdout) == (sp != "auto") and "MT_SPILL_POLICY=auto" not in t.stdout
          and ("MT_RUNAHEAD=0" in t.stdout) == (plans[0]["runahead"] == 0) and "MT_RUNAHEAD=24" not in t.stdout,
          "the text sets MT_POLICY / MT_HANDOFF / MT_SPILL_POLICY only where the winner's differ from the "
          "defaults (%s, %s, %s)" % (pol, ho, sp))

r = run("plan", "--model", conf, "--gpu-mem", "40M", "--host-mem", "16M", "--nvme-mem", "16M", "--pcie-bw", "25G",
        "--nvme-read-bw", "3G", "--nvme-write-bw", "2G")
check(r.returncode == 1 and "does not fit" in r.stderr and "host memory and NVMe" in r.stderr
      and "GB short" in r.stderr, "16M host + 16M NVMe: does not fit, names the resource and the shortfall: "
      + r.stderr.strip())

need = ["--gpu-mem", "1G", "--host-mem", "1G", "--pcie-bw", "1G", "--nvme-read-bw", "1G", "--nvme-write-bw", "1G"]
for args, what in [(need, "missing --model"), (["--model", conf] + need[2:], "missing --gpu-mem"),
                   (["--model", conf, "--gpu-mem", "12Q"] + need[2:], "bad --gpu-mem"),
                   (["--model", conf] + need + ["--state-compression", "2bit"], "unknown compression"),
                   (["--model", conf] + need + ["--gpu-tflops", "-1"], "bad --gpu-tflops"),
                   (["--model", "/nonexistent.conf"] + need, "missing config"),
                   (["--model", conf] + need + ["extra"], "stray argument")]:
    r = run("plan", *args)
    check(r.returncode == 2 and r.stderr.strip() != "", what + ": exit 2 with a message")
h = run("--help")
check(h.returncode == 0 and "plan" in h.stdout, "mt-trace --help lists plan")

print("plan_check: %d failed" % len(fails))
sys.exit(1 if fails else 0)
