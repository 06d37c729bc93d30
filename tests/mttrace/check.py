#!/usr/bin/env python3
"""check.py - Description: mt-trace summary, timeline and plot on traces with
known contents (gen.c), bad input, and the command line.

usage: check.py TEST MT_TRACE MTTRACE_GEN
TEST: cli, summary, noiter, unordered, timeline, plot, bad_input, stream.
Exit 0 pass, 1 fail.
"""
import json
import os
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

MIB = 1 << 20
C = 2 * MIB          # the generator's chunk
S = 4096             # its small region

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def eq(got, want, what):
    check(got == want, f"{what}: got {got!r}, want {want!r}")


def near(got, want, what):
    check(got is not None and abs(got - want) < 1e-6, f"{what}: got {got!r}, want {want!r}")


def run(*args, ok=True):
    p = subprocess.run([MT] + list(args), capture_output=True, text=True, errors="replace")
    if ok and p.returncode != 0:
        print(p.stdout, p.stderr)
        check(False, f"mt-trace {' '.join(args)}: exit {p.returncode}")
    return p


def gen(kind, path, *extra):
    subprocess.run([GEN, kind, path] + list(extra), check=True)
    return path


def summary(path):
    p = run("summary", path, "--json")
    return json.loads(p.stdout)


def t_cli(tmp):
    p = run("--help")
    for cmd in ("summary", "timeline", "plot", "replay", "import-g10", "synth"):
        check(f"\n  {cmd} " in p.stdout, f"--help lists {cmd}")
    for cmd in ("summary", "timeline", "plot"):
        p = run(cmd, "--help")
        check(f"mt-trace {cmd}" in p.stdout, f"{cmd} --help")
    p = run("frobnicate", ok=False)
    eq(p.returncode, 2, "unknown command exit")
    check("unknown command" in p.stderr, "unknown command message")
    p = run(ok=False)
    eq(p.returncode, 2, "no command exit")
    trace = gen("basic", os.path.join(tmp, "t.mtt"))
    for args in (["summary", trace, "--bogus"], ["summary", "-x", trace], ["summary"],
                 ["summary", trace, trace], ["timeline", trace], ["plot", trace],
                 ["timeline", trace, "-o"]):
        p = run(*args, ok=False)
        eq(p.returncode, 2, f"{args} exit")
        check("mt-trace" in p.stderr and "--help" in p.stderr, f"{args} message: {p.stderr!r}")
    p = run("summary", os.path.join(tmp, "missing.mtt"), ok=False)
    eq(p.returncode, 2, "missing file exit")
    check("missing.mtt" in p.stderr, "missing file named")
    p = run("summary", trace)
    check("per iteration" in p.stdout and "setup" in p.stdout, "text summary has the table")


