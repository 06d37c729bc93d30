#!/bin/bash
# Description: the end-to-end proof that paging is transparent. Runs tinytrain
#   (a) on the fake driver alone,
#   (b) under LD_PRELOAD=libmtalloc.so with no memory limit,
#   (c) under LD_PRELOAD=libmtalloc.so with MT_MAX_VRAM = footprint/8 (the
#       footprint tinytrain reports in (a)) and MT_STATS=1,
# and asserts: the three print bit-identical `step N loss X` lines (and the
# same accuracy, launch count and footprint); the loss decreased; in (a) the
# fake's peak covers the footprint tinytrain counted; in (c) the fake's peak
# device usage stays within the budget, the pager evicted and fetched
# (evictions_dirty + evictions_clean > 0, fetches > 0), and it saw every
# kernel launch tinytrain made.
# (e) as (c) with MT_PREDICTOR=correlation: the same lines bit for bit, and
#     prefetches made and used.
# (f) one step with MT_PREDICTOR_MEM=1K: runs, with one warning that the
#     least (64K) is used.
# With TINYTRAIN_NVME_DIR (a directory on a disk with O_DIRECT) also
#   (d) MT_MAX_VRAM = footprint/8, MT_MAX_HOST = footprint/4 and
#       MT_OFFLOAD_DIR=TINYTRAIN_NVME_DIR and MT_POLICY=lru (the other runs
#       use the default, nextuse): the same lines bit for bit, NVMe
#       bytes both ways in the stats, and nothing left in the directory.
#
# Usage: tinytrain_check.sh TINYTRAIN LIBMTALLOC_SO FAKECUDA_DIR
#        tinytrain_check.sh --plain TINYTRAIN FAKECUDA_DIR   (run (a) only)
# Environment: MT_TEST_PRELOAD_PREFIX is put in front of LD_PRELOAD (under
# ASan: the ASan runtime and ':'); TINYTRAIN_STEPS (default 8);
# TINYTRAIN_JITTER_US, the fake's stream jitter in (b) and (c) (default 20),
# so a synchronisation the interposer loses shows up as a different loss.
# Exit 0: all assertions hold; 1: a message per failed assertion.
set -u

plain=0
if [ "${1:-}" = --plain ]; then
  plain=1
  shift
  [ $# -eq 2 ] || { echo "usage: $0 --plain TINYTRAIN FAKECUDA_DIR" >&2; exit 2; }
  tt=$1 fakedir=$2 lib=
else
  [ $# -eq 3 ] || { echo "usage: $0 TINYTRAIN LIBMTALLOC_SO FAKECUDA_DIR" >&2; exit 2; }
  tt=$1 lib=$2 fakedir=$3
fi
steps=${TINYTRAIN_STEPS:-8}
jitter=${TINYTRAIN_JITTER_US:-20}
prefix=${MT_TEST_PRELOAD_PREFIX:-}
# The fake reports illegal addresses from its own SIGSEGV handler; ASan must
# let it.
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}handle_segv=0:allow_user_segv_handler=1"
unset MT_MAX_VRAM MT_STATS LD_PRELOAD

# absolute paths: LD_PRELOAD and LD_LIBRARY_PATH must not depend on the cwd
abspath() { (cd "$(dirname "$1")" 2>/dev/null && printf '%s/%s\n' "$(pwd)" "$(basename "$1")") || printf '%s\n' "$1"; }
tt=$(abspath "$tt") fakedir=$(abspath "$fakedir")
[ -z "$lib" ] || lib=$(abspath "$lib")
[ -x "$tt" ] || { echo "tinytrain_check: $tt is not an executable"; exit 1; }
[ -e "$fakedir/libcuda.so.1" ] || { echo "tinytrain_check: no libcuda.so.1 in $fakedir"; exit 1; }
[ -z "$lib" ] || [ -e "$lib" ] || { echo "tinytrain_check: $lib does not exist"; exit 1; }

export LD_LIBRARY_PATH="$fakedir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/tinytrain_check.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
failed=0
fail() { echo "tinytrain_check: FAIL: $*"; failed=1; }
note() { echo "tinytrain_check: $*"; }

# run NAME [VAR=value ...]: runs tinytrain with the extra environment; output
# in $tmp/NAME.out (stdout) and $tmp/NAME.err (stderr). Returns its status.
run() {
  local name=$1
  shift
  local t0=$SECONDS
  env "$@" "$tt" --steps "$steps" >"$tmp/$name.out" 2>"$tmp/$name.err"
  local rc=$?
  note "run ($name): exit $rc after $((SECONDS - t0)) s  [$*]"
  if [ $rc -gt 128 ] && [ $rc -lt 160 ]; then
    fail "run ($name) was killed by signal $((rc - 128)) ($(kill -l $((rc - 128)))); its last output:"
    tail -n 20 "$tmp/$name.out" "$tmp/$name.err" | sed 's/^/    /'
  elif [ $rc -ne 0 ]; then
    fail "run ($name) exited $rc; its last output:"
    tail -n 20 "$tmp/$name.out" "$tmp/$name.err" | sed 's/^/    /'
  fi
  return $rc
}

# value NAME KEY: the number after "KEY " in run NAME's stdout, or empty.
value() { sed -n "s/^$2 \\([0-9][0-9]*\\)\$/\\1/p" "$tmp/$1.out" | head -n 1; }

# stat KEY: the number for the first "KEY" in the stats JSON of run (c) (the
# top-level one: nested objects come after the counters), or empty.
stat() {
  printf '%s\n' "$stats" | grep -o "\"$1\"[[:space:]]*:[[:space:]]*[0-9][0-9]*" | head -n 1 |
    sed 's/.*:[[:space:]]*//'
}

# Checks one run's own output: a step line per step, loss decreased.
check_losses() {
  local name=$1 n first last
  grep '^step ' "$tmp/$name.out" >"$tmp/$name.steps"
  n=$(wc -l <"$tmp/$name.steps")
  if [ "$n" -ne "$steps" ]; then
    fail "run ($name) printed $n step lines, want $steps"
    return
  fi
  first=$(head -n 1 "$tmp/$name.steps" | awk '{print $4}')
  last=$(tail -n 1 "$tmp/$name.steps" | awk '{print $4}')
  # bash's printf reads hex floats (strtold)
  first=$(printf '%.9g' "$first" 2>/dev/null) || { fail "run ($name): bad loss '$first'"; return; }
  last=$(printf '%.9g' "$last" 2>/dev/null) || { fail "run ($name): bad loss '$last'"; return; }
  if awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < a) }'; then
    note "run ($name): loss $first -> $last over $steps steps ($(grep '^accuracy' "$tmp/$name.out"))"
  else
    fail "run ($name): loss did not decrease: first $first, last $last"
  fi
}

