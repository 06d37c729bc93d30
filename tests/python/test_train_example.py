"""Description: examples/train.py's tiny preset trains on a CPU: the loss
falls (mean of the last three steps at least 0.3 below the first step's);
a second --deterministic run, under megatrain-run (libmtalloc preloaded
into a CPU-only torch), repeats the losses bit for bit (float.hex) and
prints the stall share; the presets from
125m to 175b have the parameter counts their names say."""
import os
import re
import sys

from common import ROOT, check, finish, need_torch, run

need_torch()
TRAIN = os.path.join(ROOT, "examples", "train.py")
base = [TRAIN, "--size", "tiny", "--device", "cpu", "--deterministic", "--lr", "3e-3", "--report", "exact",
        "--micro-batch", "4", "--grad-accum", "2"]


def losses(r):
    return [float(m.group(1)) for m in re.finditer(r"^step \d+ loss (\S+) tokens/s \S+$", r.stdout, re.M)]


def exact(r):
    return [l for l in r.stdout.splitlines() if l.startswith("exact loss_")]


r = run([sys.executable] + base + ["--steps", "12"], timeout=300)
ls = losses(r)
ok = check(r.returncode == 0 and len(ls) == 12, f"12 steps ran (exit {r.returncode})")
if not ok:
    print(r.stdout[-2000:], r.stderr[-2000:])
if len(ls) == 12:
    last = sum(ls[-3:]) / 3
    check(last < ls[0] - 0.3, f"loss falls: first {ls[0]:.4f}, mean of the last three {last:.4f}")
check(re.search(r"^tokens/s [0-9.]+ \(mean over steps 2\.\.12\)$", r.stdout, re.M) is not None, "tokens/s printed")
check("mtalloc: not loaded" in r.stdout, "plain run says mtalloc is not loaded")
first = exact(r)[:3]

r3 = run([sys.executable, "-m", "megatrain", "--max-vram", "1G"] + base + ["--steps", "3"], timeout=300)
# a second process, under the library, gives the first three losses' bits
# again: --deterministic repeats, and mtalloc changes nothing on a CPU
check(r3.returncode == 0 and len(first) == 3 and exact(r3) == first,
      f"under megatrain-run, the same bits (exit {r3.returncode}): {exact(r3)} vs {first}")
check(re.search(r"^mtalloc: stall share [0-9.]+% ", r3.stdout, re.M) is not None, "stall share printed under mtalloc")

# the presets are what their names say (within 10%), built on the meta
# device: no memory, no time
import torch  # noqa: E402
sys.path.insert(0, os.path.dirname(TRAIN))
import train  # noqa: E402

for name, shape in train.PRESETS.items():
    if name in ("tiny", "small"):
        continue
    with torch.device("meta"):
        n = sum(p.numel() for p in train.build_model(torch, torch.nn, torch.nn.functional, *shape).parameters())
    want = float(name[:-1]) * (1e6 if name.endswith("m") else 1e9)
    check(abs(n - want) <= 0.1 * want, f"preset {name}: {n / 1e9:.3f}B parameters")

r4 = run([sys.executable, TRAIN, "--steps", "0"])
check(r4.returncode == 2 and "--steps must be at least 1" in r4.stderr, "bad --steps refused")
finish("test_train_example")
