"""torch_check.py - short PyTorch steps for tools/gpu-check.sh, each run in
its own process, plain and under LD_PRELOAD=libmtalloc.so; the script
compares the two runs' outputs.

    python3 tools/gpu/torch_check.py STEP

Steps (each a few seconds on an H200; the script sizes MT_MAX_VRAM from the
plain run's footprint_bytes):
    adamw     a deep MLP trained with PyTorch's default AdamW (foreach) and
              clip_grad_norm_ (_foreach_norm): one launch takes many tensors,
              more than the budget at 4x oversubscription (issue 7, item 2)
    conv      a small conv net with torch.backends.cudnn.benchmark = True:
              cuDNN times algorithms and sizes workspaces from free memory
              (item 4); the algorithm it picks may differ, so approx
    graph     torch.cuda.graph capture and replay, with tensors touched
              between replays so the graph's memory is evicted and fetched,
              and a buffer allocated after capture that replays must not
              write (item 5)
    gemm_bf16 8192^3 bf16 products, the size cuBLASLt runs with the Hopper
              TMA kernels (tensor-map descriptors, item 7); the script runs
              it with MT_HOST_MAP=off, so a missed descriptor faults
    compile   one torch.compile (Inductor, Triton) kernel, called again after
              other memory was touched; exit 77 when there is no C compiler
              for Triton's launcher
    backend   the allocator backend PyTorch reports
              (torch.cuda.get_allocator_backend()) and a small tensor

stdout, one fact per line:
    footprint_bytes N     bytes the step's tensors need (sizes the budget)
    exact NAME HEX        must be bit-identical plain vs preloaded
    approx NAME FLOAT     must agree within a relative 1e-4 (timed choices)
    info NAME VALUE       reported only
    ms NAME MS            time, reported only
    torch_check: ok
Exit 0 ok, 1 a failure (the reason on stderr), 77 skipped (the reason on
stdout as "skip: ..."). footprint_bytes is the larger of the step's own
count and torch.cuda.max_memory_allocated().
"""
import os

# cuBLAS needs a fixed workspace configuration to be deterministic; it is
# read when cuBLAS initialises, so it must be set before torch is imported.
os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")

import hashlib  # noqa: E402
import shutil  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import torch  # noqa: E402

MIB = 1 << 20


class Failed(Exception):
    """A check inside a step did not hold."""


class Skipped(Exception):
    """The step cannot run here (the reason is the message)."""


def digest(t):
    """First 16 hex digits of sha256 over the tensor's bytes."""
    b = t.detach().contiguous().cpu().view(torch.uint8).numpy().tobytes()
    return hashlib.sha256(b).hexdigest()[:16]


def nbytes(tensors):
    return sum(t.numel() * t.element_size() for t in tensors)


def peak_allocated():
    try:
        return torch.cuda.max_memory_allocated()
    except Exception:  # noqa: BLE001 - not every backend keeps the statistic
        return 0


def say(kind, name, value):
    print(f"{kind} {name} {value}", flush=True)


class timed:
    def __init__(self, name):
        self.name = name

    def __enter__(self):
        torch.cuda.synchronize()
        self.t0 = time.perf_counter()

    def __exit__(self, *exc):
        if exc[0] is None:
            torch.cuda.synchronize()
            say("ms", self.name, f"{(time.perf_counter() - self.t0) * 1e3:.1f}")


def deterministic():
    torch.manual_seed(0)
    torch.use_deterministic_algorithms(True)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False


def mlp(width, depth):
    layers = []
    for _ in range(depth - 1):
        layers += [torch.nn.Linear(width, width), torch.nn.GELU()]
    layers.append(torch.nn.Linear(width, width))
    return torch.nn.Sequential(*layers).cuda()


def step_adamw():
    deterministic()
    width, depth, batch, steps = 1024, 24, 512, 4
    model = mlp(width, depth)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)  # PyTorch's default: foreach
    g = torch.Generator(device="cuda").manual_seed(1)
    x = torch.randn(batch, width, device="cuda", generator=g)
    y = torch.randn(batch, width, device="cuda", generator=g)
    params = list(model.parameters())
    for s in range(1, steps + 1):
        with timed(f"step{s}"):
            opt.zero_grad(set_to_none=True)
            loss = torch.nn.functional.mse_loss(model(x), y)
            loss.backward()
            norm = torch.nn.utils.clip_grad_norm_(params, 1.0)  # _foreach_norm
            opt.step()
        say("exact", f"loss{s}", float(loss.item()).hex())
        say("exact", f"grad_norm{s}", float(norm.item()).hex())
    say("exact", "params", digest(torch.cat([p.detach().flatten() for p in params])))
    say("info", "tensors_per_foreach_list", len(params))
    # params, grads, exp_avg, exp_avg_sq; two activations per layer
    return 4 * nbytes(params) + 2 * depth * batch * width * 4


def step_conv():
    deterministic()
    torch.use_deterministic_algorithms(False)  # benchmark mode may pick any algorithm
    torch.backends.cudnn.benchmark = True
    g = torch.Generator(device="cuda").manual_seed(2)
    net = torch.nn.Sequential(
        torch.nn.Conv2d(64, 128, 3, padding=1), torch.nn.ReLU(),
        torch.nn.Conv2d(128, 128, 3, padding=1), torch.nn.ReLU(),
        torch.nn.Conv2d(128, 64, 3, padding=1)).cuda()
    x = torch.randn(32, 64, 56, 56, device="cuda", generator=g)
    opt = torch.optim.SGD(net.parameters(), lr=1e-3)
    for s in range(1, 4):
        with timed(f"iter{s}"):
            opt.zero_grad(set_to_none=True)
            out = net(x)
            loss = out.float().pow(2).mean()
            loss.backward()
            opt.step()
        say("approx", f"loss{s}", repr(loss.item()))
    say("approx", "out_sum", repr(out.double().sum().item()))
    return nbytes(list(net.parameters())) * 2 + x.numel() * 4 * 8


