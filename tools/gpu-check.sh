#!/usr/bin/env bash
# gpu-check.sh - the real-GPU check of libmtalloc.so: a CUDA runtime + cuBLAS
# program and a few PyTorch training steps, each run plain and under
# LD_PRELOAD=libmtalloc.so with MT_MAX_VRAM = a quarter of its footprint;
# outputs must be bit-identical. Everything goes under $OUT.
#
#   OUT=/tmp/gc tools/gpu-check.sh        ($OUT defaults to ./gpu-check-out)
#   env: MTALLOC_LIB (default build/preload/libmtalloc.so), NVCC (default nvcc,
#        then /usr/local/cuda/bin/nvcc), PYTHON (default python3),
#        GPU_ARCH (default sm_90), GPU_DEV (the device node that says a GPU is
#        there, default /dev/nvidia0)
#
# It uses the library as built (carried along with the build folder); it
# never runs meson. Steps, each under `timeout`, all within ~7.5 minutes:
#   0  environment: date, nvidia-smi (name, driver, memory), nvcc, torch
#   1  nvcc builds tools/gpu/rt_check.cu (-lcublas) into $OUT; python syntax
#      check of tools/gpu/torch_check.py
#   -- without a GPU (no nvidia-smi or no /dev/nvidia0) it stops here --
#   2  rt_check plain, then preloaded (MT_MAX_VRAM = footprint/4, MT_STATS=1);
#      stdout compared byte for byte
#   3  torch_check.py plain, then preloaded, both with the same
#      PYTORCH_CUDA_ALLOC_CONF (backend:cudaMallocAsync unless set); the
#      `loss` lines compared byte for byte
#   4  $OUT/report.md: routes the interposer saw (stats "calls"), missing
#      cuFuncGetParamInfo answers, host_mapped, identical yes/no, time per
#      step, faults. Raw logs in $OUT/logs.
# It allocates only ordinary device memory (no managed memory), far below the
# card's size; it never changes clocks, power or MIG, and never resets the GPU.
#
# Exit: 0 every check passed (or no GPU and the build steps passed), 1 a check
# failed (see report.md), 2 the library is missing or cannot be loaded.
set -uo pipefail

cd "$(dirname "$0")/.." || exit 2
ROOT=$PWD
OUT=${OUT:-$ROOT/gpu-check-out}
mkdir -p "$OUT/logs" || exit 2
OUT=$(cd "$OUT" && pwd)
LOGS=$OUT/logs
LIB=${MTALLOC_LIB:-$ROOT/build/preload/libmtalloc.so}
PYTHON=${PYTHON:-python3}
GPU_ARCH=${GPU_ARCH:-sm_90}
GPU_DEV=${GPU_DEV:-/dev/nvidia0}
DEADLINE=$((SECONDS + 450)) # 7.5 min; the report needs a few seconds after
REPORT=$OUT/report.md
: >"$OUT/gpu-check.log"
# A caller's preload must not leak into the plain runs.
[[ -n ${LD_PRELOAD:-} ]] && echo "caller had LD_PRELOAD=$LD_PRELOAD (unset for the plain runs)" >>"$OUT/gpu-check.log"
unset LD_PRELOAD

say() { echo "gpu-check: $*" | tee -a "$OUT/gpu-check.log" >&2; }

# limit SECS -> the timeout to use: SECS, or what is left before the deadline
limit() {
  local left=$((DEADLINE - SECONDS))
  ((left < $1)) && echo "$left" || echo "$1"
}

# step NAME SECS CMD... : runs CMD under timeout, stdout/stderr to
# $LOGS/NAME.{out,err}, exit status to $LOGS/NAME.rc, seconds to NAME.secs.
# Returns the command's status (124 on timeout, 125 when out of time).
step() {
  local name=$1 t
  t=$(limit "$2")
  shift 2
  if ((t < 5)); then
    say "$name: skipped, out of time"
    echo 125 >"$LOGS/$name.rc"
    return 125
  fi
  say "$name (timeout ${t}s): $*"
  local t0=$SECONDS rc=0
  timeout -k 5 "$t" "$@" >"$LOGS/$name.out" 2>"$LOGS/$name.err" </dev/null || rc=$?
  echo "$rc" >"$LOGS/$name.rc"
  echo $((SECONDS - t0)) >"$LOGS/$name.secs"
  ((rc == 0)) || say "$name: exit $rc (log: $LOGS/$name.err)"
  return "$rc"
}

