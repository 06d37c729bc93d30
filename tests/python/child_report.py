"""Prints, as one JSON line, what a test wants to know about the process it
runs in: argv, the MT_*/LD_PRELOAD/PYTHONPATH environment, whether
libmtalloc is mapped and interposing. With --init, calls megatrain.init
first (options from the MEGATRAIN_TEST_INIT environment variable, JSON)."""
import json
import os
import sys

if "--init" in sys.argv:
    import megatrain as mt
    print("before-init pid %d mapped %s" % (os.getpid(), "libmtalloc" in open("/proc/self/maps").read()),
          flush=True)
    mt.init(**json.loads(os.environ.get("MEGATRAIN_TEST_INIT", "{}")))
out = {
    "argv": sys.argv[1:],
    "pid": os.getpid(),
    "env": {k: v for k, v in os.environ.items()
            if k.startswith("MT_") or k in ("LD_PRELOAD", "PYTHONPATH", "MEGATRAIN_REEXECED", "SITE_MARK")},
    "mapped": "libmtalloc" in open("/proc/self/maps").read(),
    "torch_imported": "torch" in sys.modules,
}
try:
    import megatrain as mt
    out["under"] = mt.under_mtalloc()
    if out["under"]:  # what the running library read at start
        out["effective"] = {k: mt._effective(k) for k in
                            ("MT_MAX_VRAM", "MT_MAX_HOST", "MT_STATS", "MT_OPTIMIZER_COMPRESSION", "MT_TRACE")}
except ImportError as e:
    out["under"] = str(e)
print("REPORT " + json.dumps(out))
