"""stats_summary.py - Markdown summary of the `mtalloc: stats {json}` line
that libmtalloc.so prints at exit with MT_STATS=1, for tools/gpu-check.sh.

    python3 tools/gpu/stats_summary.py [--budget BYTES] LOG...

Takes the last stats line found in the LOGs (stdout and stderr of one run)
and prints: the allocation and launch entry points the interposer saw, by
route (direct symbol, dlsym, cuGetProcAddress), the paging counters, whether
the peak resident bytes stayed within BUDGET, and host_mapped. Prints a
note instead when no stats line is there (library not loaded, or still a
pass-through). Exit 0 always, unless the arguments are wrong (2).
"""
import argparse
import json
import re
import sys

PREFIX = "mtalloc: stats "
ROUTES = ("direct", "dlsym", "procaddr")
# cuMemAllocHost is pinned host memory, not device memory: not an allocation here
ALLOC = re.compile(r"^cuMem(Alloc(?!Host)|Create$|AddressReserve$)")
LAUNCH = re.compile(r"^cuLaunch")


def find_stats(paths):
    found = None
    for path in paths:
        try:
            with open(path, errors="replace") as f:
                for line in f:
                    i = line.find(PREFIX)
                    if i >= 0:
                        found = line[i + len(PREFIX):].strip()
        except OSError:
            pass
    return found


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
    ap.add_argument("logs", nargs="+")
    a = ap.parse_args()
    raw = find_stats(a.logs)
    if raw is None:
        print("- no `mtalloc: stats` line in the logs: the library did not load, or it does "
              "not print stats yet (pass-through build)")
        return 0
    try:
        st = json.loads(raw)
    except ValueError as e:
        print(f"- the `mtalloc: stats` line is not valid JSON ({e}): `{raw[:200]}`")
        return 0
    calls = st.get("calls") or {}
    lines, n_alloc = table(calls, ALLOC, "allocation entry point")
    print("\n".join(lines))
    print()
    lines, n_launch = table(calls, LAUNCH, "launch entry point")
    print("\n".join(lines))
    print()
    if n_alloc == 0 or n_launch == 0:
        print(f"- **the interposer saw {n_alloc} allocation(s) and {n_launch} launch(es)**: "
              "some route is not hooked")

    def g(k):
        v = st.get(k)
        return v if isinstance(v, (int, float)) else 0

    print(f"- counters: allocs {g('allocs')}, frees {g('frees')}, launches {g('launches')}, "
          f"regions_peak {g('regions_peak')}, escaped_regions {g('escaped_regions')}")
    print(f"- paging: fetches {g('fetches')}, evictions dirty {g('evictions_dirty')} / clean "
          f"{g('evictions_clean')}, stalls {g('stalls')} ({g('stall_ns') / 1e6:.1f} ms), "
          f"h2d {mib(g('bytes_h2d'))}, d2h {mib(g('bytes_d2h'))}")
    peak = g("peak_resident_bytes")
    if a.budget:
        ok = "yes" if peak <= a.budget else "**NO**"
        print(f"- peak resident {mib(peak)} within MT_MAX_VRAM {mib(a.budget)}: {ok}")
    else:
        print(f"- peak resident {mib(peak)}")
    hm = st.get("host_mapped")
    print(f"- host-located mappings (host_mapped): {hm!r}"
          + (" -- evicted chunks stayed mapped to host memory" if hm else
             " -- none made (unsupported, disabled, or nothing evicted)"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