failures=() notes=()
fail() { failures+=("$*"); say "FAIL: $*"; }

# ---- 0. environment ---------------------------------------------------------
ENV=$OUT/env.txt
{
  echo "date: $(date -u '+%Y-%m-%dT%H:%M:%SZ')"
  echo "host: $(uname -srm)"
  echo "library: $LIB"
} >"$ENV"
have_gpu=0
if command -v nvidia-smi >/dev/null 2>&1 && [[ -e $GPU_DEV ]] &&
   timeout 20 nvidia-smi -L >"$LOGS/nvidia-smi-L.txt" 2>&1; then
  have_gpu=1
  timeout 20 nvidia-smi >"$LOGS/nvidia-smi.txt" 2>&1
  timeout 20 nvidia-smi -q -d MEMORY >"$LOGS/nvidia-smi-q-memory.txt" 2>&1
  {
    echo "nvidia-smi:"
    timeout 20 nvidia-smi --query-gpu=index,name,driver_version,memory.total,memory.used,memory.free \
      --format=csv 2>&1 | sed 's/^/  /'
  } >>"$ENV"
else
  echo "nvidia-smi: no GPU (nvidia-smi $(command -v nvidia-smi >/dev/null && echo present || echo missing), $GPU_DEV $([[ -e $GPU_DEV ]] && echo present || echo missing))" >>"$ENV"
fi
NVCC=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
{
  echo "nvcc ($NVCC):"
  timeout 20 "$NVCC" --version 2>&1 | sed 's/^/  /'
  echo "torch: $(timeout 60 "$PYTHON" -c 'import torch; print(torch.__version__, torch.version.cuda)' 2>&1 | tail -n 1)"
} >>"$ENV"
cat "$ENV" >&2

gpu_name=$(timeout 20 nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n 1)
gpu_driver=$(timeout 20 nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -n 1)

# ---- the library ------------------------------------------------------------
lib_note=""
if [[ ! -f $LIB ]]; then
  lib_note="library missing: $LIB (build it with meson where meson exists and carry the build folder)"
elif ldd "$LIB" >"$LOGS/ldd.txt" 2>&1 && grep -q 'not found' "$LOGS/ldd.txt"; then
  lib_note="library cannot load here, missing dependencies: $(grep 'not found' "$LOGS/ldd.txt" | awk '{print $1}' | tr '\n' ' ')"
fi

report_head() {
  {
    echo "# mtalloc GPU check"
    echo
    echo "- date: $(sed -n 's/^date: //p' "$ENV")"
    echo "- GPU: ${gpu_name:-none}; driver: ${gpu_driver:-none}"
    echo "- nvcc: $(grep -o 'release [0-9.]*, V[0-9.]*' "$ENV" | head -n 1)"
    echo "- torch: $(sed -n 's/^torch: //p' "$ENV")"
    echo "- library: \`$LIB\`"
    echo "- raw logs: \`$LOGS\`; environment: \`$ENV\`"
    echo
  } >"$REPORT"
}

if [[ -n $lib_note ]]; then
  say "$lib_note"
  report_head
  echo "**Not run: $lib_note.**" >>"$REPORT"
  exit 2
fi

# ---- 1. build rt_check, check torch_check.py ----------------------------------
build_ok=1
if ! step nvcc_rt_check 240 "$NVCC" -O2 -arch="$GPU_ARCH" -o "$OUT/rt_check" \
       "$ROOT/tools/gpu/rt_check.cu" -lcublas; then
  fail "nvcc could not build tools/gpu/rt_check.cu (see logs/nvcc_rt_check.err)"
  build_ok=0
fi
if ! step py_compile 60 env PYTHONPYCACHEPREFIX="$OUT/pycache" "$PYTHON" -m py_compile \
       "$ROOT/tools/gpu/torch_check.py" "$ROOT/tools/gpu/stats_summary.py"; then
  fail "python syntax check of tools/gpu/*.py failed (see logs/py_compile.err)"
  build_ok=0
