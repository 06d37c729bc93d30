#!/usr/bin/env python3
"""Description: the recorder in the library, end to end. tinytrain runs under
the interposer at 8x oversubscription with MT_TRACE and MT_STATS; the trace
it leaves must agree with the library's own counters (launches,
allocations, frees, fetches, evictions, bytes the pager moved), and every
mt-trace subcommand must read it (summary, timeline, plot, replay).

A second run pages through all three tiers (MT_MAX_HOST = footprint/4 and
an offload directory) with the fake's streams jittered: the trace's NVMe
bytes and spills are the library's, and its per-tier residency, replayed
record by record, peaks exactly where the library's live tier counters
did (GPU, host and NVMe).

Usage: trace_check.py TINYTRAIN LIBMTALLOC FAKECUDA_DIR MT_TRACE WORKDIR
"""
import json
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET

tt, lib, fake, mt, work = sys.argv[1:6]
trace = os.path.join(work, "tinytrain.trace")
fails = []


def check(cond, what):
    print(("ok    " if cond else "FAIL  ") + what)
    if not cond:
        fails.append(what)


env = dict(os.environ)
env["LD_LIBRARY_PATH"] = fake
plain = subprocess.run([tt, "--steps", "3"], env=env, capture_output=True, text=True)
check(plain.returncode == 0, "tinytrain alone")
footprint = int(re.search(r"footprint_bytes (\d+)", plain.stdout).group(1))
launches = int(re.search(r"launches (\d+)", plain.stdout).group(1))

env.update({"LD_PRELOAD": env.get("MT_TEST_PRELOAD_PREFIX", "") + lib, "MT_TRACE": trace,
            "MT_STATS": "1", "MT_MAX_VRAM": str(footprint // 8)})
if os.path.exists(trace):
    os.unlink(trace)
run = subprocess.run([tt, "--steps", "3"], env=env, capture_output=True, text=True)
check(run.returncode == 0, "tinytrain under mtalloc with MT_TRACE: " + run.stderr[-300:])
m = re.search(r"^mtalloc: stats (\{.*\})$", run.stderr, re.M)
check(m is not None, "the stats line is there")
stats = json.loads(m.group(1)) if m else {}

s = subprocess.run([mt, "summary", trace, "--json"], capture_output=True, text=True)
check(s.returncode == 0, "mt-trace summary reads the trace: " + s.stderr.strip())
t = json.loads(s.stdout)["total"] if s.returncode == 0 else {}
check(t.get("launches") == launches == stats.get("launches"),
      "launches: trace %s, tinytrain %d, stats %s" % (t.get("launches"), launches, stats.get("launches")))
check(t.get("allocations") == stats.get("allocs") and t.get("frees") == stats.get("frees"),
      "allocations and frees match the stats")
check(t.get("fetches") == stats.get("fetches") and t.get("fetches", 0) > 0,
      "fetches: trace %s, stats %s" % (t.get("fetches"), stats.get("fetches")))
check(t.get("evictions_dirty") == stats.get("evictions_dirty") and t.get("evictions_clean") == stats.get("evictions_clean"),
      "evictions match the stats")
check(t.get("bytes", {}).get("h2d", {}).get("pager") == stats.get("bytes_h2d")
      and t.get("bytes", {}).get("d2h", {}).get("pager") == stats.get("bytes_d2h"),
      "bytes the pager moved match the stats")
check(0 < t.get("peak_gpu_bytes", 0) <= footprint // 8, "peak GPU residency within the budget")

tl = os.path.join(work, "tinytrain.json")
r = subprocess.run([mt, "timeline", trace, "-o", tl], capture_output=True, text=True)
ok = r.returncode == 0
if ok:
    with open(tl) as f:
        events = json.load(f)["traceEvents"]
    ok = sum(1 for e in events if e.get("ph") == "X" and e.get("cat", "").startswith("kernel")) >= 1
check(ok, "mt-trace timeline writes JSON with kernels")
svg = os.path.join(work, "tinytrain.svg")
r = subprocess.run([mt, "plot", trace, "-o", svg], capture_output=True, text=True)
check(r.returncode == 0 and ET.parse(svg).getroot().tag.endswith("svg"), "mt-trace plot writes an SVG")
r = subprocess.run([mt, "replay", trace, "--json"], capture_output=True, text=True)
check(r.returncode == 0 and json.loads(r.stdout)["launches"] == launches, "mt-trace replay replays every launch")

# ---- three tiers, jittered streams: residency per tier ----------------------
trace3 = os.path.join(work, "tinytrain3.trace")
nvdir = os.path.join(work, "trace-check-nvme")
os.makedirs(nvdir, exist_ok=True)
env3 = dict(env)
env3.update({"MT_TRACE": trace3, "MT_MAX_HOST": str(footprint // 4), "MT_OFFLOAD_DIR": nvdir,
             "MT_MAX_NVME": "1G", "FAKECUDA_JITTER_US": "50"})
if os.path.exists(trace3):
    os.unlink(trace3)
run3 = subprocess.run([tt, "--steps", "3"], env=env3, capture_output=True, text=True)
check(run3.returncode == 0, "tinytrain on three tiers with MT_TRACE: " + run3.stderr[-300:])
m = re.search(r"^mtalloc: stats (\{.*\})$", run3.stderr, re.M)
st3 = json.loads(m.group(1)) if m else {}
s3 = subprocess.run([mt, "summary", trace3, "--json"], capture_output=True, text=True)
check(s3.returncode == 0, "mt-trace summary reads the three-tier trace: " + s3.stderr.strip())
t3 = json.loads(s3.stdout)["total"] if s3.returncode == 0 else {}
check(st3.get("bytes_nvme_write", 0) > 0 and st3.get("bytes_nvme_read", 0) > 0,
      "the run paged to NVMe and back (%s written, %s read)" % (st3.get("bytes_nvme_write"), st3.get("bytes_nvme_read")))
check(t3.get("bytes", {}).get("nvme_read", {}).get("pager") == st3.get("bytes_nvme_read")
      and t3.get("bytes", {}).get("nvme_write", {}).get("pager") == st3.get("bytes_nvme_write"),
      "NVMe bytes: trace %s / %s, stats %s / %s" % (t3.get("bytes", {}).get("nvme_read"), t3.get("bytes", {}).get("nvme_write"),
                                                   st3.get("bytes_nvme_read"), st3.get("bytes_nvme_write")))
check(t3.get("spills") == st3.get("nvme_spills"), "spills: trace %s, stats %s" % (t3.get("spills"), st3.get("nvme_spills")))
check(t3.get("fetches") == st3.get("fetches") and t3.get("evictions_dirty") == st3.get("evictions_dirty")
      and t3.get("evictions_clean") == st3.get("evictions_clean"), "fetches and evictions match the stats")
for tier in ["gpu", "host", "nvme"]:
    tv, lv = t3.get("peak_%s_bytes" % tier), st3.get("peak_live_%s_bytes" % tier)
    check(tv == lv and (lv or 0) > 0, "peak %s residency: trace %s, library %s" % (tier, tv, lv))
check(os.listdir(nvdir) == [], "nothing left in the offload directory")

print("trace_check: %d failed" % len(fails))
sys.exit(1 if fails else 0)
