#!/usr/bin/env python3
"""Reference vectors for the AdamW/Adam exactness test (test_adam_exact.c).

Runs torch.optim.AdamW / Adam, single-tensor path (foreach=False,
fused=False), on random tensors of 1, 7, 4097 and 1000003 elements for
STEPS steps under several hyper-parameter sets, and writes the inputs and
the final state to one little-endian file (layout below, read by the C
test). Sets with a narrow dtype model bf16/fp16 device weights and
gradients: torch steps FP32 masters widened from the narrow initial
weights, with grad = the narrow gradient .float(), and the expected device
weights are the final masters .to(dtype). Clipped sets record the total
norm clip_grad_norm_ returned at each step, so the C side can check its
own reduction (libmtalloc/optim/gradnorm.c) bit for bit. ATEN_CPU_CAPABILITY is pinned to "default" before torch is imported:
that build of aten's CPU kernels never fuses a multiply and an add, which is
the arithmetic the C kernels reproduce (libmtalloc/optim/adam.h).

A missing torch is an error (exit 1), never a skip: CI installs it
(tools/setup.sh).

  adam_ref.py [--sqrt=torch|ieee] OUT

Square root: torch's CPU Tensor.sqrt on float32 goes through MKL's VML
(vsSqrt, high-accuracy mode), which is not correctly rounded: it differs
from IEEE sqrt by one ulp for about 15% of inputs. --sqrt=ieee (the default
for the test) replaces Tensor.sqrt, for the optimizer only, with the
correctly rounded square root (computed in float64 and rounded once, which
is exact for float32 inputs), so every other operation of torch's step is
compared bit for bit; --sqrt=torch keeps torch's own.

Layout: "MTADAMR2", u32 n_sizes, u32 steps, u32 n_sets, u32 0,
u64 size[n_sizes]; per size: f32 p0[n], then f32 g[step][n];
per set: f64 lr, beta1, beta2, eps, weight_decay, max_norm (0 = no clip),
u32 decoupled, amsgrad, maximize, dtype (0 f32, 1 bf16, 2 f16: weights
and gradients); f32 clip[steps]; f32 total_norm[steps] (0 without clip);
if dtype != 0, per size: u16 p0[n], u16 g[step][n] in that dtype (the
inputs replacing the f32 ones); then per size: f32 p[n], m[n], v[n],
vmax[n] (zeros without amsgrad), u16 bf16(p)[n], u16 f16(p)[n].
"""
import ctypes
import os
import struct
import sys

CAPABILITY = "default"
os.environ["ATEN_CPU_CAPABILITY"] = CAPABILITY
try:
    import torch
except ImportError as e:
    sys.exit("adam_ref.py: FAIL: torch is not importable (%s); run tools/setup.sh, "
             "which pip-installs the pinned torch" % e)

SIZES = [1, 7, 4097, 1000003]
STEPS = 5
# (lr, beta1, beta2, eps, weight_decay, max_norm, decoupled, amsgrad, maximize, dtype)
SETS = [
    (1e-3, 0.9, 0.999, 1e-8, 1e-2, 0.0, True, False, False, 0),   # AdamW defaults
    (3e-4, 0.9, 0.95, 1e-8, 0.1, 1.0, True, True, False, 0),      # amsgrad + clip
    (1e-2, 0.8, 0.99, 1e-6, 0.0, 0.0, True, False, True, 0),      # maximize, no decay
    (2e-3, 0.9, 0.999, 1e-8, 0.05, 0.5, False, True, True, 0),    # Adam L2, amsgrad, maximize, clip
    (5e-2, 0.3, 0.9, 1e-3, 0.01, 100.0, True, False, False, 0),   # lerp's big-weight form, loose clip
    (1e-3, 0.9, 0.999, 1e-8, 1e-2, 1.0, True, False, False, 1),   # bf16 weights and grads, clip
    (2e-3, 0.9, 0.95, 1e-8, 0.1, 0.5, True, True, False, 2),      # fp16, amsgrad, clip
    (1e-2, 0.8, 0.99, 1e-6, 0.0, 0.0, False, False, True, 1),     # bf16, Adam, maximize
]
NARROW = {1: torch.bfloat16, 2: torch.float16}


