"""Record one training step of a PyTorch model as an mtalloc trace, on the
``meta`` device (no GPU, no memory: a 70B model records on a laptop).

    python -m megatrain.record --model MODULE:FUNCTION -o model.trace
    python -m megatrain.record --hf-config gpt2 --set n_layer=2 --batch 2 --seq 128 -o gpt2.trace

FUNCTION is called with no arguments and returns a model, or (model, batch).
The batch is a tensor (the model's one argument), a tuple (its arguments) or
a dict (its keyword arguments); with only a model, --batch-shape gives one
float tensor (or token ids with --batch-dtype long). The step is forward,
backward (on the output's ``.loss``, else the output's sum) and
``torch.optim.AdamW.step()``.

Every aten op that would launch a kernel becomes a LAUNCH record (format
version 2, docs/trace-format.md) whose footprint is the byte range of each
device storage it touches, with its access kind from the op's schema
(read; written in place: read-write; a fresh output or a fully overwritten
argument, e.g. fill_/copy_: write). Views, empty tensors and metadata ops
launch nothing. Each storage is an ALLOC when first seen (the model's
parameters, buffers and the batch before the step) and a FREE when PyTorch
destroys it (a weakref finalizer on its storage). Kernel times are a
roofline: max(flops / peak, bytes / bandwidth), at least --min-kernel-us;
flops from torch.utils.flop_counter (matmul, conv, attention), every other
op memory-bound. The clock is virtual: each launch starts when the previous
one ends.
"""
import argparse
import hashlib
import importlib
import os
import struct
import sys
import weakref

MT_TR_ALLOC, MT_TR_FREE, MT_TR_LAUNCH, MT_TR_ITER, MT_TR_NAME = 1, 2, 3, 9, 10
MT_TRF_SMALL = 0x1
MT_TRF_ASYNC = 0x1
ACC_READ, ACC_WRITE, ACC_RW = 1, 2, 3
SMALL_BYTES = 1 << 20
CHUNK_BYTES = 2 << 20


class UsageError(Exception):
    """Bad input: the command exits 2 with this message."""


def _pad8(n):
    return (n + 7) & ~7


class TraceWriter:
    """Writes the header and records of a version 2 trace, virtual clock."""

    def __init__(self, path, device, options=""):
        self.f = open(path, "wb")
        opt = options.encode()
        hb = 160 + _pad8(len(opt))
        hdr = struct.pack("<8sIIIIQQQQQ64s32s", b"MTTRACE\0", 2, hb, 2, 0, 0, CHUNK_BYTES, 0, 0, 0,
                          device.encode()[:63], b"megatrain.record")
        assert len(hdr) == 160
        self.f.write(hdr + opt + b"\0" * (hb - 160 - len(opt)))

    def rec(self, typ, flags, t_ns, body):
        size = 16 + len(body)
        assert size % 8 == 0
        self.f.write(struct.pack("<BBHIQ", typ, flags, 1, size, t_ns) + body)

    def alloc(self, t, region, nbytes):
        self.rec(MT_TR_ALLOC, MT_TRF_SMALL if nbytes < SMALL_BYTES else 0, t,
                 struct.pack("<QQII", region, nbytes, 0, 0))

    def free(self, t, region):
        self.rec(MT_TR_FREE, MT_TRF_ASYNC, t, struct.pack("<QII", region, 0, 0))

    def name(self, t, fid, name):
        b = name.encode()[:4096]
        self.rec(MT_TR_NAME, 0, t, struct.pack("<QII", fid, len(b), 0) + b + b"\0" * (_pad8(len(b)) - len(b)))

    def iter(self, t, n):
        self.rec(MT_TR_ITER, 0, t, struct.pack("<Q", n))

    def launch(self, t, launch_id, func, dur, spans, kinds):
        body = struct.pack("<QQQII", launch_id, func, dur, 0, len(spans))
        body += b"".join(struct.pack("<QQQ", *s) for s in spans)
        body += bytes(kinds) + b"\0" * (_pad8(len(kinds)) - len(kinds))
        self.rec(MT_TR_LAUNCH, 0, t, body)

    def close(self):
        self.f.close()


def _import_torch():
    try:
        import torch
    except ImportError as e:
        raise UsageError(f"torch does not import ({e}); megatrain.record needs PyTorch") from None
    return torch