# ---- (a): the fake driver alone ---------------------------------------------
if run a; then
  check_losses a
  footprint=$(value a footprint_bytes)
  largest=$(value a largest_launch_bytes)
  peak_a=$(value a peak_device_bytes)
  launches=$(value a launches)
  if [ -z "$footprint" ] || [ -z "$largest" ] || [ -z "$peak_a" ] || [ -z "$launches" ]; then
    fail "run (a) lacks footprint_bytes, largest_launch_bytes, peak_device_bytes or launches"
  elif [ "$peak_a" -lt "$footprint" ]; then
    fail "run (a): the fake's peak $peak_a < the footprint tinytrain counted, $footprint"
  else
    note "run (a): footprint $footprint bytes, largest launch $largest bytes," \
      "fake peak $peak_a bytes, $launches launches"
  fi
fi
if [ $plain -eq 1 ] || [ $failed -ne 0 ]; then
  if [ $failed -eq 0 ]; then note "ok"; else note "failed (in run (a); the preload runs need its numbers)"; fi
  exit $failed
fi

budget=$((footprint / 8))
note "budget MT_MAX_VRAM = footprint / 8 = $budget bytes"
if [ "$largest" -gt "$budget" ]; then
  fail "tinytrain is mis-sized: its largest launch ($largest bytes) exceeds the budget" \
    "($budget bytes), so no pager could run it"
fi

# ---- (b), (c): under the interposer -----------------------------------------
preload="$prefix$lib"
run b LD_PRELOAD="$preload" FAKECUDA_JITTER_US="$jitter"
rc_b=$?
run c LD_PRELOAD="$preload" FAKECUDA_JITTER_US="$jitter" MT_MAX_VRAM="$budget" MT_STATS=1
rc_c=$?

# same_as_a NAME: run NAME printed the same lines as (a), everything but
# the fake's peak (step lines bit for bit, accuracy, launches, footprint).
grep -v '^peak_device_bytes ' "$tmp/a.out" >"$tmp/a.same"
same_as_a() {
  grep -v '^peak_device_bytes ' "$tmp/$1.out" >"$tmp/$1.same"
  if cmp -s "$tmp/a.same" "$tmp/$1.same"; then
    note "run ($1): $steps step lines (losses bit for bit), accuracy, launches and footprint" \
      "identical to (a)"
  else
    fail "run ($1) printed different results from (a) (diff a $1):"
    diff "$tmp/a.same" "$tmp/$1.same" | head -n 20 | sed 's/^/    /'
  fi
}
[ "$rc_b" -ne 0 ] || same_as_a b # a failed run is already reported
[ "$rc_c" -ne 0 ] || same_as_a c

if [ $rc_c -eq 0 ]; then
  peak_c=$(value c peak_device_bytes)
  if [ -z "$peak_c" ]; then
    fail "run (c) printed no peak_device_bytes"
  elif [ "$peak_c" -gt "$budget" ]; then
    fail "run (c): the fake's peak device usage $peak_c bytes exceeds MT_MAX_VRAM $budget bytes"
  else
    note "run (c): fake peak device usage $peak_c bytes <= budget $budget bytes"
  fi
fi

stats=$(cat "$tmp/c.out" "$tmp/c.err" | grep '^mtalloc: stats {' | tail -n 1)
if [ $rc_c -ne 0 ]; then
  : # its failure is reported; stats from a failed run prove nothing
