"""Shared set-up of the python suite's scripts: imported first, before torch.

Pins the bit-exact recipe of libmtalloc/optim/adam.h, as
tests/optim/adam_exact.sh does: ATEN_CPU_CAPABILITY=default (torch's CPU
kernels then never fuse a multiply-add), MT_OPTIM_KERNEL=mkl (the host
kernel takes its square roots from MKL's vmsSqrt, as torch's CPU sqrt
does), and libmkl_rt.so.2 from this Python's prefix loaded globally so the
library's dlopen("libmkl_rt.so.2") finds it. torch or MKL missing is a
failure (exit 1), never a skip: tools/setup-python.sh installs both.
"""
import ctypes
import glob
import os
import sys

os.environ["ATEN_CPU_CAPABILITY"] = "default"
os.environ.setdefault("MT_OPTIM_KERNEL", "mkl")
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))

try:
    import torch  # noqa: F401
except ImportError:
    print("FAIL: torch is not importable by %s; tools/setup-python.sh installs it"
          % sys.executable)
    sys.exit(1)
mkl = glob.glob(sys.prefix + "/lib/libmkl_rt.so.2")
if os.environ["MT_OPTIM_KERNEL"] == "mkl":
    if not mkl:
        print("FAIL: libmkl_rt.so.2 not under %s/lib; tools/setup-python.sh installs mkl"
              % sys.prefix)
        sys.exit(1)
    ctypes.CDLL(mkl[0], mode=ctypes.RTLD_GLOBAL)

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def same(a, b):
    """Bit-identical tensors (NaN payloads included)."""
    return a.dtype == b.dtype and a.shape == b.shape and torch.equal(
        a.contiguous().view(torch.int32 if a.element_size() == 4 else torch.int16),
        b.contiguous().view(torch.int32 if b.element_size() == 4 else torch.int16))


def finish(name):
    if failures:
        print("%s: %d FAILED" % (name, len(failures)))
        sys.exit(1)
    print("%s: ok" % name)
    sys.exit(0)