# Ops that make or describe tensors without running a kernel.
_NO_KERNEL = {"empty", "empty_strided", "empty_like", "new_empty", "new_empty_strided", "detach",
              "lift_fresh", "alias", "_unsafe_view", "set_", "resize_", "sym_size", "sym_stride",
              "sym_numel", "sym_storage_offset", "is_same_size", "_has_same_storage_numel",
              "_local_scalar_dense", "_to_copy_meta", "record_stream"}
# In-place ops that overwrite their argument without reading it.
_OVERWRITE = {"fill_", "zero_", "copy_", "uniform_", "normal_", "random_", "bernoulli_",
              "exponential_", "geometric_", "log_normal_", "cauchy_"}


class Recorder:
    def __init__(self, torch, writer, tflops, mem_bw, min_kernel_us):
        self.torch = torch
        self.w = writer
        self.flops_per_ns = tflops * 1e3           # 1e12 / 1e9
        self.bytes_per_ns = mem_bw                 # GB/s = bytes/ns
        self.min_ns = int(min_kernel_us * 1000)
        self.now = 0
        self.next_region = 1
        self.live = {}          # storage _cdata -> [region, key, nbytes]
        self.funcs = {}         # name -> id
        self.op_index = 0
        self.launches = 0
        self.allocs = self.frees = 0
        self.alloc_bytes = 0
        self.flops = 0
        self.moved_bytes = 0
        try:
            from torch.utils.flop_counter import flop_registry
            self.flop_registry = flop_registry
        except Exception:  # an old torch: everything is memory-bound
            self.flop_registry = {}

    # --- storages -----------------------------------------------------------
    def _storage(self, t):
        if not isinstance(t, self.torch.Tensor) or t.device.type != "meta":
            return None
        try:
            return t.untyped_storage()
        except Exception:       # sparse, nested, functional wrappers: no plain storage
            return None

    def _died(self, cdata):
        e = self.live.pop(cdata, None)
        if e is not None and not self.w.f.closed:
            self.w.free(self.now, e[0])
            self.frees += 1

    def see(self, t, key):
        """The region of t's storage, allocated (ALLOC) on first sight; None off the device."""
        s = self._storage(t)
        if s is None:
            return None, None
        cd = s._cdata
        e = self.live.get(cd)
        if e is None:
            nbytes = s.nbytes()
            if nbytes == 0:     # nothing to page, no kernel touches it
                return None, None
            e = [self.next_region, key, nbytes]
            self.next_region += 1
            self.live[cd] = e
            self.w.alloc(self.now, e[0], nbytes)
            self.allocs += 1
            self.alloc_bytes += nbytes
            weakref.finalize(s, self._died, cd)
        return e, s

    def span(self, t):
        """(offset, bytes) of t inside its storage."""
        isz = t.element_size()
        if t.numel() == 0:
            return t.storage_offset() * isz, 0
        ext = 1 + sum((n - 1) * abs(st) for n, st in zip(t.shape, t.stride()))
        return t.storage_offset() * isz, ext * isz

    # --- launches -----------------------------------------------------------
    def launch_kernel(self, func, args, kwargs, out):
        torch = self.torch
        pytree = torch.utils._pytree
        name = func._schema.name.split("::")[-1]
        self.op_index += 1
        schema = func._schema
        # Which arguments this op writes (alias annotation with '!').
        written = set()
        for a in schema.arguments:
            if a.alias_info is not None and a.alias_info.is_write:
                written.add(a.name)
        bound = {}
        for i, v in enumerate(args):
            if i < len(schema.arguments):
                bound[schema.arguments[i].name] = v
        bound.update(kwargs)
        foot = {}   # region -> [lo, hi, kind, key]
        order = []

        def add(t, kind, key):
            e, s = self.see(t, key)
            if e is None:
                return
            off, n = self.span(t)
            if n == 0:
                return
            r = e[0]
            f = foot.get(r)
            if f is None:
                foot[r] = [off, off + n, kind, e[1]]
                order.append(r)
            else:
                f[0], f[1], f[2] = min(f[0], off), max(f[1], off + n), f[2] | kind

        overwrite = name in _OVERWRITE
        # zeros_like(x), new_zeros(x, ...): x gives only a shape, its data is not read
        shape_only = name.endswith("_like") or name.startswith("new_")
        inputs = []
        for argname, v in bound.items():
            if shape_only and argname not in written:
                continue
            kind = ACC_READ
            if argname in written:
                kind = ACC_WRITE if (overwrite and argname == "self") or argname.startswith("out") else ACC_RW
            for t in pytree.tree_leaves(v):
                if isinstance(t, torch.Tensor):
                    inputs.append(t)
                    add(t, kind, None)
        in_storages = {s._cdata for s in (self._storage(t) for t in inputs) if s is not None}
        new_out = False
        for j, t in enumerate(pytree.tree_leaves(out)):
            if isinstance(t, torch.Tensor):
                s = self._storage(t)
                if s is not None and s._cdata not in in_storages:
                    new_out = True
                add(t, ACC_WRITE, (self.op_index, j))
        kernel = not (func.is_view or name in _NO_KERNEL or (not written and not new_out))
        if not kernel or not foot:
            return
        spans, kinds, keys = [], [], [name]
        nbytes = 0
        for r in order:
            lo, hi, kind, key = foot[r]
            spans.append((r, lo, hi - lo))
            kinds.append(kind)
            keys.append(key if key is not None else r)
            nbytes += (hi - lo) * (2 if kind == ACC_RW else 1)
        flops = 0
        fn = self.flop_registry.get(func._overloadpacket)
        if fn is not None:
            try:
                flops = int(fn(*args, **kwargs, out_val=out))
            except Exception:
                flops = 0
        dur = max(flops / self.flops_per_ns, nbytes / self.bytes_per_ns)
        dur = max(int(dur + 0.5), self.min_ns, 1)
        fid = self.funcs.get(name)
        if fid is None:
            fid = self.funcs[name] = len(self.funcs) + 1
            self.w.name(self.now, fid, name)
        lid = int.from_bytes(hashlib.blake2b(repr(keys).encode(), digest_size=8).digest(), "little")
        self.w.launch(self.now, lid, fid, dur, spans, kinds)
        self.now += dur
        self.launches += 1
        self.flops += flops
        self.moved_bytes += nbytes


