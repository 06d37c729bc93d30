"""megatrain: PyTorch training on one GPU with models larger than its
memory, through libmtalloc (LD_PRELOAD) and its host optimizer.

    import megatrain as mt
    mt.init(max_vram_gb=20, offload_dir="/nvme", optimizer_compression=True)
    opt = mt.AdamW(model.parameters(), lr=1e-4)
    ...
    print(mt.stats()["stall_ns"])

or, with no code change, `megatrain-run --max-vram 20G train.py ARGS`.

Nothing heavy happens at import: torch, transformers and the library are
loaded when first needed (mt.AdamW, mt.Adam and mt.Trainer resolve on first
access, from megatrain.optim and megatrain.trainer).
"""
import contextlib
import ctypes
import json
import os
import sys

from . import _env
from ._env import RECOMMENDED_COMPRESSION
from ._lib import LibraryNotFound, library_path, loaded_path

__all__ = ["init", "stats", "mark_iteration", "trace", "under_mtalloc", "library_path",
           "AdamW", "Adam", "Trainer", "RECOMMENDED_COMPRESSION", "LibraryNotFound"]


def under_mtalloc():
    """True when libmtalloc interposes in this process: it is mapped, and its
    symbols are in the global scope, as LD_PRELOAD puts them. A copy that
    ctypes opened later (megatrain._lib, RTLD_LOCAL) is mapped too but sees
    none of the CUDA calls, so it does not count."""
    if loaded_path() is None:
        return False
    try:
        ctypes.CDLL(None).mt_version
    except AttributeError:
        return False
    return True


def _cuda_initialized():
    torch = sys.modules.get("torch")
    if torch is None:
        return False
    try:
        return bool(torch.cuda.is_initialized())
    except Exception:  # a half-imported torch: it cannot have started CUDA either
        return False


def _effective(name):
    """The running library's value of option name (MT_ prefix), as text."""
    from ._lib import lib
    buf = ctypes.create_string_buffer(4200)
    n = lib.mt_option_text(name.encode(), buf, len(buf))
    return buf.value.decode() if n >= 0 else None


def _matches(options):
    """The MT_* options that the running library has a different value for."""
    differ = []
    for k, want in options.items():
        have = _effective(k)
        if k in ("MT_MAX_VRAM", "MT_MAX_HOST"):
            same = have is not None and int(have) == int(want)
        else:
            same = (have or "").lower() == want.lower()
        if not same:
            differ.append(f"{k}: running {have!r}, asked {want!r}")
    return differ


def _reexec_argv():
    """The command line that started this process, to start it again; or a
    RuntimeError where it cannot be started again the same way."""
    if "ipykernel" in sys.modules:
        raise RuntimeError("megatrain.init: a Jupyter kernel cannot be re-executed under mtalloc; start the "
                           "kernel with LD_PRELOAD set (megatrain.library_path() gives the path) or run "
                           "the code as a script with megatrain-run")
    argv = list(getattr(sys, "orig_argv", []))
    if len(argv) < 2 or sys.argv[:1] in ([""], ["-"]):
        raise RuntimeError("megatrain.init: this Python (interactive, or reading its program from stdin) "
                           "cannot be started again with the same arguments; run a script with "
                           "`megatrain-run script.py`, or set LD_PRELOAD to megatrain.library_path()")
    return [sys.executable] + argv[1:]


