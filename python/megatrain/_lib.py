"""Finding and opening libmtalloc.so.

The contract other modules rely on:

    from megatrain._lib import lib      # a ctypes.CDLL of libmtalloc.so
    from megatrain._lib import library_path
    library_path()                      # its path, for LD_PRELOAD

Which file, first match wins:

1. the copy already in the process (it was preloaded): the same file is
   opened again, so dlopen hands back the loaded copy and its statistics
   and options are the ones that are interposing. Opening a second copy
   from another path would give a library that sees none of the process's
   CUDA calls;
2. the environment variable MT_LIBRARY (a path to the .so);
3. the wheel's own copy, installed beside this file (pip install .);
4. <repository>/build/preload/libmtalloc.so, for a source checkout.

Nothing is opened until `lib` is first used (module __getattr__), so
`import megatrain` is cheap and works where no library is built yet.
"""
import ctypes
import os

_HERE = os.path.dirname(os.path.abspath(__file__))
_NAME = "libmtalloc.so"


class LibraryNotFound(RuntimeError):
    """No libmtalloc.so where the package looks for it."""


def loaded_path():
    """The path of the libmtalloc*.so mapped into this process, or None."""
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                parts = line.split(None, 5)
                if len(parts) == 6 and os.path.basename(parts[5].strip()).startswith("libmtalloc"):
                    return parts[5].strip()
    except OSError:
        pass
    return None


def _candidates():
    """(where, path) in the order library_path() tries them, after the loaded copy."""
    env = os.environ.get("MT_LIBRARY")
    if env:
        yield "MT_LIBRARY", env
    yield "the wheel's copy", os.path.join(_HERE, _NAME)
    # python/megatrain/_lib.py -> the repository root is two levels above python/
    repo = os.path.dirname(os.path.dirname(_HERE))
    yield "the source checkout's build", os.path.join(repo, "build", "preload", _NAME)


def library_path():
    """The path of libmtalloc.so to open or preload (see the module's doc for
    the order). Raises LibraryNotFound naming every place looked at."""
    p = loaded_path()
    if p:
        return p
    tried = []
    for where, path in _candidates():
        if where == "MT_LIBRARY" and not os.path.isfile(path):
            # The user named a file: do not quietly fall back to another copy.
            raise LibraryNotFound(f"MT_LIBRARY={path} is not a file: point it at libmtalloc.so, or unset it")
        if os.path.isfile(path):
            return os.path.abspath(path)
        tried.append(f"{where} ({path})")
    raise LibraryNotFound(
        "libmtalloc.so not found; looked at: " + "; ".join(tried) +
        ". Install the package with `pip install .` from the mtalloc repository, "
        "build it with `meson setup build && ninja -C build`, or set MT_LIBRARY to the .so")


_lib = None


def _open():
    global _lib
    if _lib is None:
        path = library_path()
        try:
            _lib = ctypes.CDLL(path)
        except OSError as e:
            raise LibraryNotFound(f"cannot open {path}: {e}") from e
        _lib.mt_version.restype = ctypes.c_int
        _lib.mt_version.argtypes = []
        _lib.mt_stats_json.restype = ctypes.c_char_p
        _lib.mt_stats_json.argtypes = []
        _lib.mt_mark_iteration.restype = None
        _lib.mt_mark_iteration.argtypes = []
        _lib.mt_option_text.restype = ctypes.c_int
        _lib.mt_option_text.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_size_t]
    return _lib


def __getattr__(name):
    if name == "lib":
        return _open()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