def _make_mode(torch, rec):
    from torch.utils._python_dispatch import TorchDispatchMode

    class Mode(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            out = func(*args, **kwargs)
            rec.launch_kernel(func, args, kwargs, out)
            return out

    return Mode()


def _parse_value(v):
    for conv in (int, float):
        try:
            return conv(v)
        except ValueError:
            pass
    if v.lower() in ("true", "false"):
        return v.lower() == "true"
    return v


def _load_model(torch, a):
    """(model, batch) on the meta device, from --model or --hf-config."""
    if a.model:
        if ":" not in a.model:
            raise UsageError(f"--model {a.model}: want MODULE:FUNCTION")
        modname, fname = a.model.split(":", 1)
        sys.path.insert(0, os.getcwd())
        try:
            mod = importlib.import_module(modname)
        except ImportError as e:
            raise UsageError(f"--model {a.model}: cannot import module {modname} ({e})") from None
        fn = getattr(mod, fname, None)
        if not callable(fn):
            raise UsageError(f"--model {a.model}: module {modname} has no function {fname}")
        with torch.device("meta"):
            got = fn()
        if isinstance(got, torch.nn.Module):
            model, batch = got, None
        elif isinstance(got, tuple) and len(got) == 2 and isinstance(got[0], torch.nn.Module):
            model, batch = got
        else:
            raise UsageError(f"--model {a.model}: {fname}() returned {type(got).__name__}, "
                             "want a torch.nn.Module or (module, batch)")
        if batch is None:
            if not a.batch_shape:
                raise UsageError(f"--model {a.model}: {fname}() returned no batch; give --batch-shape")
            shape = [int(x) for x in a.batch_shape.split(",")]
            dt = torch.long if a.batch_dtype == "long" else getattr(torch, a.batch_dtype)
            batch = torch.empty(shape, dtype=dt, device="meta")
        model = model.to("meta")
        batch = torch.utils._pytree.tree_map(
            lambda x: x.to("meta") if isinstance(x, torch.Tensor) else x, batch)
        return model, batch
    try:
        import transformers
    except ImportError as e:
        raise UsageError(f"--hf-config needs transformers ({e})") from None
    over = {}
    for kv in a.set or []:
        if "=" not in kv:
            raise UsageError(f"--set {kv}: want KEY=VALUE")
        k, v = kv.split("=", 1)
        over[k] = _parse_value(v)
    name = a.hf_config
    cls = getattr(transformers, name, None)
    if isinstance(cls, type) and issubclass(cls, transformers.PretrainedConfig):
        cfg = cls(**over)
    else:
        try:
            cfg = transformers.AutoConfig.for_model(name, **over)
        except (ValueError, KeyError):  # its message lists every model type: too long to print
            raise UsageError(f"--hf-config {name}: not a transformers model type (gpt2, llama, ...) "
                             "nor a config class (GPT2Config)") from None
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(cfg)
    ids = torch.zeros(a.batch, a.seq, dtype=torch.long, device="meta")
    return model, {"input_ids": ids, "labels": ids}


def _call(model, batch):
    if isinstance(batch, dict):
        return model(**batch)
    if isinstance(batch, (tuple, list)):
        return model(*batch)
    return model(batch)


def record(a):
    torch = _import_torch()
    model, batch = _load_model(torch, a)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=False)
    dev = f"meta roofline {a.tflops:g} TFLOP/s {a.mem_bw:g} GB/s"
    w = TraceWriter(a.output, dev)
    rec = Recorder(torch, w, a.tflops, a.mem_bw, a.min_kernel_us)
    # What exists before the step: parameters, buffers, the batch.
    for p in list(model.parameters()) + list(model.buffers()):
        rec.see(p, ("param", rec.next_region))
    for t in torch.utils._pytree.tree_leaves(batch):
        rec.see(t, ("batch", rec.next_region))
    w.iter(rec.now, 0)
    with _make_mode(torch, rec):
        out = _call(model, batch)
        loss = getattr(out, "loss", None)
        if loss is None:
            if isinstance(out, torch.Tensor):
                loss = out
            elif isinstance(out, (tuple, list)) and out and isinstance(out[0], torch.Tensor):
                loss = out[0]
            elif isinstance(out, dict) and isinstance(out.get("loss"), torch.Tensor):
                loss = out["loss"]
            else:
                raise UsageError(f"the model returned {type(out).__name__}; want a tensor or an output with .loss")
        if loss.dim() > 0:
            loss = loss.float().sum()
        del out
        loss.backward()
        del loss
        opt.step()
        opt.zero_grad(set_to_none=True)
    w.close()
    params = sum(p.numel() for p in model.parameters())
    return {"trace": a.output, "params": params, "launches": rec.launches, "functions": len(rec.funcs),
            "allocations": rec.allocs, "alloc_bytes": rec.alloc_bytes, "frees": rec.frees,
            "live_at_end": len(rec.live), "flops": rec.flops, "bytes": rec.moved_bytes, "end_ns": rec.now}


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m megatrain.record", description=__doc__.split("\n\n")[0])
    p.add_argument("--model", help="MODULE:FUNCTION returning a model, or (model, batch)")
    p.add_argument("--hf-config", help="a transformers model type (gpt2, llama) or config class (GPT2Config)")
    p.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a config field (repeatable)")
    p.add_argument("--batch", type=int, default=1, help="--hf-config: sequences per batch (1)")
    p.add_argument("--seq", type=int, default=128, help="--hf-config: tokens per sequence (128)")
    p.add_argument("--batch-shape", help="--model with no batch: the input's shape, e.g. 8,1024")
    p.add_argument("--batch-dtype", default="float32", help="its dtype (float32; long for token ids)")
    p.add_argument("--tflops", type=float, default=400.0, help="peak TFLOP/s of the roofline (400)")
    p.add_argument("--mem-bw", type=float, default=4800.0, help="memory bandwidth, GB/s (4800)")
    p.add_argument("--min-kernel-us", type=float, default=2.0, help="shortest kernel time, us (2)")
    p.add_argument("-o", "--output", required=True, help="the trace to write")
    p.add_argument("--json", action="store_true", help="print the totals as one JSON object")
    a = p.parse_args(argv)
    if bool(a.model) == bool(a.hf_config):
        print("megatrain.record: give exactly one of --model MODULE:FUNCTION and --hf-config NAME",
              file=sys.stderr)
        return 2
    try:
        st = record(a)
    except UsageError as e:
        print(f"megatrain.record: {e}", file=sys.stderr)
        return 2
    if a.json:
        import json
        print(json.dumps(st))
    else:
        print(f"megatrain.record: {st['trace']}: {st['params']} parameters, {st['launches']} launches of "
              f"{st['functions']} ops, {st['allocations']} allocations ({st['alloc_bytes']} bytes), "
              f"{st['frees']} frees, {st['live_at_end']} live at the end, {st['flops']:.3g} flops, "
              f"{st['bytes']} bytes moved, {st['end_ns'] / 1e6:.3f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
