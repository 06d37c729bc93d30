"""The C library, loaded once: ``from megatrain._lib import lib``.

``lib`` is a ``ctypes.CDLL`` of libmtalloc.so, found in this order:
the path in the environment variable ``MT_LIBRARY``; the wheel's own copy
next to this package (``megatrain/libmtalloc.so``); the build tree's
``build/preload/libmtalloc.so`` relative to the repository. Under
``LD_PRELOAD=libmtalloc.so`` the same file is already mapped and dlopen
returns that copy, so the optimizer and the interposer share one library.

(A minimal stand-in with the contract the packaging change keeps; the lead
keeps one of the two when merging.)
"""
import ctypes
import os

_here = os.path.dirname(os.path.abspath(__file__))


def _find():
    env = os.environ.get("MT_LIBRARY")
    if env:
        return env
    for path in (os.path.join(_here, "libmtalloc.so"),
                 os.path.join(_here, "..", "..", "build", "preload", "libmtalloc.so")):
        if os.path.exists(path):
            return os.path.normpath(path)
    raise OSError("megatrain: libmtalloc.so not found: set MT_LIBRARY to its path, "
                  "install the wheel, or build it (tools/setup.sh build)")


lib = ctypes.CDLL(_find())
