#!/usr/bin/env python3
"""torch's CPU AdamW on the same problem as optim_bench: N parameters (as
100 equal tensors), foreach off and on, at the given thread count; prints
one JSON object with the best of REPS steps. Run by optim_bench.

  optim_torch.py N THREADS REPS
"""
import json
import sys
import time

import torch


def main():
    n, threads, reps = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    torch.set_num_threads(threads)
    k = 100
    sizes = [n // k + (1 if i < n % k else 0) for i in range(k)]
    params = [torch.randn(s).requires_grad_(True) for s in sizes]
    for p in params:
        p.grad = torch.randn_like(p)
    out = {"torch_version": torch.__version__, "threads": threads,
           "cpu_capability": torch.backends.cpu.get_cpu_capability()}
    for foreach in (False, True):
        opt = torch.optim.AdamW(params, lr=1e-3, foreach=foreach)
        opt.step()  # state allocation is not part of a step
        best = float("inf")
        for _ in range(reps):
            t0 = time.perf_counter()
            opt.step()
            best = min(best, time.perf_counter() - t0)
        out["foreach_on" if foreach else "foreach_off"] = n / best / 1e9
        del opt
    print(json.dumps(out))


if __name__ == "__main__":
    main()