def t_summary(tmp):
    s = summary(gen("basic", os.path.join(tmp, "basic.mtt")))
    tr = s["trace"]
    eq(tr["source"], "mttrace-gen", "source")
    eq(tr["device"], "Test GPU <&>", "device")
    eq(tr["clock"], "virtual", "clock")
    eq(tr["chunk_bytes"], C, "chunk_bytes")
    eq(tr["gpu_budget"], 12 * MIB, "gpu_budget")
    eq(tr["records"], 34, "records")

    # setup: 3 allocations (small region 3 on the GPU at once), one app copy
    st = s["setup"]
    eq(st["start_ns"], 0, "setup start")
    eq(st["wall_ns"], 1000, "setup wall")
    eq(st["allocations"], 3, "setup allocations")
    eq(st["alloc_bytes"], 10 * MIB + S, "setup alloc bytes")
    eq(st["bytes"]["h2d"], {"app": 6 * MIB, "pager": 0}, "setup h2d")
    eq(st["peak_gpu_bytes"], S, "setup peak gpu")

    it = s["iterations"]
    eq([r["iteration"] for r in it], [0, 1], "iteration numbers")
    # iteration 0: r1 (3 chunks) first touched -> 3C+S; evict r1c0 dirty -> 2C+S, host C;
    # r2 whole (2 chunks) -> 4C+S; evict r1c1 clean -> 3C+S, host 2C; fetch r1c0 -> 4C+S, host C;
    # prefetch r1c1 (t 2900) -> 5C+S, host 0; launch at 3000 uses it: used and timely.
    i0 = it[0]
    eq((i0["start_ns"], i0["wall_ns"]), (1000, 4000), "iter0 start/wall")
    eq((i0["stall_ns"], i0["stalls"]), (500, 1), "iter0 stalls")
    near(i0["stall_share"], 0.125, "iter0 stall share")
    eq(i0["launches"], 3, "iter0 launches")
    eq(i0["bytes"]["h2d"], {"app": 0, "pager": 4 * MIB}, "iter0 h2d")
    eq(i0["bytes"]["d2h"], {"app": 0, "pager": 2 * MIB}, "iter0 d2h")
    eq((i0["fetches"], i0["fetches_to_gpu"], i0["fetch_bytes"]), (2, 2, 4 * MIB), "iter0 fetches")
    eq((i0["evictions"], i0["evictions_dirty"], i0["evictions_clean"], i0["evict_bytes"]),
       (2, 1, 1, 4 * MIB), "iter0 evictions")
    eq((i0["peak_gpu_bytes"], i0["peak_host_bytes"], i0["peak_nvme_bytes"]), (5 * C + S, 2 * C, 0), "iter0 peaks")
    eq((i0["prefetches"], i0["prefetch_used"], i0["prefetch_timely"]), (1, 1, 1), "iter0 prefetch counts")
    near(i0["prefetch_coverage"], 0.5, "iter0 coverage")
    near(i0["prefetch_accuracy"], 1.0, "iter0 accuracy")
    near(i0["prefetch_timeliness"], 1.0, "iter0 timeliness")

    # iteration 1 starts at 5C+S; evict r2c0 -> 4C+S, host C; prefetch r2c0 -> 5C+S (wasted:
    # evicted at 5300 before any use) -> 4C+S, host C; launch at 5400 needs r2c0 (awaited);
    # prefetch r2c0 at 5600 lands late: used, not timely -> 5C+S, host 0; free r2 -> 3C+S;
    # free small r3 -> 3C.
    i1 = it[1]
    eq((i1["start_ns"], i1["wall_ns"]), (5000, 4000), "iter1 start/wall")
    eq((i1["stall_ns"], i1["stalls"]), (300, 1), "iter1 stalls")
    near(i1["stall_share"], 0.075, "iter1 stall share")
    eq(i1["launches"], 2, "iter1 launches")
    eq(i1["frees"], 2, "iter1 frees")
    eq(i1["bytes"]["h2d"], {"app": 0, "pager": 4 * MIB}, "iter1 h2d")
    eq(i1["bytes"]["d2h"], {"app": 0, "pager": 2 * MIB}, "iter1 d2h")
    eq(i1["bytes"]["d2d"], {"app": MIB, "pager": 0}, "iter1 d2d")
    eq(i1["bytes"]["set"], {"app": 512, "pager": 0}, "iter1 set")
    eq(i1["bytes"]["nvme_read"], {"app": 0, "pager": 0}, "iter1 nvme read")
    eq((i1["fetches"], i1["evictions"], i1["evictions_dirty"]), (2, 2, 1), "iter1 moves")
    eq((i1["peak_gpu_bytes"], i1["peak_host_bytes"]), (5 * C + S, C), "iter1 peaks")
    eq((i1["prefetches"], i1["prefetch_used"], i1["prefetch_timely"]), (2, 1, 0), "iter1 prefetch counts")
    near(i1["prefetch_coverage"], 1.0, "iter1 coverage")
    near(i1["prefetch_accuracy"], 0.5, "iter1 accuracy")
    near(i1["prefetch_timeliness"], 0.0, "iter1 timeliness")
    eq((i1["opt_steps"], i1["opt_ns"]), (1, 1000), "iter1 optimizer")

    t = s["total"]
    eq((t["start_ns"], t["wall_ns"], t["stall_ns"], t["stalls"]), (0, 9000, 800, 2), "total times")
    near(t["stall_share"], 800 / 9000, "total stall share")
    eq((t["launches"], t["allocations"], t["frees"]), (5, 3, 2), "total counts")
    eq(t["bytes"]["h2d"], {"app": 6 * MIB, "pager": 8 * MIB}, "total h2d")
    eq(t["bytes"]["d2h"], {"app": 0, "pager": 4 * MIB}, "total d2h")
    eq((t["fetches"], t["evictions"], t["evictions_dirty"], t["evictions_clean"]), (4, 4, 2, 2), "total moves")
    eq((t["peak_gpu_bytes"], t["peak_host_bytes"]), (5 * C + S, 2 * C), "total peaks")
    eq((t["prefetches"], t["prefetch_used"], t["prefetch_timely"]), (3, 2, 1), "total prefetch counts")
    near(t["prefetch_coverage"], 0.75, "total coverage")
    near(t["prefetch_accuracy"], 2 / 3, "total accuracy")
    near(t["prefetch_timeliness"], 0.5, "total timeliness")


