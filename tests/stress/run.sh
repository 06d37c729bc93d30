#!/bin/sh
# Description: runs a stress program the way its meson test needs.
#   run.sh preload LIB PROGRAM [ARGS...]
#     PROGRAM --preloaded ARGS under LD_PRELOAD=$MT_TEST_PRELOAD_PREFIX LIB with
#     MT_STATS=1 (MT_MAX_VRAM and the rest come from the environment). When the
#     program passed (0), the library's exit line "mtalloc: stats {json}" must
#     appear exactly once and report evictions_dirty + evictions_clean > 0.
#     77 (the library does not export mt_stats_json yet) passes through as a skip.
#   run.sh preload-fault LIB KERNEL PROGRAM [ARGS...]
#     As preload, but the program must be killed by the fake driver's
#     illegal-address report (exit 86) naming kernel KERNEL.
#   run.sh expect-mismatch PROGRAM [ARGS...]
#     PROGRAM must exit 1 and print a MISMATCH line (the checker's self-test).
set -u
mode=$1
shift
out=$(mktemp "${TMPDIR:-/tmp}/mt-stress.XXXXXX") || exit 1
trap 'rm -f "$out"' EXIT
fail() { echo "run.sh: FAIL: $1"; exit 1; }

case $mode in
preload)
  lib=$1
  prog=$2
  shift 2
  LD_PRELOAD="${MT_TEST_PRELOAD_PREFIX:-}$lib" MT_STATS=1 "$prog" --preloaded "$@" >"$out" 2>&1
  rc=$?
  cat "$out"
  [ "$rc" = 0 ] || exit "$rc"
  n=$(grep -c '^mtalloc: stats {' "$out")
  [ "$n" = 1 ] || fail "expected one 'mtalloc: stats {...}' line at exit with MT_STATS=1, got $n"
  line=$(grep '^mtalloc: stats {' "$out")
  dirty=$(printf '%s\n' "$line" | sed -n 's/.*"evictions_dirty" *: *\([0-9][0-9]*\).*/\1/p')
  clean=$(printf '%s\n' "$line" | sed -n 's/.*"evictions_clean" *: *\([0-9][0-9]*\).*/\1/p')
  [ -n "$dirty" ] && [ -n "$clean" ] || fail "stats line lacks evictions_dirty/evictions_clean"
  [ $((dirty + clean)) -gt 0 ] || fail "stats line reports no evictions under the budget"
  echo "run.sh: stats line ok (evictions_dirty=$dirty evictions_clean=$clean)"
  ;;
preload-fault)
  lib=$1
  kernel=$2
  prog=$3
  shift 3
  LD_PRELOAD="${MT_TEST_PRELOAD_PREFIX:-}$lib" MT_STATS=1 "$prog" --preloaded "$@" >"$out" 2>&1
  rc=$?
  cat "$out"
  [ "$rc" = 86 ] || fail "expected the fake's illegal-address exit (86), got $rc"
  grep -q "illegal address .* in kernel $kernel" "$out" ||
    fail "no illegal-address report naming kernel $kernel"
  echo "run.sh: kernel $kernel faulted as expected"
  ;;
expect-mismatch)
  "$@" >"$out" 2>&1
  rc=$?
  cat "$out"
  [ "$rc" = 1 ] || fail "expected exit 1 from a corrupted run, got $rc"
  grep -q 'MISMATCH' "$out" || fail "no MISMATCH reported for the corrupted byte"
  echo "run.sh: corruption detected"
  ;;
*)
  fail "unknown mode $mode"
  ;;
esac
