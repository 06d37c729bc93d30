"""Description: megatrain-run / python -m megatrain: the script's arguments
pass through untouched (options, '--' and all), LD_PRELOAD gets
libmtalloc.so first and keeps an existing preload, the MT_* variables are
set from the options, the sitecustomize folder leads PYTHONPATH, the
library is really interposing in the child; bad options are refused with a
message naming the option. No torch needed."""
import json
import os
import sys

from common import LIB, PYDIR, check, finish, run

HERE = os.path.dirname(os.path.abspath(__file__))
CHILD = os.path.join(HERE, "child_report.py")


def report(r):
    for line in r.stdout.splitlines():
        if line.startswith("REPORT "):
            return json.loads(line[7:])
    print("--- stdout\n" + r.stdout + "--- stderr\n" + r.stderr)
    return None


# an existing preload to keep: libm, which every python has mapped
libm = next((l.split()[-1] for l in open("/proc/self/maps") if "/libm.so" in l or "/libm-" in l), None)
script_args = ["--max-vram", "3", "--", "x y", "-m", "--trace=z", ""]
r = run([sys.executable, "-m", "megatrain", "--max-vram", "512M", "--max-host", "2G",
         "--optimizer-compression", "on", "--trace", "/tmp/mt-launcher-test.trace", "--stats",
         "--", CHILD] + script_args, LD_PRELOAD=libm)
rep = report(r)
check(r.returncode == 0 and rep is not None, f"python -m megatrain ran the script (exit {r.returncode})")
if rep:
    check(rep["argv"] == script_args, f"script arguments untouched: {rep['argv']!r}")
    e = rep["env"]
    pre = e.get("LD_PRELOAD", "").split(":")
    check(os.path.samefile(pre[0], LIB), f"LD_PRELOAD starts with libmtalloc.so: {pre}")
    check(libm is None or pre[1:] == [libm], f"the existing preload is kept after it: {pre}")
    check(e.get("MT_MAX_VRAM") == "512M" and e.get("MT_MAX_HOST") == "2G", "MT_MAX_VRAM, MT_MAX_HOST set")
    check(e.get("MT_OPTIMIZER_COMPRESSION") == "8bit", "--optimizer-compression on = RECOMMENDED_COMPRESSION (8bit)")
    check(e.get("MT_TRACE") == "/tmp/mt-launcher-test.trace" and e.get("MT_STATS") == "1", "MT_TRACE, MT_STATS set")
    check(e.get("PYTHONPATH", "").split(":")[0] == os.path.join(PYDIR, "megatrain", "_site"),
          f"sitecustomize folder first on PYTHONPATH: {e.get('PYTHONPATH')}")
    check(rep["mapped"] and rep["under"] is True, "libmtalloc is mapped and interposing in the child")
    eff = rep.get("effective", {})
    check(eff == {"MT_MAX_VRAM": str(512 << 20), "MT_MAX_HOST": str(2 << 30), "MT_STATS": "on",
                  "MT_OPTIMIZER_COMPRESSION": "8bit", "MT_TRACE": "/tmp/mt-launcher-test.trace"},
          f"the library read the options (mt_option_text): {eff}")
try:
    os.unlink("/tmp/mt-launcher-test.trace")
except OSError:
    pass

# the console script's module, a script whose first argument looks like a launcher option
r = run([sys.executable, "-m", "megatrain.run", CHILD, "--max-vram", "1G"])
rep = report(r)
check(rep is not None and rep["argv"] == ["--max-vram", "1G"] and "MT_MAX_VRAM" not in rep["env"],
      "options after the script belong to the script")

# -m module
r = run([sys.executable, "-m", "megatrain", "--max-vram", "1G", "-m", "json.tool", "--help"])
check(r.returncode == 0 and "json.tool" in r.stdout, f"-m module runs the module with its arguments (exit {r.returncode})")

# bad input: one line naming the option, exit 2, nothing run
for args, want in [(["--max-vram", "20Q"], "--max-vram"),
                   (["--optimizer-compression", "3bit"], "optimizer_compression"),
                   (["--optimizer", "gpu"], "optimizer"),
                   (["--offload-dir", "/nonexistent/mt"], "--offload-dir"),
                   (["--trace", "/nonexistent/dir/t.trace"], "--trace"),
                   (["--library", "/nonexistent/libmtalloc.so"], "--library"),
                   (["--max-vram", "1G"], "no script given")]:
    r = run([sys.executable, "-m", "megatrain"] + args + ([CHILD] if want != "no script given" else []))
    check(r.returncode == 2 and want in r.stderr and "REPORT" not in r.stdout,
          f"refused {args}: exit {r.returncode}, {r.stderr.strip().splitlines()[-1:]!r}")
r = run([sys.executable, "-m", "megatrain", CHILD], MT_LIBRARY="/nonexistent/libmtalloc.so")
check(r.returncode == 2 and "MT_LIBRARY" in r.stderr, f"a missing MT_LIBRARY is named: {r.stderr.strip()[-160:]!r}")
finish("test_launcher")
