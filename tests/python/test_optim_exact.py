"""Description: mt.AdamW / mt.Adam against torch.optim.AdamW / Adam
(foreach=False), bit for bit on a CPU, over 6 steps: two param groups with
different lr, betas, eps and weight_decay, a LambdaLR scheduler changing lr
every step, maximize on one run, amsgrad on another, clip_grad_norm_ on
another (the returned norm and the weights), and a parameter without a
gradient at one step (its step count stays). Exits 0 or 1."""
import mtenv  # noqa: F401  (first: the exactness recipe)
from mtenv import check, finish, same

import torch

from megatrain import optim as mto


def make_params(seed):
    g = torch.Generator().manual_seed(seed)
    shapes = [(64, 33), (33,), (5000,), (130, 70), (7,)]
    return [torch.randn(s, generator=g) for s in shapes]


def run(opt_cls, mt_cls, steps=6, clip=None, skip_at=None, **kw):
    base = make_params(1)
    tp = [torch.nn.Parameter(t.clone()) for t in base]
    mp = [torch.nn.Parameter(t.clone()) for t in base]

    def groups(ps):
        return [{"params": ps[:3]},
                {"params": ps[3:], "lr": 3e-3, "betas": (0.8, 0.95), "eps": 1e-6,
                 "weight_decay": 0.1}]
    topt = opt_cls(groups(tp), lr=1e-2, weight_decay=0.02, foreach=False, fused=False, **kw)
    mopt = mt_cls(groups(mp), lr=1e-2, weight_decay=0.02, **kw)
    lam = lambda s: 0.7 ** s  # noqa: E731
    tsch = torch.optim.lr_scheduler.LambdaLR(topt, lam)
    msch = torch.optim.lr_scheduler.LambdaLR(mopt, lam)
    gen = torch.Generator().manual_seed(2)
    for s in range(steps):
        for a, b in zip(tp, mp):
            g = torch.randn(a.shape, generator=gen) * 3
            a.grad, b.grad = g.clone(), g.clone()
        if skip_at == s:
            tp[1].grad = mp[1].grad = None
        if clip is not None:
            tn = torch.nn.utils.clip_grad_norm_([p for p in tp if p.grad is not None], clip,
                                                foreach=False)
            mn = mopt.clip_grad_norm_(clip)
            check(same(tn, mn), "%s clip norm step %d: torch %r mt %r"
                  % (mt_cls.__name__, s, float(tn), float(mn)))
        topt.step()
        mopt.step()
        tsch.step()
        msch.step()
        topt.zero_grad()
        mopt.zero_grad()
    for i, (a, b) in enumerate(zip(tp, mp)):
        check(same(a.data, b.data), "%s %r param %d differs (max |d| %g)"
              % (mt_cls.__name__, kw, i, float((a.data - b.data).abs().max())))
    sd = mopt.state_dict()
    tsd = topt.state_dict()
    for i in tsd["state"]:
        for k, v in tsd["state"][i].items():
            check(k in sd["state"][i] and same(v, sd["state"][i][k]),
                  "%s state[%d][%r] differs from torch's" % (mt_cls.__name__, i, k))


run(torch.optim.AdamW, mto.AdamW)
run(torch.optim.Adam, mto.Adam)
run(torch.optim.AdamW, mto.AdamW, maximize=True)
run(torch.optim.AdamW, mto.AdamW, amsgrad=True)
run(torch.optim.Adam, mto.Adam, amsgrad=True)
run(torch.optim.AdamW, mto.AdamW, clip=1.0)
run(torch.optim.AdamW, mto.AdamW, skip_at=2)
finish("test_optim_exact")