def t_noiter(tmp):
    s = summary(gen("noiter", os.path.join(tmp, "n.mtt")))
    eq(s["setup"], None, "no setup row")
    eq(len(s["iterations"]), 1, "one iteration")
    i0 = s["iterations"][0]
    eq((i0["iteration"], i0["start_ns"], i0["wall_ns"]), (0, 10, 90), "iteration 0 spans the trace")
    eq((i0["launches"], i0["peak_gpu_bytes"], i0["bytes"]["h2d"]["app"]), (1, 2 * C, 1000), "iteration 0 values")
    eq(i0["prefetch_coverage"], None, "no fetches: coverage null")


def t_unordered(tmp):
    s = summary(gen("unordered", os.path.join(tmp, "u.mtt")))
    t = s["total"]
    eq((t["prefetches"], t["prefetch_used"], t["prefetch_timely"]), (1, 1, 1), "sorted by time: timely prefetch")
    eq((t["peak_gpu_bytes"], t["peak_host_bytes"]), (C, C), "peaks")


def t_timeline(tmp):
    trace = gen("basic", os.path.join(tmp, "b.mtt"))
    out = os.path.join(tmp, "b.json")
    run("timeline", trace, "-o", out)
    with open(out, encoding="utf-8") as f:
        text = f.read()
    doc = json.loads(text)
    subprocess.run([sys.executable, "-m", "json.tool", out], check=True, stdout=subprocess.DEVNULL)
    ev = doc["traceEvents"]
    by = {}
    for e in ev:
        by.setdefault(e["ph"], []).append(e)
    xs = by.get("X", [])
    eq(len([e for e in xs if e["cat"] == "kernel"]), 5, "kernel events")
    eq(len([e for e in xs if e["cat"] == "copy"]), 9, "copy events")
    eq(len([e for e in xs if e["cat"] == "stall"]), 2, "stall events")
    eq(len([e for e in xs if e["cat"] == "optimizer"]), 1, "optimizer events")
    eq(sorted(e["name"] for e in by.get("i", [])), ["iteration 0", "iteration 1"], "iteration marks")
    check(len(by.get("C", [])) >= 4, "residency counters")
    gpu = [e["args"]["bytes"] for e in by.get("C", []) if e["name"] == "GPU resident"]
    eq(max(gpu), 5 * C + S, "GPU counter peak")
    relu = sorted((e["ts"], e["dur"]) for e in xs if e["cat"] == "kernel" and e["name"].startswith("relu"))
    # stream 1: dur 0, so the gap to the next launch (2100 -> 5400) and to the trace's end (5400 -> 9000)
    eq(relu, [(2.1, 3.3), (5.4, 3.6)], "inferred kernel durations")
    names = {e["name"] for e in xs if e["cat"] == "kernel"}
    eq(names, {"gemm<float>", "relu \"q\"\n\ufffd"}, "kernel names from NAME records, escaped")
    tracks = {e["args"]["name"] for e in by.get("M", []) if e["name"] == "thread_name"}
    for t in ("stream 0 kernels", "stream 1 kernels", "stalls (thread 0)", "optimizer", "stream 7 H2D (pager)",
              "stream 0 H2D (app)"):
        check(t in tracks, f"track {t!r}")
    p = run("timeline", trace, "-o", "-")
    eq(json.loads(p.stdout)["traceEvents"], ev, "same JSON on stdout")


