"""megatrain's sitecustomize: megatrain-run and mt.init put this folder first
on PYTHONPATH, so Python imports this file at start (site.py imports the
first `sitecustomize` on sys.path, and only that one).

It does two things:
1. with MT_OPTIMIZER=host, arranges for torch.optim.AdamW/Adam to become
   megatrain's when torch is imported (megatrain/_patch.py; torch is not
   imported here);
2. runs the sitecustomize this one shadows, if there is one further along
   sys.path (Debian's /etc/python3.x, a virtual environment's, a user's),
   so that nothing the environment set up is lost.
Errors in 2 are reported as Python reports them for any sitecustomize.
"""
import importlib.machinery
import importlib.util
import os
import sys


def _megatrain_importable():
    try:
        import megatrain._patch  # noqa: F401
        return True
    except ImportError:
        return False


def _run():
    here = os.path.dirname(os.path.abspath(__file__))
    # A source checkout (python/megatrain/_site): the package is two levels up;
    # installed, it is on sys.path already. Appended, so it never shadows.
    pkg_root = os.path.dirname(os.path.dirname(here))
    if not _megatrain_importable():
        sys.path.append(pkg_root)
    from megatrain import _patch
    _patch.install()

    others = [p for p in sys.path if os.path.abspath(p or ".") != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", others)
    if spec is None or spec.loader is None:
        return
    mod = importlib.util.module_from_spec(spec)
    sys.modules["sitecustomize"] = mod
    spec.loader.exec_module(mod)


_run()
