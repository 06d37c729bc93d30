"""The MT_* options as Python sees them: validation and the environment a
process needs to run under mtalloc.

libmtalloc reads its options once, at start, from the environment
(libmtalloc/options.c); a bad value there is only a warning and the default
is used. mtalloc.h exposes no validation call, so the rules below mirror
options.c's parsers (sizes: digits with an optional binary K/M/G/T suffix
and B/iB; choices from the option table) and fail loudly instead: a launcher
or mt.init that silently ran with a default budget would be worse than one
that refuses. The library still has the last word: after mt.init's
re-exec, init compares what the running library read (mt_option_text) with
what it asked for, and a value the library did not accept is an error there.

Used by megatrain.init (in-process) and megatrain-run (the launcher); both
build the child's environment with preload_env().
"""
import os
import re

# The codec that optimizer_compression=True (and --optimizer-compression on)
# picks. 8-bit block-wise m and v: a quarter of FP32 state, and training
# within noise of FP32 (the bitsandbytes result); 4-bit halves the state
# again at a measurable cost in loss, so it stays opt-in. megatrain.optim's
# compression=True is the same. A change here changes what True means: say
# so in the README's Python section.
RECOMMENDED_COMPRESSION = "8bit"

# MT_OPTIMIZER_COMPRESSION's values in libmtalloc/internal.h, less the
# experimental 2bit, which the Python API does not offer.
COMPRESSION_CHOICES = ("none", "8bit", "4bit")
OPTIMIZER_CHOICES = ("off", "host")

# Marks a process that megatrain.init re-executed under LD_PRELOAD: a second
# re-exec would loop forever if the preload keeps failing.
REEXEC_MARKER = "MEGATRAIN_REEXECED"

_SIZE = re.compile(r"^[0-9]+([KMGTkmgt](i?[Bb])?|[Bb])?$")
_HERE = os.path.dirname(os.path.abspath(__file__))
SITE_DIR = os.path.join(_HERE, "_site")


def check_size(name, text):
    """text if it is a size libmtalloc accepts (e.g. 20G, 512M, 1073741824);
    else ValueError naming the option and the accepted form."""
    if not isinstance(text, str) or not _SIZE.match(text):
        raise ValueError(f"{name}={text!r} is not a size: use a number of bytes with an optional "
                         "binary K, M, G or T suffix, e.g. 20G")
    return text


def gib_size(name, value):
    """A size given in GiB as a number (mt.init's *_gb arguments) as the text
    libmtalloc reads (bytes). None stays None."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be a number of GiB (e.g. 20 or 0.5), not {type(value).__name__} {value!r}")
    if not value > 0 or value != value or value == float("inf"):
        raise ValueError(f"{name}={value!r}: must be a positive, finite number of GiB")
    b = int(value * (1 << 30))
    if b < (1 << 20):
        raise ValueError(f"{name}={value!r} is under 1 MiB: give the budget in GiB (e.g. 20 for 20 GiB)")
    return str(b)


def compression(value):
    """optimizer_compression as MT_OPTIMIZER_COMPRESSION's value: False/None
    -> none, True -> RECOMMENDED_COMPRESSION, or '8bit'/'4bit'/'none'."""
    if value is None or value is False:
        return "none"
    if value is True:
        return RECOMMENDED_COMPRESSION
    if isinstance(value, str) and value.lower() in COMPRESSION_CHOICES:
        return value.lower()
    if isinstance(value, str) and value.lower() in ("on", "true", "yes", "1"):
        return RECOMMENDED_COMPRESSION
    if isinstance(value, str) and value.lower() in ("off", "false", "no", "0"):
        return "none"
    raise ValueError(f"optimizer_compression={value!r}: use False, True (= {RECOMMENDED_COMPRESSION!r}), "
                     "'8bit' or '4bit'")


def optimizer(value):
    if isinstance(value, str) and value.lower() in OPTIMIZER_CHOICES:
        return value.lower()
    raise ValueError(f"optimizer={value!r}: use 'off' (the framework's own optimizer) or "
                     "'host' (torch.optim.AdamW/Adam run on mtalloc's host thread pool)")


def path_option(name, value, must_be_dir=False):
    if value is None:
        return None
    if not isinstance(value, (str, os.PathLike)):
        raise TypeError(f"{name} must be a path, not {type(value).__name__} {value!r}")
    p = os.fspath(value)
    if not p:
        raise ValueError(f"{name} is empty: give a path, or leave it out")
    if must_be_dir:
        for d in p.split(":"):
            if not os.path.isdir(d):
                raise ValueError(f"{name}={p!r}: {d!r} is not a directory (create it first; "
                                 "several folders are ':' separated)")
        p = ":".join(os.path.abspath(d) for d in p.split(":"))
    else:
        parent = os.path.dirname(os.path.abspath(p))
        if not os.path.isdir(parent):
            raise ValueError(f"{name}={p!r}: its folder {parent!r} does not exist")
        p = os.path.abspath(p)
    return p


def preload_env(env, options, lib_path):
    """A copy of env for a process to start under mtalloc: options (MT_* ->
    text, None entries left out) set, lib_path first in LD_PRELOAD (an
    existing preload is kept after it), and the sitecustomize folder first on
    PYTHONPATH so that MT_OPTIMIZER=host can patch torch.optim
    (megatrain/_site/sitecustomize.py)."""
    out = dict(env)
    for k, v in options.items():
        if v is not None:
            out[k] = v
    pre = [p for p in re.split(r"[: ]", out.get("LD_PRELOAD", "")) if p]
    # the same library twice would load one copy; keep the list as given otherwise
    pre = [p for p in pre if os.path.abspath(p) != os.path.abspath(lib_path)]
    out["LD_PRELOAD"] = ":".join([lib_path] + pre)
    pp = [p for p in out.get("PYTHONPATH", "").split(os.pathsep) if p and p != SITE_DIR]
    out["PYTHONPATH"] = os.pathsep.join([SITE_DIR] + pp)
    return out