def raw(t):
    """A contiguous CPU tensor's bytes (no numpy: the test needs torch only)."""
    t = t.contiguous()
    return ctypes.string_at(t.data_ptr(), t.numel() * t.element_size())


def main():
    args = sys.argv[1:]
    sqrt_mode = "ieee"
    if args and args[0].startswith("--sqrt="):
        sqrt_mode = args.pop(0)[len("--sqrt="):]
    if len(args) != 1 or sqrt_mode not in ("ieee", "torch"):
        sys.exit(__doc__)
    out_path = args[0]
    if sqrt_mode == "ieee":
        def ieee_sqrt(t):
            return torch.sqrt(t.double()).to(t.dtype) if t.dtype == torch.float32 else ieee_sqrt.orig(t)
        ieee_sqrt.orig = torch.Tensor.sqrt
        torch.Tensor.sqrt = ieee_sqrt
    cap = torch.backends.cpu.get_cpu_capability()
    if cap.lower() != CAPABILITY:
        sys.exit("adam_ref.py: FAIL: aten runs %s kernels, wanted %s" % (cap, CAPABILITY))
    gen = torch.Generator().manual_seed(10)
    p0 = [torch.randn(n, generator=gen) for n in SIZES]
    grads = [[torch.randn(n, generator=gen) * (0.1 * (s + 1)) for n in SIZES] for s in range(STEPS)]
    with open(out_path, "wb") as f:
        f.write(b"MTADAMR2" + struct.pack("<4I", len(SIZES), STEPS, len(SETS), 0))
        f.write(struct.pack("<%dQ" % len(SIZES), *SIZES))
        for i in range(len(SIZES)):
            f.write(raw(p0[i]))
            for s in range(STEPS):
                f.write(raw(grads[s][i]))
        for (lr, b1, b2, eps, wd, max_norm, decoupled, ams, maxim, dt) in SETS:
            if dt:  # narrow device weights and gradients; torch steps FP32 masters
                p_in = [p.to(NARROW[dt]) for p in p0]
                g_in = [[g.to(NARROW[dt]) for g in gs] for gs in grads]
                masters = [p.float() for p in p_in]
                g_f32 = [[g.float() for g in gs] for gs in g_in]
            else:
                masters, g_f32 = p0, grads
            params = [p.clone().requires_grad_(True) for p in masters]
            cls = torch.optim.AdamW if decoupled else torch.optim.Adam
            opt = cls(params, lr=lr, betas=(b1, b2), eps=eps, weight_decay=wd,
                      amsgrad=ams, maximize=maxim, foreach=False, fused=False)
            clips, norms = [], []
            for s in range(STEPS):
                for i, p in enumerate(params):
                    p.grad = g_f32[s][i].clone()
                if max_norm > 0:
                    total = torch.nn.utils.clip_grad_norm_(params, max_norm, foreach=False)
                    coef = torch.clamp(max_norm / (total + 1e-6), max=1.0)
                    for i, p in enumerate(params):  # the coefficient is what torch applied
                        assert torch.equal(p.grad, g_f32[s][i] * coef), "clip coefficient"
                    clips.append(float(coef))
                    norms.append(float(total))
                else:
                    clips.append(1.0)
                    norms.append(0.0)
                opt.step()
            f.write(struct.pack("<6d4I", lr, b1, b2, eps, wd, max_norm, decoupled, ams, maxim, dt))
            f.write(struct.pack("<%df" % STEPS, *clips))
            f.write(struct.pack("<%df" % STEPS, *norms))
            if dt:
                for i in range(len(SIZES)):
                    f.write(raw(p_in[i]))
                    for s in range(STEPS):
                        f.write(raw(g_in[s][i]))
            for i, p in enumerate(params):
                st = opt.state[p]
                pd = p.detach()
                vmax = st["max_exp_avg_sq"] if ams else torch.zeros_like(pd)
                assert st["step"].dtype == torch.float32
                for t in (pd, st["exp_avg"], st["exp_avg_sq"], vmax):
                    f.write(raw(t))
                f.write(raw(pd.to(torch.bfloat16)))
                f.write(raw(pd.to(torch.float16)))
    print("adam_ref.py: torch %s, ATEN_CPU_CAPABILITY=%s, sqrt=%s" % (torch.__version__, cap, sqrt_mode))


if __name__ == "__main__":
    main()
