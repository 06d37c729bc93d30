"""stats_summary.py - Markdown summary of the `mtalloc: stats {json}` line
that libmtalloc.so prints at exit with MT_STATS=1, and the hard checks
tools/gpu-check.sh makes on it.

    python3 tools/gpu/stats_summary.py [--budget BYTES] [--check]
        [--oversubscribed] [--allow-bypass] [--verdict FILE] LOG...

Takes the stats line found in the LOGs (stdout and stderr of one run; of
several, the most active one) and prints: the allocation and launch entry points the interposer saw, by
route (direct symbol, dlsym, cuGetProcAddress), the paging counters, whether
the peak resident bytes stayed within BUDGET, host_mapped, and every other
numeric field (so counters added later show up without a change here).

With --check, these are failures (one "FAIL ..." line each in the verdict
file and on stdout, exit 1):
  - no stats line, or one that is not JSON;
  - a REQUIRED field absent (the library predates this check);
  - zero allocations or zero launches through mtalloc;
  - peak_resident_bytes above BUDGET;
  - with --oversubscribed, zero evictions (the budget was not exercised);
  - launches_unknown_layout > 0 (kernels scanned without a parameter layout);
  - bypassed_bytes > 0 (allocations that went around mtalloc), unless
    --allow-bypass.
The two last fields are being added (issue 7); where absent they are listed
as "absent", not failed. The verdict file also gets one "key ..." line with
the numbers for the report's table. Exit 2 on bad arguments.
"""
import argparse
import json
import re
import sys

PREFIX = "mtalloc: stats "
REQUIRED = ("allocs", "launches", "peak_resident_bytes", "evictions_dirty", "evictions_clean")
OPTIONAL = ("launches_unknown_layout", "bypassed_bytes")
ROUTES = ("direct", "dlsym", "procaddr")
# cuMemAllocHost is pinned host memory, not device memory: not an allocation here
ALLOC = re.compile(r"^cuMem(Alloc(?!Host)|Create$|AddressReserve$)")
LAUNCH = re.compile(r"^cuLaunch")


def find_stats(paths):
    """The stats line of the run's main process: where child processes that
    also loaded the library printed one too (Triton's and Inductor's
    helpers), the line with the most allocations and launches. Returns
    (raw JSON text or None, number of stats lines seen)."""
    best, best_score, seen = None, -1, 0
    for path in paths:
        try:
            with open(path, errors="replace") as f:
                for line in f:
                    i = line.find(PREFIX)
                    if i < 0:
                        continue
                    seen += 1
                    raw = line[i + len(PREFIX):].strip()
                    try:
                        st = json.loads(raw)
                        score = int(st.get("allocs", 0) or 0) + int(st.get("launches", 0) or 0)
                    except (ValueError, TypeError, AttributeError):
                        score = 0
                    if score > best_score:
                        best, best_score = raw, score
        except OSError:
            pass
    return best, seen


def mib(n):
    return f"{n / (1 << 20):.1f} MiB"


def table(calls, pattern, title):
    rows = [(sym, calls[sym]) for sym in sorted(calls) if pattern.search(sym)]
    out = [f"| {title} | direct | dlsym | procaddr |", "|---|---:|---:|---:|"]
    total = dict.fromkeys(ROUTES, 0)
    for sym, by in rows:
        if not isinstance(by, dict):
            continue
        out.append(f"| `{sym}` | " + " | ".join(str(by.get(r, 0)) for r in ROUTES) + " |")
        for r in ROUTES:
            total[r] += int(by.get(r, 0) or 0)
    out.append("| **total** | " + " | ".join(str(total[r]) for r in ROUTES) + " |")
    return out, sum(total.values())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--budget", type=int, default=0, help="MT_MAX_VRAM of the run, bytes")
    ap.add_argument("--check", action="store_true", help="fail (exit 1) on the hard criteria")
    ap.add_argument("--oversubscribed", action="store_true", help="the run must have evicted")
    ap.add_argument("--allow-bypass", action="store_true", help="bypassed_bytes > 0 is expected")
    ap.add_argument("--verdict", help="write the key and FAIL lines here")
    ap.add_argument("logs", nargs="+")
    a = ap.parse_args()
    fails = []
    key = summarise(a, fails)
    if a.check:
        for f in fails:
            print(f"- **FAIL**: {f}")
    if a.verdict:
        with open(a.verdict, "w") as out:
            out.write(f"key {key}\n")
            if a.check:
                out.writelines(f"FAIL {f}\n" for f in fails)
    return 1 if a.check and fails else 0