def step_graph():
    deterministic()
    width, batch = 2048, 256
    model = mlp(width, 4)
    g = torch.Generator(device="cuda").manual_seed(3)
    static_x = torch.randn(batch, width, device="cuda", generator=g)
    ballast = [torch.randn(16 * MIB, device="cuda", generator=g) for _ in range(4)]  # 4 x 64 MiB
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.no_grad(), torch.cuda.stream(side):
        for _ in range(3):  # warm-up on a side stream, as PyTorch's documentation asks
            model(static_x)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.no_grad():
        with timed("capture"):
            with torch.cuda.graph(graph):
                tmp = model(static_x) * 2.0  # temporaries allocated inside the capture
                static_y = tmp - 1.0
    after = torch.full((4 * MIB,), 7.0, device="cuda")  # allocated after capture: replays must not write it
    for r in range(1, 4):
        static_x.copy_(torch.randn(batch, width, device="cuda", generator=g))
        for b in ballast:  # touch other memory, so the graph's may be evicted
            b.mul_(1.0001)
        with timed(f"replay{r}"):
            graph.replay()
        with torch.no_grad():
            eager = model(static_x) * 2.0 - 1.0
        # eager and captured launches may pick different GEMM kernels: close, not equal
        if not torch.allclose(eager, static_y, rtol=1e-4, atol=1e-5):
            diff = (eager - static_y).abs().max().item()
            raise Failed(f"replay {r} differs from the eager result (max abs difference {diff:g})")
        say("exact", f"replay{r}", digest(static_y))
    if not bool((after == 7.0).all()):
        raise Failed("a buffer allocated after capture was written by a replay")
    say("exact", "after_capture_buffer", digest(after))
    say("exact", "ballast", digest(torch.cat(ballast)))
    return nbytes(list(model.parameters()) + ballast + [static_x, after]) + batch * width * 4 * 6


def step_gemm_bf16():
    deterministic()
    n, pairs = 8192, 3
    g = torch.Generator(device="cuda").manual_seed(4)
    a = [torch.randn(n, n, device="cuda", dtype=torch.bfloat16, generator=g) for _ in range(pairs)]
    b = [torch.randn(n, n, device="cuda", dtype=torch.bfloat16, generator=g) for _ in range(pairs)]
    c = []
    for i in range(pairs):
        with timed(f"matmul{i}"):
            c.append(a[i] @ b[i])
        say("exact", f"c{i}", digest(c[i]))
    with timed("matmul_x5"):
        for _ in range(5):
            c[0] = a[0] @ b[0]
    say("exact", "c0_again", digest(c[0]))
    return nbytes(a + b + c)


def c_compiler():
    for cand in (os.environ.get("CC"), "cc", "gcc", "clang"):
        if cand and shutil.which(cand):
            return shutil.which(cand)
    return None


def step_compile():
    if c_compiler() is None:
        raise Skipped("no C compiler (CC, cc, gcc, clang): Triton cannot build its launcher")
    deterministic()
    g = torch.Generator(device="cuda").manual_seed(5)
    x = torch.randn(16 * MIB, device="cuda", generator=g)
    y = torch.randn(16 * MIB, device="cuda", generator=g)

    def f(x, y):
        return torch.sin(x) * y + torch.cos(y)

    cf = torch.compile(f)
    try:
        with timed("compile_and_first_call"):
            z = cf(x, y)
    except Exception as e:  # noqa: BLE001 - Inductor wraps the compiler's error in its own types
        text = f"{type(e).__name__}: {e}"
        if any(k in text for k in ("C compiler", "cc1", "No such file or directory: 'gcc'")):
            raise Skipped("no working C compiler for Triton: " + text.splitlines()[0][:300]) from e
        raise
    # other memory touched between the calls, so that x and y may be evicted
    # and fetched back for the second (the budget is half the footprint; the
    # kernel itself, x, y and z, fits in it)
    ballast = [torch.ones(16 * MIB, device="cuda") for _ in range(4)]
    for t in ballast:
        t.mul_(2.0)
    with timed("second_call"):
        z2 = cf(x, y)
    if not torch.equal(z, z2):
        raise Failed("two calls of the compiled kernel differ")
    say("exact", "z", digest(z))
    return nbytes([x, y, z, z2] + ballast)


def step_backend():
    say("info", "backend", torch.cuda.get_allocator_backend())
    for var in ("PYTORCH_ALLOC_CONF", "PYTORCH_CUDA_ALLOC_CONF"):
        say("info", var, repr(os.environ.get(var)))
    t = torch.arange(MIB, device="cuda", dtype=torch.float32)
    say("exact", "arange", digest(t * 2))
    return 4 * MIB


STEPS = {
    "adamw": step_adamw, "conv": step_conv, "graph": step_graph,
    "gemm_bf16": step_gemm_bf16, "compile": step_compile, "backend": step_backend,
}


def main():
    if len(sys.argv) != 2 or sys.argv[1] not in STEPS:
        print("usage: torch_check.py " + "|".join(STEPS), file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("skip: torch sees no CUDA device")
        return 77
    say("info", "torch", f"{torch.__version__} cuda {torch.version.cuda}")
    try:
        own = STEPS[sys.argv[1]]()
    except Skipped as e:
        print(f"skip: {e}", flush=True)
        return 77
    except Failed as e:
        print(f"torch_check: FAIL {e}", file=sys.stderr)
        return 1
    peak = peak_allocated()
    say("info", "max_memory_allocated", peak)
    print(f"footprint_bytes {max(own, peak)}", flush=True)
    print("torch_check: ok", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
