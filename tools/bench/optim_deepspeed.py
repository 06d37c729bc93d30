#!/usr/bin/env python3
"""DeepSpeed's DeepSpeedCPUAdam on the same problem as optim_bench: N
parameters (as 100 equal tensors, FP32 state, AdamW mode), at the given
thread count (OMP_NUM_THREADS and torch.set_num_threads, set before
DeepSpeed loads its op; OMP_WAIT_POLICY=PASSIVE unless set); prints one JSON object with the median and the
best of REPS steps in G params/s. When deepspeed is not importable or its
cpu_adam op cannot be built here, the rate is null and "reason" holds the
exception's text, so the bench still reports why. Run by optim_bench.

  optim_deepspeed.py N THREADS REPS
"""
import json
import os
import sys
import time


def main():
    n, threads, reps = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    os.environ["OMP_NUM_THREADS"] = str(threads)
    # DeepSpeed's step is an OpenMP loop per tile; libgomp's default spin
    # before sleeping collapsed its 2-thread rate to 0.07-0.29 G params/s on
    # the shared 2-core VM (0.63 with PASSIVE, same run). Give the peer its
    # best setting unless the caller chose one.
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    out = {"threads": threads, "deepspeed_gparams_per_s": None}
    # DeepSpeed's logger and its op build print to stdout: send all of that
    # to stderr, at the descriptor, so stdout carries only the JSON line
    sys.stdout.flush()
    saved = os.dup(1)
    os.dup2(2, 1)
    try:
        import torch
        torch.set_num_threads(threads)
        import deepspeed
        from deepspeed.ops.adam import DeepSpeedCPUAdam
        out["deepspeed_version"] = deepspeed.__version__
        k = 100
        sizes = [n // k + (1 if i < n % k else 0) for i in range(k)]
        params = [torch.randn(s).requires_grad_(True) for s in sizes]
        for p in params:
            p.grad = torch.randn_like(p)
        opt = DeepSpeedCPUAdam(params, lr=1e-3, weight_decay=1e-2, adamw_mode=True,
                               fp32_optimizer_states=True)
        opt.step()  # state allocation is not part of a step
        times = []
        for _ in range(reps):
            t0 = time.perf_counter()
            opt.step()
            times.append(time.perf_counter() - t0)
        times.sort()
        out["deepspeed_gparams_per_s"] = n / times[len(times) // 2] / 1e9
        out["deepspeed_best_gparams_per_s"] = n / times[0] / 1e9
    except BaseException as e:  # an op build failure can be SystemExit too
        text = "%s: %s" % (type(e).__name__, e)
        out["reason"] = " ".join(text.split())[-600:]
    sys.stdout.flush()
    os.dup2(saved, 1)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