def summarise(a, fails):
    """Prints the Markdown summary; appends hard failures to FAILS; returns
    the one-line key numbers."""
    raw, seen = find_stats(a.logs)
    if seen > 1:
        print(f"- {seen} stats lines (child processes loaded the library too): the one with "
              "the most allocations and launches is summarised")
    if raw is None:
        print("- no `mtalloc: stats` line in the logs: the library did not load, did not "
              "reach its exit handler (crash, kill), or printed nothing")
        fails.append("no stats line (library not loaded, or the process died before exit)")
        return "no stats line"
    try:
        st = json.loads(raw)
    except ValueError as e:
        print(f"- the `mtalloc: stats` line is not valid JSON ({e}): `{raw[:200]}`")
        fails.append("stats line is not JSON")
        return "stats line not JSON"
    calls = st.get("calls") or {}
    lines, n_alloc = table(calls, ALLOC, "allocation entry point")
    print("\n".join(lines))
    print()
    lines, n_launch = table(calls, LAUNCH, "launch entry point")
    print("\n".join(lines))
    print()

    def g(k):
        v = st.get(k)
        return v if isinstance(v, (int, float)) else 0

    absent = [k for k in REQUIRED if not isinstance(st.get(k), (int, float))]
    if absent:
        fails.append("required stats field(s) absent: " + ", ".join(absent))
    print(f"- counters: allocs {g('allocs')}, frees {g('frees')}, launches {g('launches')}, "
          f"regions_peak {g('regions_peak')}, escaped_regions {g('escaped_regions')}")
    if g("allocs") == 0 or g("launches") == 0:
        fails.append(f"{g('allocs')} allocation(s) and {g('launches')} launch(es) through mtalloc "
                     f"(entry points seen: {n_alloc} allocation, {n_launch} launch calls)")
    evictions = g("evictions_dirty") + g("evictions_clean")
    print(f"- paging: fetches {g('fetches')}, evictions dirty {g('evictions_dirty')} / clean "
          f"{g('evictions_clean')}, stalls {g('stalls')} ({g('stall_ns') / 1e6:.1f} ms), "
          f"h2d {mib(g('bytes_h2d'))}, d2h {mib(g('bytes_d2h'))}")
    if a.oversubscribed and evictions == 0:
        fails.append("zero evictions in an oversubscribed step")
    peak = g("peak_resident_bytes")
    if a.budget:
        ok = peak <= a.budget
        print(f"- peak resident {mib(peak)} within MT_MAX_VRAM {mib(a.budget)}: "
              f"{'yes' if ok else '**NO**'}")
        if not ok:
            fails.append(f"peak resident {peak} bytes above the budget {a.budget}")
    else:
        print(f"- peak resident {mib(peak)}")
    hm = st.get("host_mapped")
    print(f"- host-located mappings (host_mapped): {hm!r}"
          + (" -- evicted chunks stayed mapped to host memory" if hm else
             " -- none made (unsupported, disabled, or nothing evicted)"))
    opt = []
    for k in OPTIONAL:
        v = st.get(k)
        if not isinstance(v, (int, float)):
            opt.append(f"{k} absent")
            continue
        opt.append(f"{k} {v}")
        if v > 0 and not (k == "bypassed_bytes" and a.allow_bypass):
            fails.append(f"{k} = {v}")
    print("- " + ", ".join(opt))
    known = set(REQUIRED) | set(OPTIONAL) | {
        "calls", "frees", "regions_peak", "escaped_regions", "fetches", "stalls", "stall_ns",
        "bytes_h2d", "bytes_d2h", "host_mapped"}
    other = [f"{k} {v}" for k, v in st.items() if k not in known and isinstance(v, (int, float))]
    if other:
        print("- other fields: " + ", ".join(other))
    key = (f"allocs {g('allocs')}, launches {g('launches')}, evictions {evictions}, "
           f"peak {mib(peak)}" + (f" of {mib(a.budget)}" if a.budget else "")
           + "; " + ", ".join(opt))
    return key


if __name__ == "__main__":
    sys.exit(main())
