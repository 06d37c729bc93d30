"""Description: unmodified scripts and MT_OPTIMIZER=host. A script that only
uses torch.optim.AdamW / Adam, started by megatrain-run, gets megatrain's
classes (megatrain.optim) with MT_OPTIMIZER=host (or --optimizer host) and
torch's without; `from torch.optim import AdamW` too; torch is not imported
by the mechanism itself; a sitecustomize already on the path still runs.
Skips (77) only when python/megatrain/optim.py is not in the tree (it comes
from another worktree), after checking that the host setting then fails
loudly instead of quietly using torch's optimizer."""
import os
import shutil
import sys
import tempfile

from common import check, failures, finish, has_optim, need_torch, run

HERE = os.path.dirname(os.path.abspath(__file__))
CHILD = os.path.join(HERE, "child_report.py")
need_torch()

tmp = tempfile.mkdtemp(prefix="mt-patch-test.")
try:
    script = os.path.join(tmp, "uses_torch_optim.py")
    with open(script, "w") as f:
        f.write("import torch\n"
                "from torch.optim import AdamW as A\n"
                "print('CLS', torch.optim.AdamW.__module__, torch.optim.Adam.__module__, A.__module__)\n")
    user_site = os.path.join(tmp, "usersite")
    os.mkdir(user_site)
    with open(os.path.join(user_site, "sitecustomize.py"), "w") as f:
        f.write("import os\nos.environ['SITE_MARK'] = 'ran'\n")

    def cls(r):
        for l in r.stdout.splitlines():
            if l.startswith("CLS "):
                return l.split()[1:]
        print(r.stdout, r.stderr)
        return None

    r = run([sys.executable, "-m", "megatrain", script])
    check(cls(r) == ["torch.optim.adamw", "torch.optim.adam", "torch.optim.adamw"],
          f"without MT_OPTIMIZER=host: torch's classes {cls(r)}")

    # the mechanism alone does not import torch; an existing sitecustomize still runs
    pp = os.pathsep.join([user_site, os.path.join(os.path.dirname(HERE), "..", "python")])
    r = run([sys.executable, "-m", "megatrain", "--optimizer", "host", CHILD], PYTHONPATH=pp)
    rep = next((l for l in r.stdout.splitlines() if l.startswith("REPORT ")), "")
    check('"torch_imported": false' in rep, "MT_OPTIMIZER=host does not import torch by itself")
    check('"SITE_MARK": "ran"' in rep, "the sitecustomize megatrain's shadows still runs")

    if not has_optim():
        r = run([sys.executable, "-m", "megatrain", "--optimizer", "host", script])
        check(r.returncode != 0 and "MT_OPTIMIZER=host: megatrain.optim cannot be imported" in r.stderr,
              "without megatrain.optim, MT_OPTIMIZER=host fails loudly at import torch")
        if failures:
            finish("test_optim_patch")
        print("test_optim_patch: skipped: python/megatrain/optim.py is not in this tree "
              "(it comes from the wt-opt worktree); the class identity was not checked")
        sys.exit(77)

    want = ["megatrain.optim", "megatrain.optim", "megatrain.optim"]
    r = run([sys.executable, "-m", "megatrain", "--optimizer", "host", script])
    check(cls(r) == want, f"--optimizer host: megatrain's classes {cls(r)}")
    r = run([sys.executable, "-m", "megatrain", script], MT_OPTIMIZER="host")
    check(cls(r) == want, f"MT_OPTIMIZER=host in the environment: megatrain's classes {cls(r)}")
finally:
    shutil.rmtree(tmp, ignore_errors=True)
finish("test_optim_patch")
