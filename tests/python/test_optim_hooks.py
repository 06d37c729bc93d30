"""Description: gradient offload through post-accumulate-grad hooks
(offload_grads=True on CPU parameters): each parameter's update is queued
during backward, and the weights equal the plain path's (step() does all
the work) and torch.optim.AdamW's bit for bit over 5 steps with a
scheduler; with gradient accumulation over 3 micro-steps, told by
grad_accum_steps=3 and by accumulating(True/False), the same again; with
max_grad_norm the hooks stand aside and clipping equals torch's. The
overlap is measured: in the hooks runs some optimizer work finished before
step() was called (last_step_overlap_fraction > 0 at some step; every
step's is printed); in the plain run none did. Exits 0 or 1."""
import mtenv  # noqa: F401
from mtenv import check, finish, same

import torch

from megatrain import optim as mto


def model():
    torch.manual_seed(0)
    layers = []
    for _ in range(6):
        layers += [torch.nn.Linear(384, 384), torch.nn.Tanh()]
    return torch.nn.Sequential(*layers, torch.nn.Linear(384, 10))


def data(s, k):
    g = torch.Generator().manual_seed(1000 * s + k)
    return torch.randn(32, 384, generator=g), torch.randint(0, 10, (32,), generator=g)


def train(kind, accum=1, mode=None, clip=None, steps=5):
    m = model()
    if kind == "torch":
        opt = torch.optim.AdamW(m.parameters(), lr=3e-3, foreach=False, fused=False)
    else:
        opt = mto.AdamW(m.parameters(), lr=3e-3, threads=2, offload_grads=(kind == "hooks"),
                        grad_accum_steps=accum if mode == "counter" else 1,
                        max_grad_norm=clip)
    sch = torch.optim.lr_scheduler.ExponentialLR(opt, 0.8)
    fractions = []
    for s in range(steps):
        for k in range(accum):
            if mode == "flag":
                opt.accumulating(k < accum - 1)
            x, y = data(s, k)
            (torch.nn.functional.cross_entropy(m(x), y) / accum).backward()
        if kind == "torch" and clip is not None:
            torch.nn.utils.clip_grad_norm_(m.parameters(), clip, foreach=False)
        opt.step()
        sch.step()
        opt.zero_grad()
        if kind != "torch":
            fractions.append(opt.last_step_overlap_fraction)
    return [p.detach().clone() for p in m.parameters()], fractions


def compare(name, a, b):
    for i, (x, y) in enumerate(zip(a, b)):
        check(same(x, y), "%s: param %d differs (max |d| %g)" % (name, i,
                                                                 float((x - y).abs().max())))


ref, _ = train("torch")
plain, fp = train("plain")
hooks, fh = train("hooks")
compare("plain vs torch", plain, ref)
compare("hooks vs plain", hooks, plain)
print("overlap fraction per step: plain %s, hooks %s" % (
    " ".join("%.2f" % f for f in fp), " ".join("%.2f" % f for f in fh)))
check(all(f == 0 for f in fp), "plain run reports overlap")
# any step: on a loaded machine one step's backward may end before a
# worker finishes a task, but not every step's
check(max(fh) > 0, "hooks run: no update work finished before step()")

ref3, _ = train("torch", accum=3)
for mode in ("counter", "flag"):
    h3, f3 = train("hooks", accum=3, mode=mode)
    compare("accumulation (%s) vs torch" % mode, h3, ref3)
    check(max(f3) > 0, "accumulation (%s): no update work finished before step()" % mode)
    print("accumulation (%s) overlap: %s" % (mode, " ".join("%.2f" % f for f in f3)))

refc, _ = train("torch", clip=0.5)
hc, fc = train("hooks", clip=0.5)
compare("hooks + max_grad_norm vs torch clip_grad_norm_", hc, refc)
check(all(f == 0 for f in fc), "max_grad_norm: the hooks queued steps before the norm")
finish("test_optim_hooks")
