"""python -m megatrain.record: one training step on the meta device, as an
mtalloc trace that mt-trace reads and replays.

(a) a small MLP defined here (MODULE:FUNCTION = test_record:make_mlp),
(b) a 2-layer GPT-2 from a transformers config (no download).
Checks: mt-trace summary reads it (launches > 0, allocations = frees +
live at the end, each parameter allocated once, before the first launch),
access kinds (a Linear's weight is read by the forward's matmul and
written by the optimizer step), mt-trace replay at a small --gpu-mem, and
bad input exits 2 with a message.
"""
import json
import os
import struct
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


def make_mlp():
    """The user's function: (model, batch). Called under torch.device('meta')."""
    import torch
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(256, 1024), torch.nn.GELU(), torch.nn.Linear(1024, 256))
    return model, torch.randn(32, 256)


def read_trace(path):
    """(allocs {region: bytes}, frees [region], names {id: name}, launches [(func, [(region, off, bytes, kind)])],
    order of record types)."""
    data = open(path, "rb").read()
    assert data[:8] == b"MTTRACE\0"
    version, hb, clock = struct.unpack_from("<III", data, 8)
    assert version == 2 and clock == 2 and hb % 8 == 0
    off = hb
    allocs, frees, names, launches, types = {}, [], {}, [], []
    while off < len(data):
        typ, flags, thread, size, t = struct.unpack_from("<BBHIQ", data, off)
        assert size % 8 == 0 and size >= 16
        types.append(typ)
        if typ == 1:
            region, nbytes = struct.unpack_from("<QQ", data, off + 16)
            allocs[region] = nbytes
        elif typ == 2:
            frees.append(struct.unpack_from("<Q", data, off + 16)[0])
        elif typ == 10:
            fid, ln = struct.unpack_from("<QI", data, off + 16)
            names[fid] = data[off + 32:off + 32 + ln].decode()
        elif typ == 3:
            lid, func, dur, stream, nfoot = struct.unpack_from("<QQQII", data, off + 16)
            spans = [struct.unpack_from("<QQQ", data, off + 48 + 24 * i) for i in range(nfoot)]
            kinds = data[off + 48 + 24 * nfoot:off + 48 + 25 * nfoot]
            launches.append((func, dur, [s + (k,) for s, k in zip(spans, kinds)]))
        off += size
    return allocs, frees, names, launches, types


