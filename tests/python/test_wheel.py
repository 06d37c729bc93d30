"""Description: `pip install .` into a fresh virtual environment (python3 -m
venv, meson-python from PyPI), then the installed megatrain-run on a
script: the wheel holds megatrain, libmtalloc.so inside it and mt-trace,
and the launched script runs under the installed library with its
arguments untouched. Needs the network (PyPI); without it the test fails
saying so. The wheel's meson build folder is kept in the build tree
(MEGATRAIN_WHEEL_BUILD), so a second run only relinks."""
import glob
import os
import shutil
import subprocess
import sys
import tempfile
import time

from common import ROOT, check, finish

build_dir = os.environ.get("MEGATRAIN_WHEEL_BUILD") or os.path.join(ROOT, "build", "wheel-build")
tmp = tempfile.mkdtemp(prefix="mt-wheel-test.")


def env():
    """A clean environment: nothing of the source tree's megatrain or library."""
    e = {k: v for k, v in os.environ.items()
         if k not in ("PYTHONPATH", "MT_LIBRARY", "LD_PRELOAD", "MT_TRACE_TOOL", "PIP_REQUIRE_VIRTUALENV")}
    return e


try:
    venv = os.path.join(tmp, "venv")
    t0 = time.time()
    r = subprocess.run([sys.executable, "-m", "venv", venv], capture_output=True, text=True, timeout=120)
    if not check(r.returncode == 0, f"python3 -m venv (exit {r.returncode}) {r.stderr.strip()[-300:]}"):
        finish("test_wheel")
    vpy = os.path.join(venv, "bin", "python")
    r = subprocess.run([vpy, "-m", "pip", "install", "--disable-pip-version-check", "-q",
                        f"--config-settings=build-dir={build_dir}",
                        # two jobs: the suite runs beside it on the same cores
                        "--config-settings=compile-args=-j2", ROOT],
                       capture_output=True, text=True, timeout=900, env=env())
    secs = time.time() - t0
    if r.returncode != 0:
        net = any(s in r.stderr for s in ("Failed to establish a new connection", "Temporary failure in name resolution",
                                          "No matching distribution found", "Could not find a version",
                                          "NewConnectionError", "Network is unreachable"))
        if net:
            print("FAIL pip install . needs the network: its build requirements (meson-python, meson) come "
                  "from PyPI, and pip could not reach it:\n" + r.stderr.strip()[-1500:])
        else:
            print("FAIL pip install . failed:\n" + r.stdout[-1500:] + r.stderr[-3000:])
        sys.exit(1)
    print(f"pip install . took {secs:.0f} s (venv included)")
    site = glob.glob(os.path.join(venv, "lib", "python*", "site-packages", "megatrain"))
    check(len(site) == 1, f"megatrain installed into the venv: {site}")
    pkg = site[0] if site else ""
    so = os.path.join(pkg, "libmtalloc.so")
    check(os.path.isfile(so), "libmtalloc.so is inside the installed package")
    check(os.path.isfile(os.path.join(pkg, "_site", "sitecustomize.py")), "the sitecustomize folder is installed")
    for tool in ("megatrain-run", "mt-trace"):
        check(os.access(os.path.join(venv, "bin", tool), os.X_OK), f"{tool} is in the venv's bin")
    r = subprocess.run([os.path.join(venv, "bin", "mt-trace"), "--help"], capture_output=True, text=True, env=env())
    check(r.returncode == 0, f"the installed mt-trace runs (exit {r.returncode})")
    script = os.path.join(tmp, "s.py")
    with open(script, "w") as f:
        f.write("import sys, megatrain as mt\n"
                "print('ARGS', sys.argv[1:])\n"
                "print('PKG', mt.__file__)\n"
                "print('LIB', mt.library_path())\n"
                "print('UNDER', mt.under_mtalloc(), type(mt.stats()).__name__)\n")
    r = subprocess.run([os.path.join(venv, "bin", "megatrain-run"), "--max-vram", "1G", script, "--max-vram", "x"],
                       capture_output=True, text=True, timeout=60, env=env(), cwd=tmp)
    out = dict(l.split(" ", 1) for l in r.stdout.splitlines() if " " in l)
    check(r.returncode == 0, f"megatrain-run ran the script (exit {r.returncode}) {r.stderr.strip()[-300:]}")
    check(out.get("ARGS") == "['--max-vram', 'x']", f"arguments untouched: {out.get('ARGS')}")
    check(out.get("PKG", "").startswith(pkg), f"the installed package, not the source tree: {out.get('PKG')}")
    check(os.path.realpath(out.get("LIB", "")) == os.path.realpath(so), f"the installed library: {out.get('LIB')}")
    check(out.get("UNDER") == "True dict", f"the script runs under it: {out.get('UNDER')}")
    r = subprocess.run([vpy, "-m", "megatrain", "--dry-run", script], capture_output=True, text=True, env=env())
    check(r.returncode == 0 and f"LD_PRELOAD={so}" in r.stdout, "python -m megatrain uses the installed library")
finally:
    shutil.rmtree(tmp, ignore_errors=True)
finish("test_wheel")
