"""Shared by the python suite's tests (tests/python/meson.build): paths from
the environment meson gives every test, a subprocess runner, and check().

Each test is a plain script (pytest is not a dependency): exit 0 pass,
1 fail, 77 skip (meson counts 77 as a skip).
"""
import os
import subprocess
import sys

ROOT = os.environ["MEGATRAIN_ROOT"]          # the source tree
LIB = os.environ["MT_LIBRARY"]               # build/preload/libmtalloc.so
MTTRACE = os.environ.get("MT_TRACE_TOOL", "")
PYDIR = os.path.join(ROOT, "python")
sys.path.insert(0, PYDIR)

failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        failures.append(what)
    return cond


def env(**kw):
    """os.environ with PYTHONPATH = the source tree's python/ and kw set (None unsets)."""
    e = dict(os.environ)
    e["PYTHONPATH"] = PYDIR
    for k in ("LD_PRELOAD", "MT_OPTIMIZER", "MT_TRACE", "MEGATRAIN_REEXECED"):
        e.pop(k, None)
    for k, v in kw.items():
        if v is None:
            e.pop(k, None)
        else:
            e[k] = v
    return e


def run(args, timeout=120, **kw):
    """subprocess.run of args with env(**kw); stdout and stderr as text."""
    r = subprocess.run(args, env=env(**kw), capture_output=True, text=True, timeout=timeout)
    return r


def need_torch():
    """torch is a dependency of these tests (tools/setup-python.sh installs it):
    missing is a failure, not a skip."""
    try:
        import torch  # noqa: F401
    except ImportError as e:
        print(f"FAIL torch does not import ({e}): run tools/setup-python.sh")
        sys.exit(1)


def has_optim():
    return os.path.isfile(os.path.join(PYDIR, "megatrain", "optim.py"))


def finish(name):
    if failures:
        print(f"{name}: {len(failures)} check(s) failed")
        sys.exit(1)
    print(f"{name}: ok")
    sys.exit(0)