def main():
    import common
    from common import check, run, MTTRACE
    common.need_torch()
    tmp = tempfile.mkdtemp(prefix="mt-record-")
    rec = [sys.executable, "-m", "megatrain.record"]
    path_env = common.PYDIR + os.pathsep + HERE

    # (a) the MLP from this module
    mlp = os.path.join(tmp, "mlp.trace")
    r = run(rec + ["--model", "test_record:make_mlp", "-o", mlp, "--json"], PYTHONPATH=path_env)
    check(r.returncode == 0, f"record the MLP (rc {r.returncode}: {r.stderr[-500:]})")
    st = json.loads(r.stdout.strip().splitlines()[-1]) if r.returncode == 0 else {}
    s = run([MTTRACE, "summary", mlp, "--json"])
    check(s.returncode == 0, f"mt-trace summary reads the MLP trace ({s.stderr[-300:]})")
    tot = json.loads(s.stdout)["total"] if s.returncode == 0 else {}
    check(tot.get("launches", 0) > 0 and tot.get("launches") == st.get("launches"),
          f"launches: summary {tot.get('launches')}, recorder {st.get('launches')}")
    check(tot.get("allocations") == tot.get("frees", -1) + st.get("live_at_end", -1),
          f"allocations {tot.get('allocations')} = frees {tot.get('frees')} + live at the end {st.get('live_at_end')}")
    allocs, frees, names, launches, types = read_trace(mlp)
    check(len(frees) == len(set(frees)) and all(f in allocs for f in frees), "every FREE is of an allocated region, once")
    # Regions 1-4: the parameters (weight, bias, weight, bias), 5 the batch, before any launch.
    check(types.index(3) > types.index(9) and allocs.get(1) == 1024 * 256 * 4 and allocs.get(3) == 256 * 1024 * 4,
          f"parameters allocated first, once, before the ITER and the first launch ({[allocs.get(i) for i in (1, 2, 3, 4)]})")
    live = set()
    seen_alloc = set()
    ok_spans = True
    # walk the records in order: every span inside a live region
    data = open(mlp, "rb").read()
    off = struct.unpack_from("<I", data, 12)[0]
    while off < len(data):
        typ, _, _, size, _ = struct.unpack_from("<BBHIQ", data, off)
        if typ == 1:
            reg, nb = struct.unpack_from("<QQ", data, off + 16)
            ok_spans &= reg not in seen_alloc
            seen_alloc.add(reg)
            live.add(reg)
        elif typ == 2:
            reg = struct.unpack_from("<Q", data, off + 16)[0]
            ok_spans &= reg in live
            live.discard(reg)
        elif typ == 3:
            nfoot = struct.unpack_from("<I", data, off + 44)[0]
            for i in range(nfoot):
                reg, o, b = struct.unpack_from("<QQQ", data, off + 48 + 24 * i)
                ok_spans &= reg in live and o + b <= allocs[reg]
        off += size
    check(ok_spans, "each region allocated once; every span inside a live region; frees of live regions only")
    check(len(live) == st.get("live_at_end"), f"{len(live)} regions live at the end")
    fname = {v: k for k, v in names.items()}
    # the first Linear's weight (region 1): read by the forward matmul, written (read-write) by AdamW
    kinds_w1 = [(names[f], k) for f, _, sp in launches for (reg, o, b, k) in sp if reg == 1]
    check(any(n in ("addmm", "mm") and k == 1 for n, k in kinds_w1), f"weight 1 read by a matmul ({kinds_w1[:3]})")
    check(not any(n.endswith("_like") for n, k in kinds_w1), "zeros_like(weight) does not touch the weight")
    check(any(k in (2, 3) for n, k in kinds_w1[1:]), f"weight 1 written by the optimizer step ({kinds_w1[-3:]})")
    check(not any(n in ("addmm", "mm") and k != 1 for n, k in kinds_w1), "no matmul writes the weight")
    mm = [(d, sp) for f, d, sp in launches if names[f] == "addmm"]
    # addmm 32x256 @ 256x1024: 2*32*256*1024 flops at 400 TFLOP/s = 42 ns, bytes ~1.2 MB / 4800 GB/s ~ 250 ns
    check(mm and all(d >= 2000 for d, _ in mm), f"kernel times at least --min-kernel-us 2 ({[d for d, _ in mm]})")
    check("addmm" in fname and "view" not in fname and "t" not in fname, f"views launch nothing ({sorted(fname)})")
    rp = run([MTTRACE, "replay", mlp, "--gpu-mem", "64M", "--host-mem", "1G", "--json"])
    check(rp.returncode == 0 and json.loads(rp.stdout or "{}").get("launches") == tot.get("launches"),
          f"mt-trace replay takes the MLP trace ({rp.stderr[-300:]})")

    # (b) a 2-layer GPT-2 from its transformers config
    g = os.path.join(tmp, "gpt2.trace")
    r = run(rec + ["--hf-config", "gpt2", "--set", "n_layer=2", "--set", "n_embd=256", "--set", "n_head=4",
                   "--batch", "2", "--seq", "64", "-o", g, "--json"], timeout=180)
    check(r.returncode == 0, f"record a 2-layer GPT-2 (rc {r.returncode}: {r.stderr[-500:]})")
    st = json.loads(r.stdout.strip().splitlines()[-1]) if r.returncode == 0 else {}
    print(f"     gpt2: {st}")
    s = run([MTTRACE, "summary", g, "--json"])
    tot = json.loads(s.stdout)["total"] if s.returncode == 0 else {}
    check(s.returncode == 0 and tot.get("launches", 0) > 100 and tot.get("launches") == st.get("launches"),
          f"summary reads the GPT-2 trace: {tot.get('launches')} launches")
    check(tot.get("allocations") == tot.get("frees", -1) + st.get("live_at_end", -1),
          f"GPT-2: allocations {tot.get('allocations')} = frees {tot.get('frees')} + live {st.get('live_at_end')}")
    allocs, frees, names, launches, types = read_trace(g)
    ops = set(names.values())
    check({"mm", "addmm"} & ops and any("softmax" in o or "attention" in o for o in ops),
          f"GPT-2 ops include matmuls and attention ({sorted(ops)[:40]})")
    check(st.get("flops", 0) > 0, f"matmul flops counted ({st.get('flops')})")
    rp = run([MTTRACE, "replay", g, "--gpu-mem", "64M", "--host-mem", "4G", "--json"])
    check(rp.returncode == 0, f"mt-trace replay takes the GPT-2 trace at --gpu-mem 64M ({rp.stderr[-300:]})")
    # mt-trace plan --trace on the recording: batch 2 x 64 = 128 tokens per step, one step
    machine = ["--gpu-mem", "64M", "--host-mem", "1G", "--pcie-bw", "25G", "--nvme-read-bw", "3G",
               "--nvme-write-bw", "2G"]
    pl = run([MTTRACE, "plan", "--trace", g, "--tokens-per-step", "128", "--json"] + machine)
    pj = json.loads(pl.stdout) if pl.returncode == 0 else {"plans": []}
    ok = [x for x in pj["plans"] if not x["failed"]]
    check(pl.returncode == 0 and ok and pj.get("host_optimizer") is False
          and all(x["step_s"] >= x["ideal_step_s"] > 0 and abs(x["tokens_per_s"] * x["step_s"] - 128) < 1e-3
                  and x["state"] == "" for x in ok),
          f"plan --trace on the GPT-2 recording: {len(ok)} settings, tokens/s = 128 / step, no host optimizer "
          f"({pl.stderr[-300:]})")
    pt = run([MTTRACE, "plan", "--trace", g, "--tokens-per-step", "128"] + machine)
    check(pt.returncode == 0 and "one step" in pt.stdout and "MT_CHUNK=" in pt.stdout
          and "MT_OPTIMIZER=" not in pt.stdout, "the text says the recording has one step and names MT_* settings")

    # bad input exits 2 with a message
    bad = os.path.join(tmp, "bad.trace")
    for args, what in ((["--model", "no_such_module_xyz:f"], "cannot import"),
                       (["--model", "test_record:no_such_function"], "no function"),
                       (["--model", "test_record"], "MODULE:FUNCTION"),
                       ([], "--model"),
                       (["--hf-config", "no_such_model_type"], "not a transformers model type")):
        r = run(rec + args + ["-o", bad], PYTHONPATH=path_env)
        check(r.returncode == 2 and what in r.stderr, f"{args or 'no --model/--hf-config'}: exit 2, "
              f"'{what}' (rc {r.returncode}: {r.stderr.strip()[-200:]})")
    common.finish("test_record")


if __name__ == "__main__":
    main()
