#!/usr/bin/env python3
"""Description: the stream-ordered handoff (MT_HANDOFF, replay --handoff) on a
real workload: G10's BERT_Base (two iterations, G10's parameters). With the
handoff on, the freed tensors' memory goes to the next fresh tensors, so the
replay moves far fewer bytes (at least 2x fewer) and never fewer than the
Belady bound; with it off, none is handed. auto (next-use estimates, the
default) times the handoff on first, so in two iterations it equals on.
Then auto's measured choice (handoff.c, predictor/trial.h) over eight
iterations, write-aware: on BERT both settings run at the same speed, so it
keeps the handoff on (far fewer bytes than off); on ViT off is clearly
faster, so it turns it off and its last iterations run as fast as off's.
With an evaluation pass every third iteration (mt-trace perturb), the
windows that hold one are not compared, and both decide the same way.
Usage: handoff_check.py MT_TRACE G10_DIR WORKDIR. Exit 77 without G10's traces."""
import json
import os
import subprocess
import sys

mt, g10, work = sys.argv[1:4]
if not g10 or not os.path.isdir(os.path.join(g10, "BERT_Base")):
    print("no G10 traces: skipped")
    sys.exit(77)
os.makedirs(work, exist_ok=True)
trace = os.path.join(work, "bert_handoff.trace")
r = subprocess.run([mt, "import-g10", os.path.join(g10, "BERT_Base"), "--iterations", "2", "-o", trace],
                   capture_output=True, text=True)
if r.returncode != 0:
    sys.exit("import-g10 failed: " + r.stderr)
fails = 0


def check(ok, what):
    global fails
    print(("ok    " if ok else "FAIL  ") + what)
    fails += not ok


res = {}
for h in ["on", "off", "auto"]:
    r = subprocess.run([mt, "replay", trace, "--pcie-bw", "15.754G", "--host-mem", "128G", "--nvme-mem", "2T",
                        "--handoff", h, "--json"], capture_output=True, text=True)
    check(r.returncode == 0, "replay --handoff %s: %s" % (h, r.stderr.strip()))
    if r.returncode != 0:
        sys.exit(1)
    res[h] = json.loads(r.stdout)
    res[h]["bytes"] = res[h]["bytes_h2d"] + res[h]["bytes_d2h"]
on, off, auto = res["on"], res["off"], res["auto"]
check(on["handoff"] == "on" and on["handoffs"] > 0, "on: chunks handed (%d)" % on["handoffs"])
check(off["handoffs"] == 0, "off: none handed")
check(on["bytes"] * 2 < off["bytes"], "on moves under half the bytes (%d against %d)" % (on["bytes"], off["bytes"]))
check(on["bytes"] >= on["belady_bytes"], "not below the Belady bound (%d >= %d)" % (on["bytes"], on["belady_bytes"]))
check(auto["bytes"] == on["bytes"] and auto["sim_s"] == on["sim_s"] and auto["handoff_trial"] == "timing",
      "auto in two iterations: still timing, with the handoff on (%s)" % auto["handoff_trial"])
check(on["handoff_trial"] is None and off["handoff_trial"] is None, "on and off: no trial")


def replay8(model, h, evals=False):
    t8 = os.path.join(work, "%s_handoff8.trace" % model)
    if not os.path.exists(t8):
        r = subprocess.run([mt, "import-g10", os.path.join(g10, model), "--iterations", "8", "-o", t8],
                           capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit("import-g10 failed: " + r.stderr)
    if evals:
        te = os.path.join(work, "%s_handoff8_eval3.trace" % model)
        r = subprocess.run([mt, "perturb", t8, "-o", te, "--eval-every", "3"], capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit("perturb failed: " + r.stderr)
        t8 = te
    r = subprocess.run([mt, "replay", t8, "--pcie-bw", "15.754G", "--host-mem", "128G", "--nvme-mem", "2T",
                        "--writes", "aware", "--handoff", h, "--json"], capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit("replay %s --handoff %s failed: %s" % (model, h, r.stderr))
    d = json.loads(r.stdout)
    d["bytes"] = d["bytes_h2d"] + d["bytes_d2h"]
    d["last"] = d["iter_sim_s"][-1]
    return d


b_on, b_off, b_auto = (replay8("BERT_Base", h) for h in ["on", "off", "auto"])
check(b_auto["handoff_trial"] == "on", "BERT: auto keeps the handoff on (%s; one period %.3f s on, %.3f s off)"
      % (b_auto["handoff_trial"], b_auto["handoff_trial_on_s"] or 0, b_auto["handoff_trial_off_s"] or 0))
check(b_auto["handoff_trial_off_s"] * 100 >= b_auto["handoff_trial_on_s"] * 98, "BERT: off not 2% faster")
check(abs(b_auto["last"] - b_on["last"]) <= 0.005 * b_on["last"],
      "BERT: the last iteration as fast as on's (%.3f against %.3f s)" % (b_auto["last"], b_on["last"]))
check(b_auto["bytes"] * 1.5 < b_off["bytes"], "BERT: far fewer bytes than off (%d against %d)"
      % (b_auto["bytes"], b_off["bytes"]))
v_on, v_off, v_auto = (replay8("VIT", h) for h in ["on", "off", "auto"])
check(v_auto["handoff_trial"] == "off", "ViT: auto turns the handoff off (%s; one period %.3f s on, %.3f s off)"
      % (v_auto["handoff_trial"], v_auto["handoff_trial_on_s"] or 0, v_auto["handoff_trial_off_s"] or 0))
check(v_auto["last"] * 1.10 < v_on["last"], "ViT: the last iteration over 10%% faster than on's (%.3f against "
      "%.3f s)" % (v_auto["last"], v_on["last"]))
check(v_auto["last"] <= v_off["last"] * 1.02, "ViT: and within 2%% of off's (%.3f against %.3f s)"
      % (v_auto["last"], v_off["last"]))
for model, want in [("BERT_Base", "on"), ("VIT", "off")]:
    e = replay8(model, "auto", evals=True)
    check(e["handoff_trial"] == want, "%s, an evaluation pass every third iteration: %s as without (%s; %.3f s on, "
          "%.3f s off)" % (model, want, e["handoff_trial"], e["handoff_trial_on_s"] or 0, e["handoff_trial_off_s"] or 0))
sys.exit(1 if fails else 0)
