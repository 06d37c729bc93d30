"""Description: megatrain.init, stats, mark_iteration and trace.
- init refuses bad values with an error naming the argument;
- a script not started under mtalloc that calls init is re-executed under
  LD_PRELOAD with the same arguments and pid, and then runs with the
  library interposing and the options read by it;
- the loop guard: when the re-executed process is still not under mtalloc
  (MT_LIBRARY names a library that is not mtalloc), init raises instead of
  re-executing again;
- init after CUDA is initialised raises (simulated: a stand-in torch module
  whose torch.cuda.is_initialized() is True; this machine has no GPU);
- stats() is a dict of the library's counters; mark_iteration and
  trace() work under mtalloc and trace() refuses a file it cannot open now.
No torch needed."""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import types

from common import MTTRACE, check, env, finish, run

HERE = os.path.dirname(os.path.abspath(__file__))
CHILD = os.path.join(HERE, "child_report.py")
import megatrain as mt  # noqa: E402  (common put the source tree on sys.path)

# ---- validation, in this process (nothing is re-executed: each call fails first)
bad = [({"max_vram_gb": "20G"}, TypeError, "max_vram_gb"),
       ({"max_vram_gb": -1}, ValueError, "max_vram_gb"),
       ({"max_vram_gb": float("nan")}, ValueError, "max_vram_gb"),
       ({"max_host_gb": True}, TypeError, "max_host_gb"),
       ({"max_host_gb": 1e-9}, ValueError, "max_host_gb"),
       ({"optimizer_compression": "3bit"}, ValueError, "optimizer_compression"),
       ({"optimizer_compression": 4}, ValueError, "optimizer_compression"),
       ({"offload_dir": "/nonexistent/nvme"}, ValueError, "offload_dir"),
       ({"offload_dir": ""}, ValueError, "offload_dir"),
       ({"trace": "/nonexistent/dir/run.trace"}, ValueError, "trace"),
       ({"trace": 5}, TypeError, "trace")]
for kw, exc, name in bad:
    try:
        mt.init(**kw)
        check(False, f"init({kw}) raised nothing")
    except exc as e:
        check(name in str(e), f"init({kw}) -> {exc.__name__}: {e}")
check(mt.RECOMMENDED_COMPRESSION == "8bit", "RECOMMENDED_COMPRESSION is '8bit'")

# ---- CUDA already initialised (simulated) -> RuntimeError saying what to do
real_torch = sys.modules.get("torch")
fake = types.ModuleType("torch")
fake.cuda = types.SimpleNamespace(is_initialized=lambda: True)
sys.modules["torch"] = fake
try:
    mt.init(max_vram_gb=1)
    check(False, "init after CUDA started raised nothing")
except RuntimeError as e:
    check("CUDA is already initialised" in str(e) and "megatrain-run" in str(e), f"init after CUDA started: {e}")
finally:
    if real_torch is None:
        del sys.modules["torch"]
    else:
        sys.modules["torch"] = real_torch


def reports(r):
    return [json.loads(l[7:]) for l in r.stdout.splitlines() if l.startswith("REPORT ")]


