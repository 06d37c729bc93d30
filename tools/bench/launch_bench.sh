#!/usr/bin/env bash
# launch_bench.sh - the interposer's overhead per cuLaunchKernel and per
# cuMemAlloc_v2+cuMemFree_v2 pair, on the fake CUDA driver.
#
#   tools/bench/launch_bench.sh [RUNS] [REGIONS]     (defaults: 5 runs, 100000 regions)
#   env: BUILD=build (the meson build folder)
#
# Runs build/tools/bench/launch_bench RUNS times plain (LD_LIBRARY_PATH at the
# fake driver) and RUNS times under LD_PRELOAD=libmtalloc.so, alternating, so
# drift in machine load hits both sides alike. Each run reports medians over
# batches; the table shows the median over runs (and the min..max of the run
# medians, to show the noise). Overhead = preloaded - plain: the fake driver's
# own cost (queueing each launch to a worker thread, its allocation table) is
# in both. Target: launch overhead under 1000 ns.
# Exit: 0 done, 1 a run failed (its log is printed), 2 not built / bad usage.
set -euo pipefail

cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
RUNS=${1:-5}
REGIONS=${2:-100000}
BENCH=$BUILD/tools/bench/launch_bench
FAKE_DIR=$BUILD/tests/fakecuda
PRELOAD=$PWD/$BUILD/preload/libmtalloc.so

[[ $RUNS =~ ^[1-9][0-9]*$ && $REGIONS =~ ^[1-9][0-9]*$ ]] || {
  echo "usage: $0 [RUNS] [REGIONS]" >&2
  exit 2
}
for f in "$BENCH" "$FAKE_DIR/libcuda.so.1" "$PRELOAD"; do
  [[ -e $f ]] || { echo "launch_bench.sh: $f missing; run: meson compile -C $BUILD" >&2; exit 2; }
done

logs=$(mktemp -d /tmp/launch_bench.XXXXXX)
trap 'rm -rf "$logs"' EXIT

run_one() { # mode index
  local log=$logs/$1.$2
  local -a env=(LD_LIBRARY_PATH="$FAKE_DIR")
  [[ $1 == preload ]] && env+=(LD_PRELOAD="$PRELOAD" MT_STATS=1)
  if ! env "${env[@]}" timeout 600 "$BENCH" "$REGIONS" >"$log.out" 2>"$log.err"; then
    echo "launch_bench.sh: $1 run $2 failed:" >&2
    cat "$log.out" "$log.err" >&2
    exit 1
  fi
}

for ((i = 1; i <= RUNS; i++)); do
  printf 'run %d/%d: plain ' "$i" "$RUNS" >&2
  run_one plain "$i"
  printf 'preloaded ' >&2
  run_one preload "$i"
  printf '\n' >&2
done

# value KEY MODE -> "median min max" of KEY over that mode's runs
value() {
  grep -h "^$1 " "$logs"/"$2".*.out | awk '{print $2}' | sort -g | awk '
    { v[NR] = $1 }
    END { m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
          printf "%.1f %.1f %.1f\n", m, v[1], v[NR] }'
}

grep -h '^#' "$logs/plain.1.out"
echo "# $RUNS runs each, alternating plain/preloaded; cells: median over runs [min..max of run medians], ns"
printf '%-28s %-28s %-28s %s\n' "" "plain" "preloaded" "overhead"
for row in "launch_ns:cuLaunchKernel (ns/launch)" \
           "alloc_free_4096_ns:alloc+free 4 KiB (ns/pair)" \
           "alloc_free_8388608_ns:alloc+free 8 MiB (ns/pair)"; do
  key=${row%%:*}
  read -r pm plo phi < <(value "$key" plain)
  read -r qm qlo qhi < <(value "$key" preload)
  printf '%-28s %-28s %-28s %+.1f\n' "${row#*:}" "$pm [$plo..$phi]" "$qm [$qlo..$qhi]" \
    "$(awk -v a="$qm" -v b="$pm" 'BEGIN { print a - b }')"
done
read -r lm _ < <(value launch_ns plain)
read -r qm _ < <(value launch_ns preload)
awk -v a="$qm" -v b="$lm" 'BEGIN { d = a - b
  printf "launch overhead %.1f ns: %s the 1000 ns target\n", d, d < 1000 ? "within" : "OVER" }'

stats=$(grep -h '^mtalloc: stats ' "$logs/preload.1.err" | tail -n 1 || true)
if [[ -n $stats ]]; then
  echo "preloaded run 1: $stats"
else
  echo "preloaded runs printed no 'mtalloc: stats' line (MT_STATS=1): the library is still a pass-through"
fi
