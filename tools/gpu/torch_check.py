"""torch_check.py - a few deterministic training steps of a small MLP, for
tools/gpu-check.sh: run plain and under LD_PRELOAD=libmtalloc.so, the loss
lines must be bit-identical.

    python3 tools/gpu/torch_check.py [--steps N]

The model is deep and narrow (DEPTH linear layers of WIDTH) so that no single
kernel touches more than a small share of the footprint: under a budget of a
quarter of the footprint, every kernel's operands must still fit. For the
same reason AdamW runs with foreach=False (one parameter per kernel; the
foreach kernels would touch every parameter and its state in one launch).

stdout:
    footprint_bytes N          max(torch.cuda.max_memory_allocated() after step 1,
                               bytes of params + grads + optimizer state)
    loss STEP HEX              the loss as float.hex(), compared bit for bit
    step_ms STEP MS            wall time of the step (synchronised), not compared
    step_ms_median MS          median over the steps after the first
    torch_check: ok
Exit 0 ok, 1 error, 77 no CUDA device.
"""
import os

# cuBLAS needs a fixed workspace configuration to be deterministic; it is
# read when cuBLAS initialises, so it must be set before torch is imported.
os.environ["CUBLAS_WORKSPACE_CONFIG"] = ":4096:8"

import argparse  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import torch  # noqa: E402

WIDTH = 1024
DEPTH = 16
BATCH = 512


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=8)
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("torch_check: no CUDA device", file=sys.stderr)
        return 77

    torch.manual_seed(0)
    torch.use_deterministic_algorithms(True)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = False
    dev = torch.device("cuda")

    layers = []
    for _ in range(DEPTH - 1):
        layers += [torch.nn.Linear(WIDTH, WIDTH), torch.nn.GELU()]
    layers.append(torch.nn.Linear(WIDTH, WIDTH))
    model = torch.nn.Sequential(*layers).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, foreach=False, fused=False)
    g = torch.Generator().manual_seed(1)
    x = torch.randn(BATCH, WIDTH, generator=g).to(dev)
    y = torch.randn(BATCH, WIDTH, generator=g).to(dev)

    times = []
    for step in range(1, args.steps + 1):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        value = loss.item()  # synchronises
        torch.cuda.synchronize()
        ms = (time.perf_counter() - t0) * 1e3
        times.append(ms)
        if step == 1:
            state = sum(p.numel() * p.element_size() * 2 for p in model.parameters())  # p + grad
            state += sum(
                t.numel() * t.element_size()
                for s in opt.state.values()
                for t in s.values()
                if torch.is_tensor(t) and t.is_cuda
            )
            print(f"footprint_bytes {max(torch.cuda.max_memory_allocated(), state)}", flush=True)
        print(f"loss {step} {float(value).hex()}", flush=True)
        print(f"step_ms {step} {ms:.3f}", flush=True)
    if value != value:
        print("torch_check: the loss is NaN", file=sys.stderr)
        return 1
    rest = times[1:] or times
    print(f"step_ms_median {statistics.median(rest):.3f}")
    print("torch_check: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
