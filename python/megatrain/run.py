"""megatrain-run: starts a Python training script under mtalloc, in the
spirit of torchrun.

    megatrain-run [options] [--] script.py [script args...]
    megatrain-run [options] -m module [module args...]
    python -m megatrain [options] script.py ...      (the same)

It sets LD_PRELOAD (libmtalloc.so first, an existing preload kept after
it), the MT_* variables the options name, and megatrain's sitecustomize
folder first on PYTHONPATH (MT_OPTIMIZER=host: torch.optim.AdamW/Adam
become megatrain's; an existing sitecustomize still runs), then replaces
itself with this Python running the script. Everything from the script on
is passed through untouched, options included (torchrun's own arguments,
`--`, anything). MT_* variables already in the environment are kept unless
an option sets them.
"""
import argparse
import os
import sys

from . import _env
from ._lib import LibraryNotFound, library_path

# options that take a value (so the value is not taken for the script)
_VALUED = {"--max-vram", "--max-host", "--offload-dir", "--optimizer-compression", "--optimizer",
           "--trace", "--library"}


def _parser():
    p = argparse.ArgumentParser(
        prog="megatrain-run",
        usage="megatrain-run [options] [--] script.py [args...] | -m module [args...]",
        description="Run a Python training script under mtalloc (LD_PRELOAD=libmtalloc.so) with "
                    "the MT_* options below; the script and its arguments pass through untouched.")
    p.add_argument("--max-vram", metavar="SIZE", help="GPU budget, e.g. 20G (MT_MAX_VRAM)")
    p.add_argument("--max-host", metavar="SIZE", help="pinned host budget, e.g. 256G (MT_MAX_HOST)")
    p.add_argument("--offload-dir", metavar="DIR", help="NVMe tier folder(s), ':' separated (MT_OFFLOAD_DIR)")
    p.add_argument("--optimizer", metavar="off|host",
                   help="host: torch.optim.AdamW/Adam run on mtalloc's host thread pool (MT_OPTIMIZER)")
    p.add_argument("--optimizer-compression", metavar="none|8bit|4bit|on",
                   help=f"host optimizer state; on = {_env.RECOMMENDED_COMPRESSION} (MT_OPTIMIZER_COMPRESSION)")
    p.add_argument("--trace", metavar="FILE", help="record a trace for mt-trace (MT_TRACE)")
    p.add_argument("--stats", action="store_true", help="print mtalloc's statistics at exit (MT_STATS=1)")
    p.add_argument("--library", metavar="PATH", help="libmtalloc.so to preload (default: MT_LIBRARY, the "
                   "installed copy, then build/preload/ of a source checkout)")
    p.add_argument("--dry-run", action="store_true",
                   help="print the environment changes and the command instead of running it")
    return p


def split(argv):
    """(launcher options, command) where command is ['script', args...] or
    ['-m', 'module', args...]; the command is [] when none was given."""
    i = 0
    while i < len(argv):
        a = argv[i]
        if a == "--":
            return argv[:i], argv[i + 1:]
        if a == "-m":
            return argv[:i], argv[i:]
        if not a.startswith("-"):
            return argv[:i], argv[i:]
        if a in _VALUED:
            i += 1  # its value
        i += 1
    return argv, []


def build(argv, environ=None):
    """(executable argv, environment) for argv, or SystemExit with a message."""
    opts, cmd = split(argv)
    p = _parser()
    a = p.parse_args(opts)
    if not cmd or cmd == ["-m"]:
        p.error("no script given: megatrain-run [options] script.py [args...]")
    env_in = dict(os.environ if environ is None else environ)
    options = {}
    try:
        if a.max_vram is not None:
            options["MT_MAX_VRAM"] = _env.check_size("--max-vram", a.max_vram)
        if a.max_host is not None:
            options["MT_MAX_HOST"] = _env.check_size("--max-host", a.max_host)
        if a.offload_dir is not None:
            options["MT_OFFLOAD_DIR"] = _env.path_option("--offload-dir", a.offload_dir, must_be_dir=True)
        if a.optimizer is not None:
            options["MT_OPTIMIZER"] = _env.optimizer(a.optimizer)
        if a.optimizer_compression is not None:
            options["MT_OPTIMIZER_COMPRESSION"] = _env.compression(a.optimizer_compression)
        if a.trace is not None:
            options["MT_TRACE"] = _env.path_option("--trace", a.trace)
        if a.stats:
            options["MT_STATS"] = "1"
        if a.library is not None:
            if not os.path.isfile(a.library):
                raise ValueError(f"--library {a.library!r}: no such file")
            lib = os.path.abspath(a.library)
        else:
            if "MT_LIBRARY" in env_in:
                os.environ["MT_LIBRARY"] = env_in["MT_LIBRARY"]
            lib = library_path()
    except (ValueError, TypeError, LibraryNotFound) as e:
        p.error(str(e))
    env = _env.preload_env(env_in, options, lib)
    return [sys.executable] + cmd, env


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    cmd, env = build(argv)
    if "--dry-run" in split(argv)[0]:
        for k in sorted(env):
            if os.environ.get(k) != env[k]:
                print(f"{k}={env[k]}")
        print(" ".join(cmd))
        return 0
    sys.stdout.flush()
    os.execve(cmd[0], cmd, env)


if __name__ == "__main__":
    sys.exit(main())
