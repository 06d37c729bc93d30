#!/usr/bin/env python3
"""examples/train.py - a GPT-style decoder trained on generated tokens: the
example and the test load for mtalloc and megatrain.

No downloads: the model is built from a config and randomly initialised
(seeded), and the data is a generated token stream with structure to learn
(each token is an affine function of the one before, plus a little noise),
so the loss falls within a few steps even for the tiny preset.

    python3 examples/train.py --size tiny --steps 20 --device cpu
    megatrain-run --max-vram 20G examples/train.py --size 7b --dtype bf16 --optimizer mt
    MT_OPTIMIZER=host megatrain-run examples/train.py --size 1.3b   (torch.optim.AdamW -> megatrain's)

Prints, per step: loss, tokens/s; at the end: mean tokens/s (steps after
the first) and, under mtalloc, the stall share (mt.stats()'s stall_ns over
the training wall time) and bytes per link. --report adds machine-readable
lines for tools/gpu-check.sh: `exact loss_N HEX` (bit-for-bit comparison,
float.hex of the loss) or `rtol R` plus `approx loss_N VALUE` (comparison
within relative R, tools/gpu/compare.py), and `footprint_bytes N` on CUDA
(torch.cuda.max_memory_allocated).
"""
import argparse
import math
import os
import sys
import time

# name: (layers, hidden, heads, sequence, vocabulary). GPT-2/3-style shapes;
# parameter counts are about 12 * layers * hidden^2 + vocab * hidden.
PRESETS = {
    "tiny": (2, 64, 4, 64, 256),
    "small": (4, 256, 4, 128, 1024),
    "125m": (12, 768, 12, 1024, 50304),
    "350m": (24, 1024, 16, 1024, 50304),
    "1.3b": (24, 2048, 16, 2048, 50304),
    "2.7b": (32, 2560, 32, 2048, 50304),
    "7b": (32, 4096, 32, 2048, 50304),
    "13b": (40, 5120, 40, 2048, 50304),
    "30b": (60, 6656, 52, 2048, 50304),
    "70b": (88, 8192, 64, 2048, 50304),
    "175b": (96, 12288, 96, 2048, 50304),
}


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--size", default="tiny", choices=list(PRESETS), help="model preset (default tiny)")
    p.add_argument("--layers", type=int, help="override the preset's layer count")
    p.add_argument("--hidden", type=int, help="override the preset's hidden size")
    p.add_argument("--heads", type=int, help="override the preset's attention heads")
    p.add_argument("--seq", type=int, help="override the preset's sequence length")
    p.add_argument("--vocab", type=int, help="override the preset's vocabulary size")
    p.add_argument("--steps", type=int, default=10, help="optimizer steps (default 10)")
    p.add_argument("--micro-batch", type=int, default=4, help="sequences per micro-step (default 4)")
    p.add_argument("--grad-accum", type=int, default=1, help="micro-steps per optimizer step (default 1)")
    p.add_argument("--dtype", default="fp32", choices=["fp32", "bf16"],
                   help="weights and compute: fp32, or bf16 weights (megatrain's optimizer keeps FP32 "
                        "masters on the host; torch's keeps bf16 state)")
    p.add_argument("--lr", type=float, default=1e-3, help="AdamW learning rate (default 1e-3)")
    p.add_argument("--clip", type=float, default=0.0, help="clip the gradient norm to this (0 = off)")
    p.add_argument("--optimizer", default="torch", choices=["torch", "mt"],
                   help="torch.optim.AdamW (what MT_OPTIMIZER=host replaces), or megatrain.AdamW")
    p.add_argument("--compression", default=None, choices=["none", "8bit", "4bit"],
                   help="--optimizer mt: optimizer state format (default: MT_OPTIMIZER_COMPRESSION)")
    p.add_argument("--device", default=None, choices=["cpu", "cuda"],
                   help="default: cuda when available, else cpu")
    p.add_argument("--deterministic", action="store_true",
                   help="deterministic algorithms, no TF32, fixed seeds: runs repeat bit for bit")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--report", default=None, metavar="exact|rtol=R",
                   help="also print loss lines for tools/gpu/compare.py (see the module doc)")
    a = p.parse_args(argv)
    for k in ("steps", "micro_batch", "grad_accum", "layers", "hidden", "heads", "seq", "vocab"):
        v = getattr(a, k)
        if v is not None and v < 1:
            p.error(f"--{k.replace('_', '-')} must be at least 1, not {v}")
    if a.report is not None and a.report != "exact":
        try:
            r = float(a.report.split("=", 1)[1]) if a.report.startswith("rtol=") else -1
        except ValueError:
            r = -1
        if not r > 0:
            p.error(f"--report {a.report!r}: use exact or rtol=R with R > 0 (e.g. rtol=1e-3)")
    if a.compression is not None and a.optimizer != "mt":
        p.error("--compression needs --optimizer mt (with torch's AdamW, set MT_OPTIMIZER=host and "
                "MT_OPTIMIZER_COMPRESSION instead)")
    return a