def init(offload_dir=None, max_vram_gb=None, max_host_gb=None, optimizer_compression=None, trace=None):
    """Runs this process under mtalloc with these options.

    offload_dir: folder(s) for the NVMe tier (MT_OFFLOAD_DIR; ':' separated).
    max_vram_gb, max_host_gb: GPU and pinned host budgets in GiB (MT_MAX_VRAM,
        MT_MAX_HOST; numbers, e.g. 20 or 0.5).
    optimizer_compression: host optimizer state (MT_OPTIMIZER_COMPRESSION):
        False = FP32, True = RECOMMENDED_COMPRESSION ('8bit'), '8bit', '4bit'.
    trace: file to record a trace into (MT_TRACE; `mt-trace` reads it).
    An argument left at None keeps the environment's MT_* value (or the
    library's default). Bad values raise ValueError/TypeError naming the
    argument.

    libmtalloc reads its options once, at start, and can interpose only
    when loaded before everything else (a library loaded later loses to
    glibc's dlsym and the CUDA runtime's own handle to the driver). So:
    - already under mtalloc with the same options: sets the MT_* variables
      (children inherit them) and returns;
    - otherwise, before CUDA is initialised: re-executes this process (the
      same interpreter and command line, sys.orig_argv) with the options,
      LD_PRELOAD and megatrain's sitecustomize; the script starts again from
      the top and init() then returns. Output printed before init() appears
      twice: call init() first. An environment marker
      (MEGATRAIN_REEXECED=<pid>) stops a second re-exec: if the library is
      still not active after one, init raises RuntimeError;
    - after CUDA is initialised (torch.cuda.is_initialized()): raises
      RuntimeError; start the process under mtalloc instead (megatrain-run,
      or call init() before any CUDA work).
    """
    options = {}
    if offload_dir is not None:
        options["MT_OFFLOAD_DIR"] = _env.path_option("offload_dir", offload_dir, must_be_dir=True)
    if max_vram_gb is not None:
        options["MT_MAX_VRAM"] = _env.gib_size("max_vram_gb", max_vram_gb)
    if max_host_gb is not None:
        options["MT_MAX_HOST"] = _env.gib_size("max_host_gb", max_host_gb)
    if optimizer_compression is not None:
        options["MT_OPTIMIZER_COMPRESSION"] = _env.compression(optimizer_compression)
    if trace is not None:
        options["MT_TRACE"] = _env.path_option("trace", trace)

    if under_mtalloc():
        differ = _matches(options)
        if not differ:
            os.environ.update(options)
            return
        why = "the running mtalloc was started with other options (" + "; ".join(differ) + ")"
    else:
        why = "this process was not started under mtalloc"
    if _cuda_initialized():
        raise RuntimeError(f"megatrain.init: {why}, and CUDA is already initialised, so it cannot be "
                           "restarted under mtalloc: call megatrain.init() before any CUDA work "
                           "(first thing in the script), or start it with `megatrain-run [options] "
                           "script.py`, or with LD_PRELOAD=" + _safe_library_path() + " and MT_* variables")
    if os.environ.get(_env.REEXEC_MARKER) == str(os.getpid()):
        raise RuntimeError(f"megatrain.init: {why}, although this process was already re-executed under "
                           f"LD_PRELOAD={os.environ.get('LD_PRELOAD', '')} (a loop stopped by "
                           f"{_env.REEXEC_MARKER}); the loader did not preload the library: check that "
                           "the file loads (`LD_PRELOAD=... /bin/true`) and that the program is not setuid")
    argv = _reexec_argv()
    env = _env.preload_env(os.environ, options, library_path())
    # exec keeps the process id: the marker names this process, so a child
    # that inherits it (another script, its own init) is not mistaken for a loop.
    env[_env.REEXEC_MARKER] = str(os.getpid())
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(argv[0], argv, env)


def _safe_library_path():
    try:
        return library_path()
    except LibraryNotFound:
        return "libmtalloc.so"


def stats():
    """mtalloc's statistics since start as a dict (mt_stats_json, mtalloc.h:
    bytes each way, fetches, evictions, stalls and stall_ns, resident and
    peak bytes, launches, ...). {} before the library has intercepted
    anything, and always {} in a process not started under mtalloc."""
    from ._lib import lib
    return json.loads(lib.mt_stats_json().decode())


def mark_iteration():
    """Marks the start of a training iteration in the trace (mt_mark_iteration);
    does nothing when not tracing. Call it at the top of each step."""
    from ._lib import lib
    lib.mt_mark_iteration()


@contextlib.contextmanager
def trace(path):
    """with mt.trace("run.trace"): ... -- records a trace of the block.

    Honest limits: libmtalloc reads MT_TRACE once, at start, opens the file
    when its pager starts (the first CUDA call it intercepts), and has no
    call to start or stop recording. So:
    - in a process under mtalloc tracing into `path`: the block is marked
      with an iteration mark at entry and one at exit (mt_mark_iteration),
      so `mt-trace summary` shows it as its own iterations; records from
      outside the block are in the file too;
    - in a process not under mtalloc: this is mt.init(trace=path) (re-exec,
      with init's rules: only before CUDA is initialised);
    - under mtalloc tracing elsewhere or not at all: RuntimeError, because
      the file cannot be changed now; set MT_TRACE or megatrain-run --trace.
    """
    want = _env.path_option("trace", path)
    if not under_mtalloc():
        init(trace=want)  # re-executes; returns only if nothing had to change
    have = _effective("MT_TRACE") or ""
    if not have or os.path.abspath(have) != want:
        raise RuntimeError(f"megatrain.trace({path!r}): this process traces "
                           f"{'into ' + repr(have) if have else 'nothing'}, and mtalloc opens its trace "
                           "file only at start; start it with MT_TRACE=" + want +
                           " (megatrain-run --trace FILE, or mt.init(trace=...) first thing)")
    mark_iteration()
    try:
        yield want
    finally:
        mark_iteration()


def __getattr__(name):
    # Lazy: torch is imported only when the optimizer or the Trainer is asked for.
    if name in ("AdamW", "Adam"):
        from . import optim
        return getattr(optim, name)
    if name == "Trainer":
        from .trainer import Trainer
        return Trainer
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
