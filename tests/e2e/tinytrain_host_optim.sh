#!/bin/bash
# Description: the gradient path of gradient offload without PyTorch and
# without a GPU. tinytrain --host-optim (tinytrain.c) keeps Adam's state on
# the host, registers its weights with mt_optim_register_device, advises
# them read-mostly, and queues each layer's update as soon as backward has
# made its gradients final, while the next layers' backward runs. Runs
#   (g) tinytrain with its GPU Adam on the fake driver alone (the reference),
#   (h0) --host-optim under LD_PRELOAD=libmtalloc.so, no memory limit,
#   (h) --host-optim with MT_MAX_VRAM = (h0)'s footprint / 8 (8x
#       oversubscription), stream jitter and MT_STATS=1,
# and asserts: (h) prints the same losses as (h0) bit for bit (paging stays
# transparent with the optimizer writing weights from the host); every
# step's loss in (h) is within a relative 1e-5 of (g)'s (the two Adams do
# the same float arithmetic but round their scalars differently: torch's
# recipe forms them in double, tinytrain in float, and orders the last
# product differently, a few ulps per update; 8 steps measured 5e-7, the
# bound is 20x that); the loss decreased; the fake's peak stays within the
# budget; the pager evicted weights clean (evictions_clean > 0) and never
# dirty (weight_dirty_evictions = mtalloc's evictions_dirty_readmostly = 0);
# some optimizer work finished before the step (overlap > 0), and the
# overlap is printed.
#
# Usage: tinytrain_host_optim.sh TINYTRAIN LIBMTALLOC_SO FAKECUDA_DIR
# Environment: MT_TEST_PRELOAD_PREFIX (sanitizer runtime and ':'),
# TINYTRAIN_STEPS (default 8), TINYTRAIN_JITTER_US (default 20).
set -u
[ $# -eq 3 ] || { echo "usage: $0 TINYTRAIN LIBMTALLOC_SO FAKECUDA_DIR" >&2; exit 2; }
abspath() { (cd "$(dirname "$1")" && printf '%s/%s\n' "$(pwd)" "$(basename "$1")"); }
tt=$(abspath "$1") lib=$(abspath "$2") fakedir=$(abspath "$3")
steps=${TINYTRAIN_STEPS:-8}
jitter=${TINYTRAIN_JITTER_US:-20}
preload="${MT_TEST_PRELOAD_PREFIX:-}$lib"
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}handle_segv=0:allow_user_segv_handler=1"
unset MT_MAX_VRAM MT_STATS LD_PRELOAD
export LD_LIBRARY_PATH="$fakedir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/tinytrain_host.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
failed=0
fail() { echo "tinytrain_host_optim: FAIL: $*"; failed=1; }
note() { echo "tinytrain_host_optim: $*"; }

# run NAME ARGS -- [VAR=value ...]
run() {
  local name=$1 args=$2
  shift 2
  local t0=$SECONDS
  env "$@" "$tt" --steps "$steps" $args >"$tmp/$name.out" 2>"$tmp/$name.err"
  local rc=$?
  note "run ($name): exit $rc after $((SECONDS - t0)) s  [$* $args]"
  if [ $rc -eq 77 ]; then
    cat "$tmp/$name.err"
    exit 77
  elif [ $rc -ne 0 ]; then
    fail "run ($name) exited $rc; its last output:"
    tail -n 20 "$tmp/$name.out" "$tmp/$name.err" | sed 's/^/    /'
    exit 1
  fi
}
value() { sed -n "s/^$2 \\([0-9][0-9]*\\)\$/\\1/p" "$tmp/$1.out" | head -n 1; }
losses() { grep '^step ' "$tmp/$1.out" | awk '{print $4}'; }

run g ""
run h0 --host-optim LD_PRELOAD="$preload"
footprint=$(value h0 footprint_bytes)
budget=$((footprint / 8))
note "host-optimizer footprint $footprint bytes (GPU Adam: $(value g footprint_bytes));" \
  "budget MT_MAX_VRAM = footprint / 8 = $budget bytes"
run h --host-optim LD_PRELOAD="$preload" FAKECUDA_JITTER_US="$jitter" MT_MAX_VRAM="$budget" MT_STATS=1

if [ "$(losses h)" = "$(losses h0)" ] && [ "$(losses h | wc -l)" -eq "$steps" ]; then
  note "run (h): $steps losses bit for bit those of (h0)"
else
  fail "run (h) losses differ from (h0)'s:"
  diff <(losses h0) <(losses h) | head | sed 's/^/    /'
fi
# relative difference per step (bash's printf reads hex floats)
worst=0
while read -r a b; do
  a=$(printf '%.9g' "$a") b=$(printf '%.9g' "$b")
  worst=$(awk -v a="$a" -v b="$b" -v w="$worst" \
    'BEGIN { d = (a - b) / a; if (d < 0) d = -d; print (d > w ? d : w) }')
done < <(paste -d' ' <(losses g) <(losses h))
first=$(printf '%.9g' "$(losses h | head -n 1)") last=$(printf '%.9g' "$(losses h | tail -n 1)")
note "loss $first -> $last; largest relative difference from GPU Adam's losses: $worst (bound 1e-5)"
awk -v w="$worst" 'BEGIN { exit !(w <= 1e-5) }' || fail "losses differ from GPU Adam's by $worst > 1e-5"
awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < a) }' || fail "loss did not decrease"

peak=$(value h peak_device_bytes)
[ -n "$peak" ] && [ "$peak" -le "$budget" ] || fail "fake peak device usage $peak > budget $budget"
dirty=$(value h weight_dirty_evictions) clean=$(value h evictions_clean)
note "weight regions: $dirty dirty evictions; all regions: $clean clean, $(value h evictions_dirty) dirty" \
  "(without the advice every eviction is dirty: 0 clean)"
[ "$dirty" = 0 ] || fail "weights (advised read-mostly) evicted dirty $dirty times"
[ -n "$clean" ] && [ "$clean" -gt 0 ] || fail "no clean evictions: the run did not page weights"
work=$(value h host_optim_work_us) before=$(value h host_optim_before_step_us)
pct=$(value h host_optim_overlap_percent)
note "overlap: ${before} us of ${work} us of optimizer work (${pct}%) finished before the step"
[ -n "$before" ] && [ "$before" -gt 0 ] || fail "no optimizer work ran during backward"
exit $failed
