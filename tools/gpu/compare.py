"""compare.py - compares the outputs of a plain and a preloaded run of one
tools/gpu-check.sh step (torch_check.py's line protocol).

    python3 tools/gpu/compare.py PLAIN_STDOUT PRELOADED_STDOUT

Lines "exact NAME VALUE" must be present in both runs and equal as text;
lines "approx NAME FLOAT" must agree within a relative RTOL (1e-4), for
results that depend on timed choices such as cuDNN's benchmark mode; a line
"rtol R" in the plain run's output sets RTOL to R for that comparison
(examples/train.py --report rtol=R: a host optimizer against torch's states
its own tolerance). Other lines are ignored. Prints one line, "same: ..." or "DIFFERENT: ...", and
exits 0 when the runs agree, 1 when they do not or nothing was compared.
"""
import sys

RTOL = 1e-4


def facts(path):
    """(exact, approx, rtol): rtol is None unless the output has an "rtol R" line."""
    exact, approx, rtol = {}, {}, None
    try:
        with open(path, errors="replace") as f:
            for line in f:
                parts = line.split()
                if len(parts) == 3 and parts[0] == "exact":
                    exact[parts[1]] = parts[2]
                elif len(parts) == 2 and parts[0] == "rtol":
                    try:
                        rtol = float(parts[1])
                    except ValueError:
                        pass
                elif len(parts) == 3 and parts[0] == "approx":
                    try:
                        approx[parts[1]] = float(parts[2])
                    except ValueError:
                        approx[parts[1]] = float("nan")
    except OSError:
        pass
    return exact, approx, rtol


def main():
    if len(sys.argv) != 3:
        print("usage: compare.py PLAIN_STDOUT PRELOADED_STDOUT", file=sys.stderr)
        return 2
    pe, pa, prtol = facts(sys.argv[1])
    qe, qa, _ = facts(sys.argv[2])
    rtol = RTOL if prtol is None else prtol
    bad = []
    for name in sorted(set(pe) | set(qe)):
        a, b = pe.get(name, "(missing)"), qe.get(name, "(missing)")
        if a != b:
            bad.append(f"{name} {a} vs {b}")
    worst = 0.0
    for name in sorted(set(pa) | set(qa)):
        a, b = pa.get(name), qa.get(name)
        if a is None or b is None:
            bad.append(f"{name} {a} vs {b}")
            continue
        rel = abs(a - b) / max(abs(a), abs(b), 1e-30)
        if not rel <= rtol:  # also catches NaN
            bad.append(f"{name} {a!r} vs {b!r} (relative {rel:.2g})")
        else:
            worst = max(worst, rel)
    if bad:
        print("DIFFERENT: " + "; ".join(bad[:6]) + (f"; and {len(bad) - 6} more" if len(bad) > 6 else ""))
        return 1
    if not pe and not pa:
        print("DIFFERENT: nothing to compare (no exact/approx lines in the plain run)")
        return 1
    what = f"{len(pe)} bit-identical"
    if pa:
        what += f", {len(pa)} within {rtol:g} (worst relative {worst:.2g})"
    print("same: " + what)
    return 0


if __name__ == "__main__":
    sys.exit(main())
