"""MT_OPTIMIZER=host for unmodified scripts: torch.optim.AdamW and
torch.optim.Adam become megatrain's (megatrain.optim), which run the step
on mtalloc's host thread pool.

How: megatrain-run (and mt.init's re-exec) put megatrain/_site first on
PYTHONPATH; Python imports the sitecustomize.py there at start, which calls
install() here. install() only adds a finder to sys.meta_path: torch is not
imported (that takes seconds and a script may never use it). When the
script imports torch, the finder wraps torch's loader; once torch/__init__
has run to the end (it imports torch.optim itself), the two names in
torch.optim are replaced before the script's own code sees the module, so
`torch.optim.AdamW(...)` and `from torch.optim import AdamW` both get
megatrain's. Patching at the end of torch's import, not of torch.optim's,
matters: torch.optim is imported half-way through torch/__init__, and
megatrain.optim needs a complete torch.

torch's own classes stay reachable as ORIGINALS['AdamW'] / ['Adam'].
"""
import importlib.abc
import importlib.machinery
import os
import sys

ORIGINALS = {}
_NAMES = ("AdamW", "Adam")


def wanted(env=None):
    """True when MT_OPTIMIZER asks for the host optimizer."""
    return (env if env is not None else os.environ).get("MT_OPTIMIZER", "off").strip().lower() == "host"


def patch_torch_optim():
    """Replaces torch.optim.AdamW/Adam by megatrain.optim's. Raises
    ImportError with the cause when megatrain.optim cannot be imported: the
    user asked for the host optimizer, and quietly training with torch's
    would hide it."""
    import torch.optim
    if ORIGINALS:
        return
    try:
        from megatrain import optim as mt_optim
    except ImportError as e:
        raise ImportError(f"MT_OPTIMIZER=host: megatrain.optim cannot be imported ({e}); "
                          "unset MT_OPTIMIZER (or set it to off) to train with torch's own optimizer") from e
    for n in _NAMES:
        ORIGINALS[n] = getattr(torch.optim, n)
        setattr(torch.optim, n, getattr(mt_optim, n))


class _Loader(importlib.abc.Loader):
    """torch's own loader, then the patch."""

    def __init__(self, inner):
        self.inner = inner

    def create_module(self, spec):
        return self.inner.create_module(spec)

    def exec_module(self, module):
        self.inner.exec_module(module)
        # torch's own loader back in its place: tools that inspect
        # torch.__loader__ / __spec__.loader (isinstance checks, resources)
        # see what they would without megatrain
        module.__loader__ = self.inner
        if getattr(module, "__spec__", None) is not None:
            module.__spec__.loader = self.inner
        patch_torch_optim()

    def __getattr__(self, name):  # get_resource_reader, is_package, ... as torch's loader has them
        return getattr(self.inner, name)


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path, target=None):
        if fullname != "torch":
            return None
        sys.meta_path.remove(self)  # once: torch is imported once per process
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None:
            for f in sys.meta_path:
                if hasattr(f, "find_spec"):
                    spec = f.find_spec(fullname, path, target)
                    if spec is not None:
                        break
        if spec is None or spec.loader is None:
            return spec
        spec.loader = _Loader(spec.loader)
        return spec


def install():
    """Arranges the patch for when torch is imported (at once if it already
    is). Does nothing unless MT_OPTIMIZER=host."""
    if not wanted():
        return
    if "torch" in sys.modules and hasattr(sys.modules["torch"], "optim"):
        patch_torch_optim()
        return
    if not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.insert(0, _Finder())