def build_model(torch, nn, F, layers, hidden, heads, seq, vocab):
    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1 = nn.LayerNorm(hidden)
            self.qkv = nn.Linear(hidden, 3 * hidden)
            self.proj = nn.Linear(hidden, hidden)
            self.ln2 = nn.LayerNorm(hidden)
            self.fc = nn.Linear(hidden, 4 * hidden)
            self.out = nn.Linear(4 * hidden, hidden)

        def forward(self, x):
            b, t, c = x.shape
            q, k, v = self.qkv(self.ln1(x)).split(c, dim=2)
            q, k, v = (z.view(b, t, heads, c // heads).transpose(1, 2) for z in (q, k, v))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.proj(y.transpose(1, 2).reshape(b, t, c))
            return x + self.out(F.gelu(self.fc(self.ln2(x))))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok = nn.Embedding(vocab, hidden)
            self.pos = nn.Embedding(seq, hidden)
            self.blocks = nn.ModuleList(Block() for _ in range(layers))
            self.ln = nn.LayerNorm(hidden)
            self.head = nn.Linear(hidden, vocab, bias=False)
            self.head.weight = self.tok.weight  # tied, as GPT-2
            for m in self.modules():
                if isinstance(m, (nn.Linear, nn.Embedding)):
                    nn.init.normal_(m.weight, 0.0, 0.02)
                if isinstance(m, nn.Linear) and m.bias is not None:
                    nn.init.zeros_(m.bias)

        def forward(self, idx):
            t = idx.shape[1]
            x = self.tok(idx) + self.pos(torch.arange(t, device=idx.device))
            for blk in self.blocks:
                x = blk(x)
            return self.head(self.ln(x))

    return GPT()


def batches(torch, vocab, seq, micro, device, seed):
    """Endless generated batches (inputs, targets): token[i+1] = (5*token[i] + 3)
    mod vocab, replaced by a random token 10% of the time."""
    g = torch.Generator().manual_seed(seed + 1)
    while True:
        x = torch.empty(micro, seq + 1, dtype=torch.long)
        x[:, 0] = torch.randint(0, vocab, (micro,), generator=g)
        noise = torch.rand(micro, seq, generator=g) < 0.1
        rnd = torch.randint(0, vocab, (micro, seq), generator=g)
        for i in range(seq):
            x[:, i + 1] = torch.where(noise[:, i], rnd[:, i], (5 * x[:, i] + 3) % vocab)
        x = x.to(device)
        yield x[:, :-1], x[:, 1:]


def import_megatrain():
    """megatrain, installed or from this source checkout (../python), or None."""
    try:
        import megatrain
        return megatrain
    except ImportError:
        pass
    src = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "python")
    if os.path.isfile(os.path.join(src, "megatrain", "__init__.py")):
        sys.path.append(src)
        import megatrain
        return megatrain
    return None


def main(argv=None):
    a = parse_args(argv)
    if a.deterministic:
        # cuBLAS reads this when it starts: before any CUDA work
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    device = a.device or ("cuda" if torch.cuda.is_available() else "cpu")
    if device == "cuda" and not torch.cuda.is_available():
        print("train.py: --device cuda but torch sees no GPU (torch.cuda.is_available() is False)",
              file=sys.stderr)
        return 2
    layers, hidden, heads, seq, vocab = PRESETS[a.size]
    layers, hidden, heads = a.layers or layers, a.hidden or hidden, a.heads or heads
    seq, vocab = a.seq or seq, a.vocab or vocab
    if hidden % heads:
        print(f"train.py: hidden {hidden} is not a multiple of heads {heads}", file=sys.stderr)
        return 2
    torch.manual_seed(a.seed)
    if a.deterministic:
        torch.use_deterministic_algorithms(True)
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        torch.backends.cudnn.benchmark = False
    dtype = torch.bfloat16 if a.dtype == "bf16" else torch.float32
    with torch.device(device):  # built where it trains: a 7B model never passes through host memory
        model = build_model(torch, nn, F, layers, hidden, heads, seq, vocab).to(dtype)
    nparams = sum(p.numel() for p in model.parameters())
    print(f"model: {a.size} layers {layers} hidden {hidden} heads {heads} seq {seq} vocab {vocab}: "
          f"{nparams / 1e6:.2f}M parameters, {nparams * (4 if dtype == torch.float32 else 2) / 2**30:.2f} GiB "
          f"of {a.dtype} weights; device {device}")

    megatrain = import_megatrain()
    if a.optimizer == "mt":
        if megatrain is None:
            print("train.py: --optimizer mt needs the megatrain package (pip install . in the mtalloc "
                  "repository)", file=sys.stderr)
            return 2
        kw = {} if a.compression is None else {"compression": a.compression}
        opt = megatrain.AdamW(model.parameters(), lr=a.lr, **kw)
    else:
        opt = torch.optim.AdamW(model.parameters(), lr=a.lr)
    print(f"optimizer: {type(opt).__module__}.{type(opt).__name__}")

    mt = megatrain if megatrain is not None and megatrain.under_mtalloc() else None
    print("mtalloc: " + ("loaded (LD_PRELOAD)" if mt else "not loaded"))

    data = batches(torch, vocab, seq, a.micro_batch, device, a.seed)
    tokens_per_step = a.micro_batch * a.grad_accum * seq
    rates, losses, times = [], [], []
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    sync()
    t_start = time.perf_counter()
    for step in range(1, a.steps + 1):
        t0 = time.perf_counter()
        if mt:
            mt.mark_iteration()
        total = 0.0
        for _ in range(a.grad_accum):
            x, y = next(data)
            logits = model(x)
            loss = F.cross_entropy(logits.float().view(-1, vocab), y.reshape(-1)) / a.grad_accum
            loss.backward()
            total += loss.item()
        if a.clip > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), a.clip)
        opt.step()
        opt.zero_grad(set_to_none=True)
        sync()
        dt = time.perf_counter() - t0
        rate = tokens_per_step / dt
        if step > 1:
            rates.append(rate)
        losses.append(total)
        times.append(dt)
        print(f"step {step} loss {total:.6f} tokens/s {rate:.1f}", flush=True)
    wall = time.perf_counter() - t_start

    mean_rate = sum(rates) / len(rates) if rates else tokens_per_step / wall
    print(f"tokens/s {mean_rate:.1f} (mean over steps 2..{a.steps})" if rates else f"tokens/s {mean_rate:.1f}")
    print(f"loss first {losses[0]:.6f} last {losses[-1]:.6f}")
    if mt:
        s = mt.stats()
        share = s.get("stall_ns", 0) / (wall * 1e9) if wall > 0 else 0.0
        print(f"mtalloc: stall share {100 * share:.1f}% ({s.get('stall_ns', 0) / 1e9:.3f} s stalled in "
              f"{wall:.3f} s); h2d {s.get('bytes_h2d', 0)} B, d2h {s.get('bytes_d2h', 0)} B, "
              f"evictions {s.get('evictions_dirty', 0)} dirty / {s.get('evictions_clean', 0)} clean")
    if a.report == "exact":
        for i, l in enumerate(losses, 1):
            print(f"exact loss_{i} {float(l).hex()}")
    elif a.report:
        print(f"rtol {a.report.split('=', 1)[1]}")
        for i, l in enumerate(losses, 1):
            print(f"approx loss_{i} {l!r}")
    if a.report:  # for tools/gpu-check.sh's details: "ms NAME MS" and "info NAME VALUE" lines
        for i, t in enumerate(times, 1):
            print(f"ms step{i} {1e3 * t:.1f}")
        print(f"info tokens_per_s {mean_rate:.1f}")
        if mt:
            print(f"info stall_share {100 * share:.1f}% h2d_bytes {s.get('bytes_h2d', 0)} "
                  f"d2h_bytes {s.get('bytes_d2h', 0)}")
    if a.report and device == "cuda":
        print(f"footprint_bytes {torch.cuda.max_memory_allocated()}")
    if not all(math.isfinite(l) for l in losses):
        print("train.py: a loss is not finite", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