fi

if ((!have_gpu)); then
  report_head
  {
    echo "**GPU step not run: no GPU** (no nvidia-smi or no $GPU_DEV)."
    echo
    echo "- rt_check.cu built with nvcc for $GPU_ARCH: $( ((build_ok)) && [[ -x $OUT/rt_check ]] && echo yes || echo NO)"
    echo "- torch_check.py / stats_summary.py syntax: $([[ $(cat "$LOGS/py_compile.rc") == 0 ]] && echo ok || echo FAILED)"
    echo "- library present and loadable (ldd): yes"
    for f in "${failures[@]}"; do echo "- FAIL: $f"; done
  } >>"$REPORT"
  say "GPU step not run: no GPU; report: $REPORT"
  ((${#failures[@]} == 0)) && exit 0 || exit 1
fi

# ---- helpers for the GPU runs -------------------------------------------------
# faults NAME -> lines of the run's logs that show a fault
faults() {
  {
    grep -h -i -E 'illegal (memory )?address|CUDA error|CUDA_ERROR_|cudaError|CUBLAS_STATUS_|out of memory|Segmentation fault|core dumped|Aborted|cannot be preloaded|^mtalloc: .*(error|fatal)' \
      "$LOGS/$1.out" "$LOGS/$1.err"
    grep -h -E 'Traceback|FAIL' "$LOGS/$1.out" "$LOGS/$1.err"
  } 2>/dev/null | head -n 5
}
rc_of() { cat "$LOGS/$1.rc" 2>/dev/null || echo "not run"; }
paraminfo_warnings() { grep -c 'cuFuncGetParamInfo' "$LOGS/$1.err" 2>/dev/null || true; }

# section TITLE PLAIN PRE BUDGET COMPARED IDENTICAL TIMES -> report section
section() {
  local title=$1 plain=$2 pre=$3 budget=$4 compared=$5 same=$6 times=$7 n f
  {
    echo "## $title"
    echo
    echo "- exit status: plain $(rc_of "$plain"), preloaded $(rc_of "$pre") (124: timed out)"
    echo "- $compared identical: $same"
    echo "- $times"
    echo "- MT_MAX_VRAM: $budget bytes ($((budget >> 20)) MiB, a quarter of the footprint)"
    n=$(paraminfo_warnings "$pre")
    echo "- cuFuncGetParamInfo answered for every kernel: $( [[ ${n:-0} == 0 ]] && echo yes || echo "NO ($n warning lines)")"
    for r in "$plain" "$pre"; do
      f=$(faults "$r")
      if [[ -n $f ]]; then
        echo "- faults in $r:"
        echo '```'
        echo "$f"
        echo '```'
      fi
    done
    [[ -z $(faults "$plain")$(faults "$pre") ]] && echo "- faults: none"
    echo
    echo "Interposer statistics (preloaded run):"
    echo
    "$PYTHON" "$ROOT/tools/gpu/stats_summary.py" --budget "$budget" "$LOGS/$pre.err" "$LOGS/$pre.out" 2>&1
    echo
  } >>"$REPORT"
}

check_run() { # NAME WHAT
  local rc f
  rc=$(rc_of "$1")
  [[ $rc == 0 ]] || fail "$2: exit $rc"
  f=$(faults "$1")
  [[ -z $f ]] || fail "$2: $(head -n 1 <<<"$f")"
  local n
  n=$(paraminfo_warnings "$1")
  [[ ${n:-0} == 0 ]] || notes+=("$2: $n cuFuncGetParamInfo warning line(s): launches of those kernels were scanned without a parameter layout")
}

report_head

# ---- 2. rt_check ----------------------------------------------------------------
step rt_plain 90 "$OUT/rt_check"
rt_fp=$(awk '$1 == "footprint_bytes" {print $2}' "$LOGS/rt_plain.out" 2>/dev/null)
rt_budget=0
if [[ $(rc_of rt_plain) == 77 ]]; then
  fail "rt_check: skipped itself (too little free device memory)"
elif [[ -z $rt_fp ]]; then
  fail "rt_check plain: no footprint_bytes line"
else
  rt_budget=$((rt_fp / 4))
  step rt_pre 150 env LD_PRELOAD="$LIB" MT_MAX_VRAM="$rt_budget" MT_STATS=1 "$OUT/rt_check"
  check_run rt_plain "rt_check plain"
  check_run rt_pre "rt_check preloaded"
fi
rt_same=no
if [[ -s $LOGS/rt_plain.out ]] && cmp -s "$LOGS/rt_plain.out" "$LOGS/rt_pre.out" 2>/dev/null; then
  rt_same=yes
else
  diff "$LOGS/rt_plain.out" "$LOGS/rt_pre.out" >"$LOGS/rt.diff" 2>&1
  fail "rt_check: output differs plain vs preloaded (logs/rt.diff)"
fi
rt_time() { sed -n 's/.*elapsed_ms //p' "$LOGS/$1.err" 2>/dev/null | tail -n 1 | grep . || echo n/a; }
section "rt_check (CUDA runtime + cuBLAS)" rt_plain rt_pre "$rt_budget" \
  "stdout (footprint, checksum, reduction)" \
  "$rt_same ($(grep -h '^checksum' "$LOGS/rt_plain.out" 2>/dev/null || echo 'no checksum'))" \
  "elapsed: plain $(rt_time rt_plain) ms, preloaded $(rt_time rt_pre) ms"

# ---- 3. torch_check ---------------------------------------------------------------
# The interposer sets this when the user has not; the plain run gets the same.
export PYTORCH_CUDA_ALLOC_CONF=${PYTORCH_CUDA_ALLOC_CONF:-backend:cudaMallocAsync}
step torch_plain 150 "$PYTHON" "$ROOT/tools/gpu/torch_check.py"
t_fp=$(awk '$1 == "footprint_bytes" {print $2}' "$LOGS/torch_plain.out" 2>/dev/null)
t_budget=0
if [[ $(rc_of torch_plain) == 77 ]]; then
  fail "torch_check: torch sees no CUDA device"
elif [[ -z $t_fp ]]; then
  fail "torch_check plain: no footprint_bytes line"
else
  t_budget=$((t_fp / 4))
  step torch_pre 210 env LD_PRELOAD="$LIB" MT_MAX_VRAM="$t_budget" MT_STATS=1 \
    "$PYTHON" "$ROOT/tools/gpu/torch_check.py"
  check_run torch_plain "torch_check plain"
  check_run torch_pre "torch_check preloaded"
fi
grep -h '^loss ' "$LOGS/torch_plain.out" >"$LOGS/torch_plain.loss" 2>/dev/null
grep -h '^loss ' "$LOGS/torch_pre.out" >"$LOGS/torch_pre.loss" 2>/dev/null
t_same=no
if [[ -s $LOGS/torch_plain.loss ]] && cmp -s "$LOGS/torch_plain.loss" "$LOGS/torch_pre.loss"; then
  t_same=yes
else
  diff "$LOGS/torch_plain.loss" "$LOGS/torch_pre.loss" >"$LOGS/torch.diff" 2>&1
  fail "torch_check: losses differ plain vs preloaded (logs/torch.diff)"
fi
t_step() { sed -n 's/^step_ms_median //p' "$LOGS/$1.out" 2>/dev/null | grep . || echo n/a; }
section "torch_check (MLP, AdamW, PYTORCH_CUDA_ALLOC_CONF=$PYTORCH_CUDA_ALLOC_CONF)" \
  torch_plain torch_pre "$t_budget" "per-step loss (float.hex)" \
  "$t_same ($(wc -l <"$LOGS/torch_plain.loss") steps)" \
  "time per step (median after step 1): plain $(t_step torch_plain) ms, preloaded $(t_step torch_pre) ms"

# ---- 4. verdict ------------------------------------------------------------------
{
  echo "## Verdict"
  echo
  if ((${#failures[@]} == 0)); then
    echo "All checks passed."
  else
    for f in "${failures[@]}"; do echo "- FAIL: $f"; done
  fi
  for f in "${notes[@]}"; do echo "- note: $f"; done
} >>"$REPORT"
say "report: $REPORT"
((${#failures[@]} == 0))