# ---- re-exec
tmp = tempfile.mkdtemp(prefix="mt-init-test.")
try:
    args = ["--init", "a b", "--max-vram", "--"]
    init = {"max_vram_gb": 0.5, "max_host_gb": 2, "optimizer_compression": True, "trace": tmp + "/t.trace",
            "offload_dir": tmp}
    r = run([sys.executable, CHILD] + args, MEGATRAIN_TEST_INIT=json.dumps(init))
    reps = reports(r)
    befores = [l for l in r.stdout.splitlines() if l.startswith("before-init")]
    ok = check(r.returncode == 0 and len(reps) == 1, f"re-exec: the script ran to the end once (exit {r.returncode})")
    if not ok:
        print(r.stdout, r.stderr)
    if reps:
        rep = reps[0]
        check(befores == [f"before-init pid {rep['pid']} mapped False", f"before-init pid {rep['pid']} mapped True"],
              f"started without the library, re-executed (same pid) with it: {befores}")
        check(rep["argv"] == args, f"same arguments after the re-exec: {rep['argv']}")
        check(rep["mapped"] and rep["under"] is True, "libmtalloc mapped and interposing after init")
        check(rep["env"].get("MEGATRAIN_REEXECED") == str(rep["pid"]), "the loop marker names this pid")
        check(rep.get("effective") == {"MT_MAX_VRAM": str(512 << 20), "MT_MAX_HOST": str(2 << 30), "MT_STATS": "off",
                                       "MT_OPTIMIZER_COMPRESSION": "8bit", "MT_TRACE": tmp + "/t.trace"},
              f"the library read init's options: {rep.get('effective')}")

    # already under mtalloc with the same options: no re-exec
    r = run([sys.executable, "-m", "megatrain", "--max-vram", "512M", CHILD, "--init"],
            MEGATRAIN_TEST_INIT=json.dumps({"max_vram_gb": 0.5}))
    befores = [l for l in r.stdout.splitlines() if l.startswith("before-init")]
    check(len(befores) == 1 and befores[0].endswith("mapped True") and len(reports(r)) == 1,
          f"under the launcher with the same options init returns at once: {befores}")

    # ---- loop guard: a "library" that loads but is not mtalloc
    notmt = os.path.join(tmp, "libnotmt.so")
    libm = next(l.split()[-1] for l in open("/proc/self/maps") if "/libm.so" in l or "/libm-" in l)
    shutil.copy(libm, notmt)
    r = run([sys.executable, CHILD, "--init"], MT_LIBRARY=notmt, MEGATRAIN_TEST_INIT="{}")
    befores = [l for l in r.stdout.splitlines() if l.startswith("before-init")]
    check(r.returncode == 1 and len(befores) == 2 and "MEGATRAIN_REEXECED" in r.stderr and "RuntimeError" in r.stderr,
          f"loop guard: one re-exec, then RuntimeError (exit {r.returncode}, {len(befores)} starts): "
          f"{r.stderr.strip().splitlines()[-1:]!r}")

    # ---- stats, mark_iteration, trace() under the launcher
    trace = os.path.join(tmp, "run.trace")
    code = f"""
import json, megatrain as mt
s = mt.stats()
print("STATS " + json.dumps(s))
mt.mark_iteration()
with mt.trace({trace!r}) as p:
    print("TRACING " + p)
try:
    with mt.trace({tmp + '/other.trace'!r}):
        pass
    print("OTHER no error")
except RuntimeError as e:
    print("OTHER " + str(e))
"""
    with open(os.path.join(tmp, "s.py"), "w") as f:
        f.write(code)
    r = subprocess.run([sys.executable, "-m", "megatrain", "--trace", trace, os.path.join(tmp, "s.py")],
                       env=env(), capture_output=True, text=True, timeout=60)
    out = {l.split(" ", 1)[0]: l.split(" ", 1)[1] for l in r.stdout.splitlines() if " " in l}
    s = json.loads(out.get("STATS", "null") or "null")
    check(isinstance(s, dict) and all(isinstance(s.get(k), int) for k in ("stall_ns", "bytes_h2d", "fetches", "launches")),
          f"stats() is a dict of the library's integer counters ({len(s or {})} keys)")
    check(out.get("TRACING") == trace, "trace() on the file the process traces into runs the block")
    check(out.get("OTHER", "").startswith("megatrain.trace") and "only at start" in out.get("OTHER", ""),
          f"trace() on another file raises: {out.get('OTHER')!r}")
    check(r.returncode == 0, f"stats/mark_iteration/trace script exit {r.returncode}")
    # The recorder opens its file when the pager starts (the first CUDA call
    # the library intercepts): a script that makes none leaves no file.
    if MTTRACE and os.path.exists(trace):
        t = subprocess.run([MTTRACE, "summary", trace, "--json"], capture_output=True, text=True, timeout=60)
        check(t.returncode == 0, f"mt-trace summary reads it (exit {t.returncode}) {t.stderr.strip()[:200]}")
finally:
    shutil.rmtree(tmp, ignore_errors=True)
finish("test_init")
