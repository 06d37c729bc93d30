#!/usr/bin/env python3
"""Description: the stream-ordered handoff (MT_HANDOFF, replay --handoff) on a
real workload: G10's BERT_Base (two iterations, G10's parameters). With the
handoff on, the freed tensors' memory goes to the next fresh tensors, so the
replay moves far fewer bytes (at least 2x fewer) and never fewer than the
Belady bound; with it off, none is handed; auto hands nothing while no chunk
lives on NVMe (BERT fits in host memory), so it equals off.
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
check(off["handoffs"] == 0 and auto["handoffs"] == 0, "off and auto (nothing on NVMe): none handed")
check(on["bytes"] * 2 < off["bytes"], "on moves under half the bytes (%d against %d)" % (on["bytes"], off["bytes"]))
check(on["bytes"] >= on["belady_bytes"], "not below the Belady bound (%d >= %d)" % (on["bytes"], on["belady_bytes"]))
check(auto["bytes"] == off["bytes"] and auto["sim_s"] == off["sim_s"], "auto is off here")
sys.exit(1 if fails else 0)