def t_plot(tmp):
    trace = gen("basic", os.path.join(tmp, "b.mtt"))
    out = os.path.join(tmp, "b.svg")
    run("plot", trace, "-o", out)
    root = ET.parse(out).getroot()
    eq(root.tag, "{http://www.w3.org/2000/svg}svg", "root element")
    with open(out, encoding="utf-8") as f:
        text = f.read()
    check("<svg" in text, "contains <svg")
    check("href" not in text and "<script" not in text, "self-contained")
    ns = "{http://www.w3.org/2000/svg}"
    lines = root.findall(f".//{ns}polyline")
    eq(len(lines), 4, "GPU, host, H2D, D2H lines")
    texts = " ".join("".join(t.itertext()) for t in root.iter(f"{ns}text"))
    for want in ("Residency", "Link utilisation", "time (ns)", "resident (MiB)", "Test GPU <&>",
                 "peak 10.0 MiB", "GPU budget"):
        check(want in texts, f"plot text {want!r}")


def t_bad_input(tmp):
    good = gen("basic", os.path.join(tmp, "good.mtt"))
    data = open(good, "rb").read()
    cases = {
        "truncated": data[:-12],
        "bad_magic": b"XXTRACE\0" + data[8:],
        "bad_version": data[:8] + (99).to_bytes(4, "little") + data[12:],
        "garbage": bytes((i * 131 + 7) % 256 for i in range(1000)),
        "empty": b"",
        "short_header": data[:100],
        "bad_record": data[:200] + b"\x03\x00\x00\x00\x0c\x00\x00\x00" + bytes(8),
    }
    for name, blob in cases.items():
        path = os.path.join(tmp, name + ".mtt")
        with open(path, "wb") as f:
            f.write(blob)
        for cmd in ("summary", "timeline", "plot"):
            out = os.path.join(tmp, f"{name}.{cmd}.out")
            args = [cmd, path] + (["-o", out] if cmd != "summary" else [])
            p = run(*args, ok=False)
            eq(p.returncode, 2, f"{name} {cmd} exit")
            check("byte" in p.stderr, f"{name} {cmd} message names the byte: {p.stderr!r}")
            eq(len(p.stderr.strip().splitlines()), 1, f"{name} {cmd} one message")
            check(not os.path.exists(out), f"{name} {cmd} leaves no output")


def t_stream(tmp):
    n = 200000
    s = summary(gen("big", os.path.join(tmp, "big.mtt"), str(n)))
    t = s["total"]
    eq(t["launches"], n, "launches")
    eq(len(s["iterations"]), n // 1000, "iterations")
    eq((t["fetches"], t["evictions"]), (n - 64, n - 64), "moves")
    eq((t["prefetches"], t["prefetch_used"], t["prefetch_timely"]), ((n - 64) // 2,) * 3, "prefetches")
    # 64 regions x 2 chunks all on the GPU at first; from then on 32 chunk-0s are on the host,
    # 33 for the moment between each eviction and the fetch that follows it
    eq((t["peak_gpu_bytes"], t["peak_host_bytes"]), (128 * C, 33 * C), "peaks")


TESTS = {name[2:]: fn for name, fn in globals().items() if name.startswith("t_")}

if __name__ == "__main__":
    if len(sys.argv) != 4 or sys.argv[1] not in TESTS:
        sys.exit(__doc__)
    MT, GEN = sys.argv[2], sys.argv[3]
    with tempfile.TemporaryDirectory() as tmp:
        TESTS[sys.argv[1]](tmp)
    print(f"{sys.argv[1]}: {'FAIL' if failures else 'ok'}")
    sys.exit(1 if failures else 0)