elif [ -z "$stats" ]; then
  fail "run (c) printed no 'mtalloc: stats {...}' line although MT_STATS=1" \
    "(is the pager in libmtalloc.so yet?)"
else
  note "run (c): $stats"
  missing=
  for key in evictions_dirty evictions_clean fetches launches bytes_h2d bytes_d2h; do
    [ -n "$(stat $key)" ] || missing="$missing $key"
  done
  if [ -n "$missing" ]; then
    fail "run (c): the stats line lacks:$missing"
  else
    evictions=$(($(stat evictions_dirty) + $(stat evictions_clean)))
    fetches=$(stat fetches)
    mt_launches=$(stat launches)
    [ "$evictions" -gt 0 ] || fail "run (c): no evictions at 8x oversubscription: the pager did not page"
    [ "$fetches" -gt 0 ] || fail "run (c): no fetches at 8x oversubscription: the pager did not page"
    [ "$mt_launches" = "$launches" ] ||
      fail "run (c): mtalloc counted $mt_launches launches, tinytrain made $launches"
    note "run (c): evictions $evictions, fetches $fetches, launches $mt_launches" \
      "(tinytrain: $launches), bytes_h2d $(stat bytes_h2d), bytes_d2h $(stat bytes_d2h)"
  fi
fi

# ---- (e): prefetching ----------------------------------------------------------
run e LD_PRELOAD="$preload" FAKECUDA_JITTER_US="$jitter" MT_MAX_VRAM="$budget" MT_PREDICTOR=correlation MT_STATS=1
if [ $? -eq 0 ]; then
  same_as_a e
  stats=$(cat "$tmp/e.out" "$tmp/e.err" | grep '^mtalloc: stats {' | tail -n 1)
  pfs=$(stat prefetches) used=$(stat prefetch_used)
  if [ -z "$pfs" ] || [ "$pfs" -eq 0 ] || [ -z "$used" ] || [ "$used" -eq 0 ]; then
    fail "run (e): no prefetch was made and used (prefetches '$pfs', prefetch_used '$used')"
  else
    note "run (e): $pfs chunks prefetched, $used used, $(stat prefetch_late) uses waited for the copy;" \
      "fetches $(stat fetches)"
  fi
fi

# ---- (f): a bad MT_PREDICTOR_MEM: one warning, the least used, the run goes on --
env LD_PRELOAD="$preload" MT_MAX_VRAM="$budget" MT_PREDICTOR_MEM=1K "$tt" --steps 1 >"$tmp/f.out" 2>"$tmp/f.err"
rc_f=$?
if [ $rc_f -ne 0 ]; then
  fail "run (f): MT_PREDICTOR_MEM=1K exited $rc_f"
elif [ "$(grep -c 'MT_PREDICTOR_MEM=1024 is below 65536 bytes, the least the predictor works in: using 65536' "$tmp/f.err")" -ne 1 ]; then
  fail "run (f): MT_PREDICTOR_MEM=1K was not warned about once: $(head -c 600 "$tmp/f.err")"
else
  note "run (f): MT_PREDICTOR_MEM=1K: warned once, ran"
fi

# ---- (d): three tiers ----------------------------------------------------------
if [ -n "${TINYTRAIN_NVME_DIR:-}" ]; then
  nvdir=$(mktemp -d "$TINYTRAIN_NVME_DIR/tinytrain-nvme.XXXXXX") || exit 1
  host=$((footprint / 4))
  note "run (d): MT_MAX_HOST = footprint / 4 = $host bytes, MT_OFFLOAD_DIR=$nvdir"
  run d LD_PRELOAD="$preload" FAKECUDA_JITTER_US="$jitter" MT_MAX_VRAM="$budget" MT_MAX_HOST="$host" \
    MT_OFFLOAD_DIR="$nvdir" MT_MAX_NVME=1G MT_POLICY=lru MT_STATS=1
  rc_d=$?
  if [ $rc_d -eq 0 ]; then
    same_as_a d
    stats=$(cat "$tmp/d.out" "$tmp/d.err" | grep '^mtalloc: stats {' | tail -n 1)
    rd=$(stat bytes_nvme_read) wr=$(stat bytes_nvme_write)
    if [ -z "$rd" ] || [ -z "$wr" ] || [ "$rd" -eq 0 ] || [ "$wr" -eq 0 ]; then
      fail "run (d): no NVMe traffic both ways (bytes_nvme_read '$rd', bytes_nvme_write '$wr'); stderr:"
      grep 'mtalloc: \(error\|warning\)' "$tmp/d.err" | head -n 5 | sed 's/^/    /'
    else
      note "run (d): bytes_nvme_read $rd, bytes_nvme_write $wr, spills $(stat nvme_spills)," \
        "loads $(stat nvme_loads), clean drops $(stat nvme_drops), errors $(stat nvme_errors)"
    fi
  fi
  left=$(find "$nvdir" -mindepth 1 | head -n 5)
  [ -z "$left" ] || fail "run (d) left files in the offload directory: $left"
  rmdir "$nvdir" 2>/dev/null
fi

if [ $failed -eq 0 ]; then note "ok"; else note "failed"; fi
exit $failed
