"""Description: mt.AdamW's state_dict round-trips through torch.save /
torch.load and training resumes bit-identically: a run of 8 steps equals a
run of 4 steps, a checkpoint (model and optimizer state_dicts saved to a
file), a fresh model and optimizer loaded from it, and 4 more steps. For
FP32 state (torch-shaped tensors: 'step' a float32 tensor, exp_avg,
exp_avg_sq), 8-bit and 4-bit state (raw codes and scales), bf16
parameters (their FP32 master), amsgrad, and the large-model form
(checkpoint_threshold_bytes=0: the dict refers to mtalloc's checkpoint
file). A 4-bit dict loaded into an 8-bit optimizer is refused, and so
is a 4-bit dict of format 1 (before exp_avg_sq's power-of-two map); bf16
weights changed after the optimizer was created are what its first step
starts from; a torch.optim.AdamW checkpoint resumes under mt.AdamW bit for
bit. Exits 0 or 1.
"""
import os
import tempfile

import mtenv  # noqa: F401
from mtenv import check, finish, same

import torch

from megatrain import optim as mto

tmp = tempfile.mkdtemp(prefix="mt_resume_")


def model(dtype):
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(64, 96), torch.nn.ReLU(), torch.nn.Linear(96, 8))
    return m.to(dtype)


def batch(s):
    g = torch.Generator().manual_seed(100 + s)
    return torch.randn(16, 64, generator=g), torch.randint(0, 8, (16,), generator=g)


def train(m, opt, sched, lo, hi, dtype):
    for s in range(lo, hi):
        x, y = batch(s)
        loss = torch.nn.functional.cross_entropy(m(x.to(dtype)).float(), y)
        loss.backward()
        opt.step()
        sched.step()
        opt.zero_grad()


def make(dtype, **kw):
    m = model(dtype)
    opt = mto.AdamW(m.parameters(), lr=1e-2, threads=2, checkpoint_dir=tmp, **kw)
    sched = torch.optim.lr_scheduler.StepLR(opt, 2, 0.5)
    return m, opt, sched


def case(name, dtype=torch.float32, **kw):
    m1, o1, s1 = make(dtype, **kw)
    train(m1, o1, s1, 0, 8, dtype)
    m2, o2, s2 = make(dtype, **kw)
    train(m2, o2, s2, 0, 4, dtype)
    path = os.path.join(tmp, name + ".pt")
    sd = o2.state_dict()
    torch.save({"model": m2.state_dict(), "opt": sd, "sched": s2.state_dict()}, path)
    if kw.get("checkpoint_threshold_bytes") == 0:
        check("mt_checkpoint" in sd and not sd["state"], name + ": no file reference")
    elif kw.get("compression"):
        check(any(k.endswith("_codes") for st in sd["state"].values() for k in st),
              name + ": compressed state not stored raw")
    else:
        st = sd["state"][0]
        check(st["step"].dtype == torch.float32 and st["step"].dim() == 0 and
              st["exp_avg"].shape == next(m2.parameters()).shape,
              name + ": not torch's shape")
    del m2, o2, s2
    ck = torch.load(path, weights_only=False)
    m3, o3, s3 = make(dtype, **kw)
    m3.load_state_dict(ck["model"])
    o3.load_state_dict(ck["opt"])
    s3.load_state_dict(ck["sched"])
    train(m3, o3, s3, 4, 8, dtype)
    for (n, a), b in zip(m1.named_parameters(), m3.parameters()):
        check(same(a.data, b.data), "%s: %s differs after resume" % (name, n))
    print(name, "done")


case("fp32")
case("fp32_amsgrad", amsgrad=True)
case("8bit", compression="8bit")
case("4bit", compression="4bit")
case("bf16", dtype=torch.bfloat16)
case("4bit_bf16", dtype=torch.bfloat16, compression="4bit")
case("file_fp32", checkpoint_threshold_bytes=0)
case("file_4bit", compression="4bit", checkpoint_threshold_bytes=0)

# bf16 weights replaced after the optimizer was created (a pretrained
# model loaded late) are the ones the first step starts from
ma, oa, sa = make(torch.bfloat16)
with torch.no_grad():
    for q in ma.parameters():
        q.mul_(0.5)
mb = model(torch.bfloat16)
with torch.no_grad():
    for q in mb.parameters():
        q.mul_(0.5)
ob = mto.AdamW(mb.parameters(), lr=1e-2, threads=2)
train(ma, oa, sa, 0, 3, torch.bfloat16)
train(mb, ob, torch.optim.lr_scheduler.StepLR(ob, 2, 0.5), 0, 3, torch.bfloat16)
for a, b in zip(ma.parameters(), mb.parameters()):
    check(same(a.data, b.data), "bf16 weights changed before the first step were not picked up")

# a torch.optim.AdamW checkpoint resumes under mt.AdamW, bit for bit
mt_ref = model(torch.float32)
t_opt = torch.optim.AdamW(mt_ref.parameters(), lr=1e-2, foreach=False)
train(mt_ref, t_opt, torch.optim.lr_scheduler.StepLR(t_opt, 2, 0.5), 0, 8, torch.float32)
mt4 = model(torch.float32)
t4 = torch.optim.AdamW(mt4.parameters(), lr=1e-2, foreach=False)
ts4 = torch.optim.lr_scheduler.StepLR(t4, 2, 0.5)
train(mt4, t4, ts4, 0, 4, torch.float32)
m5, o5, s5 = make(torch.float32)
m5.load_state_dict(mt4.state_dict())
o5.load_state_dict(t4.state_dict())
s5.load_state_dict(ts4.state_dict())
train(m5, o5, s5, 4, 8, torch.float32)
for a, b in zip(mt_ref.parameters(), m5.parameters()):
    check(same(a.data, b.data), "torch.optim.AdamW checkpoint resumed under mt.AdamW differs")

m, o, _ = make(torch.float32, compression="4bit")
train(m, o, torch.optim.lr_scheduler.StepLR(o, 2), 0, 1, torch.float32)
sd4 = o.state_dict()
m8, o8, _ = make(torch.float32, compression="8bit")
try:
    o8.load_state_dict(sd4)
    check(False, "a 4-bit dict loaded into an 8-bit optimizer")
except ValueError:
    pass
for st in sd4["state"].values():  # as a build before format 2 saved it
    st.pop("mt_state_format", None)
m4, o4, _ = make(torch.float32, compression="4bit")
try:
    o4.load_state_dict(sd4)
    check(False, "a format-1 4-bit dict loaded")
except ValueError as e:
    check("dynamic-exponent" in str(e), "format-1 message: %s" % e)
finish("test_optim_resume")
