#!/usr/bin/env bash
# gpu-check.sh - the real-GPU check of libmtalloc.so, in one call of under
# five minutes: short separate steps, each run plain and under
# LD_PRELOAD=libmtalloc.so with MT_MAX_VRAM below its footprint, each
# pass/fail/skip with its time and key numbers in $OUT/report.md.
#
# Build what it needs where meson and the -dev packages are (the GPU box has
# neither, and nothing can be installed there), and carry the build folder:
#
#   tools/setup.sh build-gpu -Dstatic_deps=true -Dtests=false
#
# (liburing and libnuma linked statically, xxHash compiled in, so the library
# needs only libc; the script says so when the library it finds needs more.)
# Then, on the GPU machine, from the repository root:
#
#   OUT=/some/dir tools/gpu-check.sh          ($OUT defaults to ./gpu-check-out)
#
# env: MTALLOC_LIB (default build-gpu/preload/libmtalloc.so, else
#      build/preload/libmtalloc.so), MT_TRACE_TOOL (default mt-trace beside
#      it, ../tools/mt-trace), NVCC (default nvcc on PATH, then
#      /usr/local/cuda/bin/nvcc), PYTHON (default python3), GPU_ARCH (default
#      sm_90), CUBLAS_DIR (the folder holding libcublas.so*; default: the
#      toolkit's lib64, then PyTorch's nvidia/*/lib wheel folders),
#      GPU_CHECK_NO_GPU=1 (stop before the GPU step even with a GPU),
#      GPU_CHECK_SECONDS (default 250: the steps' share of the five minutes),
#      GPU_CHECK_WORK (scratch folder; default a new one under /tmp).
#
# Steps; each has its own timeout and none starts past the deadline:
#   0  environment: date, nvidia-smi, nvcc, torch (imported beside step 2),
#      kernel Xid lines so far
#   1  the library: present; ldd finds every NEEDED (else exit 2); NEEDED
#      beyond libc/libm/libdl/libpthread/librt/ld-linux is reported (not
#      self-contained: rebuild with -Dstatic_deps=true); it preloads into
#      /bin/true silently
#   2  builds, in parallel: nvcc (sm_90) of tools/gpu/rt_check.cu (cuBLAS
#      found as above, linked with an rpath), move_bench.cu, driver_probe.cu,
#      probe_kernel.cu (-cubin); python syntax of tools/gpu/*.py and
#      examples/train.py; and, where the CPU has avx512f, the host
#      optimizer's AVX-512 kernel against torch bit for bit
#      (tests/optim/adam_exact.sh avx512 with the build's test_adam_exact;
#      a CPU without it is a skip)
#   -- without a GPU (nvidia-smi lists none) it stops here: "GPU step not
#      run: no GPU", exit 0 if steps 1-2 passed --
#   3  driver_probe: do cuFuncGetParamInfo/cuFuncGetName accept a CUkernel
#      from cuLibraryGetKernel, does launching one work, do host-NUMA
#      cuMemCreate mappings work, is cuMemMap at a non-zero offset refused
#      as cuda.h says (findings, not failures)
#   4  move_bench: 2 MiB and 64 MiB fetch and eviction through cuMemCreate/
#      Map/SetAccess/memcpy/Unmap/Release, each call timed, pooled and not;
#      whether each mapping call waits for a running kernel
#   5  rt_check (CUDA runtime + cuBLAS), 4x oversubscribed, stdout compared
#      byte for byte
#   6  torch_check.py steps: the plain runs all at once (the card has room;
#      their times are indicative only), then the preloaded runs one at a
#      time, outputs compared (bit for bit, or within 1e-4 where cuDNN times
#      its choices):
#      adamw (default foreach AdamW + clip_grad_norm_, 4x), gemm_bf16
#      (8192^3, Hopper TMA path, MT_HOST_MAP=off, 2x), graph (capture and
#      replay, 2x), conv (cudnn.benchmark, 2x), backend
#      (torch.cuda.get_allocator_backend() must be cudaMallocAsync under
#      mtalloc; then PYTORCH_ALLOC_CONF=expandable_segments:True, reported),
#      compile (torch.compile/Triton, 2x; no C compiler = skip, not pass);
#      examples/train.py (125m preset, 4 steps, 4x: footprint = the plain
#      run's max_memory_allocated, MT_MAX_VRAM a quarter of it):
#      train_paging (deterministic, loss bits identical), train_host
#      (MT_OPTIMIZER=host vs torch's AdamW, within 1e-3 relative) and
#      train_host_4bit (4-bit state, within 2e-2); tokens/s, stall share
#      and bytes per link in the details, mt-trace summary of each trace
#   7  failed steps rerun preloaded with CUDA_LAUNCH_BLOCKING=1 while time is
#      left; Xid lines the kernel logged during the run (dmesg, else
#      journalctl -k, else /var/log/kern.log; "not readable" when denied)
#
# Hard failures (each makes the exit status 1): a step's exit status not 0
# (77 is a skip), a fault line in its logs (the program's: illegal address,
# CUDA_ERROR_*, out of memory, segfault, traceback...; or 'mtalloc: error:';
# mtalloc's warnings are listed, not failed), outputs that differ plain vs
# preloaded, a kernel log line mentioning Xid during the run; and
# from the preloaded run's `mtalloc: stats` line: no stats line, a required
# field absent, zero allocations or zero launches through mtalloc, zero
# evictions in an oversubscribed step (rt_check, adamw), peak resident bytes
# above MT_MAX_VRAM, launches_unknown_layout > 0 or bypassed_bytes > 0 (these
# two are being added to the library: absent is reported, not failed); the
# preloaded backend not cudaMallocAsync; a step that could not run before
# the deadline.
#
# Every preloaded run has MT_STATS=1, MT_VERBOSE=2 and MT_TRACE set; the
# trace is summarised with `mt-trace summary`. Output ($OUT, at most three
# files, so that all of it comes back from a device run):
#   report.md      dated table of every step (pass/FAIL/skip, time, key
#                  numbers), then the details
#   gpu-check.log  what the script said while running
#   diag.tar.gz    logs/ (each run's stdout/stderr, MT_VERBOSE=2 logs,
#                  reruns), traces/ (summaries; traces under 4 MiB), env.txt,
#                  ldd/readelf of the library
#
# It allocates only ordinary device and pinned host memory (never managed
# memory), a few GiB at most on a 141 GB card; it never changes clocks,
# power or MIG, and never resets the GPU.
#
# Exit: 0 every check passed (or no GPU and steps 1-2 passed), 1 a check
# failed (see report.md), 2 the library is missing or cannot be loaded.
set -uo pipefail

# Paths given relative are relative to where the script was called from.
abs() { case $1 in /*) echo "$1" ;; *) echo "$PWD/$1" ;; esac; }
[[ -n ${MTALLOC_LIB:-} ]] && MTALLOC_LIB=$(abs "$MTALLOC_LIB")
[[ -n ${OUT:-} ]] && OUT=$(abs "$OUT")
[[ -n ${GPU_CHECK_WORK:-} ]] && GPU_CHECK_WORK=$(abs "$GPU_CHECK_WORK")
[[ -n ${MT_TRACE_TOOL:-} ]] && MT_TRACE_TOOL=$(abs "$MT_TRACE_TOOL")
cd "$(dirname "$0")/.." || exit 2
ROOT=$PWD
STEPS_SECONDS=${GPU_CHECK_SECONDS:-250}
DEADLINE=$((SECONDS + STEPS_SECONDS))
OUT=${OUT:-$ROOT/gpu-check-out}
mkdir -p "$OUT" || exit 2
OUT=$(cd "$OUT" && pwd)
if [[ -n ${GPU_CHECK_WORK:-} ]]; then
  WORK=$GPU_CHECK_WORK
  mkdir -p "$WORK" || exit 2
else
  WORK=$(mktemp -d /tmp/gpu-check.XXXXXX) || exit 2
  trap 'rm -rf "$WORK"' EXIT # what is worth keeping is in $OUT/diag.tar.gz
fi
WORK=$(cd "$WORK" && pwd)
LOGS=$WORK/logs BIN=$WORK/bin TRACES=$WORK/traces CACHE=$WORK/cache
mkdir -p "$LOGS" "$BIN" "$TRACES" "$CACHE" || exit 2
REPORT=$OUT/report.md
ENV_TXT=$WORK/env.txt
PYTHON=${PYTHON:-python3}
GPU_ARCH=${GPU_ARCH:-sm_90}
: >"$OUT/gpu-check.log"

if [[ -n ${MTALLOC_LIB:-} ]]; then
  LIB=$MTALLOC_LIB
elif [[ -f $ROOT/build-gpu/preload/libmtalloc.so ]]; then
  LIB=$ROOT/build-gpu/preload/libmtalloc.so
else
  LIB=$ROOT/build/preload/libmtalloc.so
fi
MTTRACE=${MT_TRACE_TOOL:-$(dirname "$LIB")/../tools/mt-trace}

say() { echo "gpu-check: $*" | tee -a "$OUT/gpu-check.log" >&2; }

# A caller's preload or allocator settings must not leak into the runs.
for v in LD_PRELOAD PYTORCH_CUDA_ALLOC_CONF PYTORCH_ALLOC_CONF CUDA_LAUNCH_BLOCKING; do
  [[ -n ${!v:-} ]] && say "caller had $v=${!v} (unset for every run)"
  unset "$v"
done
export PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1 CUBLAS_WORKSPACE_CONFIG=:4096:8
export TRITON_CACHE_DIR=$CACHE/triton TORCHINDUCTOR_CACHE_DIR=$CACHE/inductor

# ---- bookkeeping ----------------------------------------------------------------
now() { echo "${EPOCHREALTIME:-$SECONDS}"; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

# limit SECS -> SECS, or what is left before the deadline if that is less
limit() {
  local left=$((DEADLINE - SECONDS))
  ((left < $1)) && echo "$left" || echo "$1"
}

# step NAME SECS CMD... : runs CMD under timeout; stdout and stderr to
# $LOGS/NAME.{out,err}, exit status to NAME.rc, seconds to NAME.secs.
# Returns the status: 124 timed out, 125 not started (out of time).
step() {
  local name=$1 t t0 rc=0
  t=$(limit "$2")
  shift 2
  if ((t < 5)); then
    say "$name: not run, out of time"
    echo 125 >"$LOGS/$name.rc"
    echo 0 >"$LOGS/$name.secs"
    return 125
  fi
  say "$name (timeout ${t}s): $*"
  t0=$(now)
  timeout -k 5 "$t" "$@" >"$LOGS/$name.out" 2>"$LOGS/$name.err" </dev/null || rc=$?
  echo "$rc" >"$LOGS/$name.rc"
  elapsed "$t0" >"$LOGS/$name.secs"
  ((rc == 0)) || say "$name: exit $rc after $(cat "$LOGS/$name.secs") s (log: logs/$name.err)"
  return "$rc"
}
rc_of() { cat "$LOGS/$1.rc" 2>/dev/null || echo "not run"; }
secs_of() { cat "$LOGS/$1.secs" 2>/dev/null || echo 0; }
# what an exit status means, for the report
rc_text() {
  case $1 in
    0) echo "exit 0" ;; 124 | 137) echo "timed out" ;; 125) echo "not run (out of time)" ;;
    77) echo "skipped" ;; *) echo "exit $1" ;;
  esac
}

# The report's table: one row per step, and the failures for the verdict.
ROWS=() FAILURES=() NOTES=() RERUN=()
row() { # STEP RESULT SECONDS KEY
  ROWS+=("| $1 | $2 | $3 | $4 |")
}
fail() { FAILURES+=("$*"); say "FAIL: $*"; }
note() { NOTES+=("$*"); }

# faults NAME -> the first lines of the run's logs that show a fault: the
# program's own, and mtalloc's errors. mtalloc's warnings and info lines
# (MT_VERBOSE=2) are not faults; warnings are listed in the details.
faults() {
  cat "$LOGS/$1.out" "$LOGS/$1.err" 2>/dev/null | grep -v -E '^mtalloc: ' |
    grep -E 'illegal (memory )?address|CUDA error|CUDA_ERROR_|cudaError[A-Z]|CUBLAS_STATUS_|CUDNN_STATUS_|[Oo]ut of memory|Segmentation fault|core dumped|Aborted|cannot be preloaded|unspecified launch failure|Traceback|FAIL' |
    head -n 5
  grep -h -E '^mtalloc: error: ' "$LOGS/$1.out" "$LOGS/$1.err" 2>/dev/null | head -n 5
}
# warnings NAME -> mtalloc's warning lines, counted, with the first three
warnings() {
  local n
  n=$(cat "$LOGS/$1.out" "$LOGS/$1.err" 2>/dev/null | grep -c '^mtalloc: warning: ')
  ((n > 0)) || return 0
  echo "- mtalloc warnings: $n; the first:"
  # shellcheck disable=SC2016 # the backquotes are Markdown
  grep -h '^mtalloc: warning: ' "$LOGS/$1.out" "$LOGS/$1.err" | head -n 3 | cut -c1-300 | sed 's/^/  - `/; s/$/`/'
}
first_fault() { faults "$1" | head -n 1 | cut -c1-200; }
# reason NAME: the first fault line, else (or for a Python traceback, whose
# last line names the exception) the last line of stderr
reason() {
  local f
  f=$(first_fault "$1")
  [[ -n $f && $f != Traceback* ]] ||
    f=$(grep -v '^mtalloc: ' "$LOGS/$1.err" 2>/dev/null | grep . | tail -n 1 | cut -c1-200)
  echo "${f:-no message}"
}

# ---- 0. environment ---------------------------------------------------------------
{
  echo "date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
  echo "host: $(uname -srm)"
  echo "repository: $ROOT ($(git -C "$ROOT" log -1 --format='%h %s' 2>/dev/null || echo 'no git'))"
  echo "library: $LIB"
} >"$ENV_TXT"
have_gpu=0 gpu_line="none"
if command -v nvidia-smi >/dev/null 2>&1 &&
   timeout 20 nvidia-smi -L >"$LOGS/nvidia-smi-L.txt" 2>&1 && grep -q '^GPU ' "$LOGS/nvidia-smi-L.txt"; then
  have_gpu=1
  timeout 20 nvidia-smi >"$LOGS/nvidia-smi.txt" 2>&1
  gpu_line=$(timeout 20 nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used \
    --format=csv,noheader 2>/dev/null | head -n 1)
  echo "GPU (name, driver, memory total, used): $gpu_line" >>"$ENV_TXT"
else
  echo "GPU: none (nvidia-smi $(command -v nvidia-smi >/dev/null && echo 'lists no GPU' || echo missing))" >>"$ENV_TXT"
fi
if [[ ${GPU_CHECK_NO_GPU:-0} == 1 && $have_gpu == 1 ]]; then
  have_gpu=0
  echo "GPU_CHECK_NO_GPU=1: the GPU steps are not run" >>"$ENV_TXT"
fi

find_nvcc() {
  local c
  for c in "${NVCC:-}" "$(command -v nvcc 2>/dev/null)" /usr/local/cuda/bin/nvcc; do
    [[ -n $c && -x $c ]] && { echo "$c"; return; }
  done
  timeout 30 "$PYTHON" - <<'EOF' 2>/dev/null
import glob, os
try:
    import nvidia
    for d in nvidia.__path__:
        for p in sorted(glob.glob(os.path.join(d, "*", "bin", "nvcc"))):
            print(p); raise SystemExit
except ImportError:
    pass
EOF
}
NVCC=$(find_nvcc | head -n 1)
nvcc_version="none"
[[ -n $NVCC ]] && nvcc_version=$(timeout 20 "$NVCC" --version 2>&1 | grep -o 'release [0-9.]*, V[0-9.]*' | head -n 1)
# Importing torch takes seconds: it runs beside the builds (step 2 waits).
timeout 60 "$PYTHON" -c 'import torch; print(torch.__version__, "cuda", torch.version.cuda)' \
  >"$WORK/torch_version" 2>&1 &
torch_pid=$! torch_version="not asked"
{
  echo "nvcc: ${NVCC:-not found} ${nvcc_version}"
  echo "python: $(command -v "$PYTHON") $("$PYTHON" --version 2>&1)"
  echo "C compiler: $(command -v cc || command -v gcc || echo none)"
} >>"$ENV_TXT"

# Kernel log lines mentioning Xid: where readable, and how many before we began.
kernel_log() {
  if timeout 10 dmesg 2>/dev/null; then return 0; fi
  if command -v journalctl >/dev/null && timeout 10 journalctl -k --no-pager -q 2>/dev/null; then return 0; fi
  [[ -r /var/log/kern.log ]] && cat /var/log/kern.log && return 0
  return 1
}
xid_readable=1 xid_before=0
if kernel_log >"$WORK/kernel.log" 2>/dev/null; then
  grep -i 'xid' "$WORK/kernel.log" >"$LOGS/xid-before.txt"
  xid_before=$(wc -l <"$LOGS/xid-before.txt")
else
  xid_readable=0
  echo "kernel log: not readable (dmesg: $(timeout 10 dmesg 2>&1 >/dev/null | head -n 1 || true); no journalctl -k, no readable /var/log/kern.log)" >>"$ENV_TXT"
fi
cat "$ENV_TXT" >&2

# ---- 1. the library -----------------------------------------------------------------
lib_fatal="" lib_needed="" lib_extra=""
if [[ ! -f $LIB ]]; then
  lib_fatal="library missing: $LIB (build it where meson is: tools/setup.sh build-gpu -Dstatic_deps=true -Dtests=false, and carry build-gpu)"
else
  ldd "$LIB" >"$LOGS/ldd.txt" 2>&1
  if command -v readelf >/dev/null; then
    readelf -d "$LIB" >"$LOGS/readelf-d.txt" 2>&1
    lib_needed=$(sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' "$LOGS/readelf-d.txt" | xargs)
  elif command -v objdump >/dev/null; then
    objdump -p "$LIB" >"$LOGS/readelf-d.txt" 2>&1
    lib_needed=$(awk '$1 == "NEEDED" {print $2}' "$LOGS/readelf-d.txt" | xargs)
  else
    lib_needed=$(awk '/=>/ {print $1}' "$LOGS/ldd.txt" | xargs)
  fi
  for n in $lib_needed; do
    case $n in
      libc.so.* | libm.so.* | libdl.so.* | libpthread.so.* | librt.so.* | ld-linux*) ;;
      *) lib_extra+="$n " ;;
    esac
  done
  if grep -q 'not found' "$LOGS/ldd.txt"; then
    lib_fatal="library cannot load here, unresolved NEEDED: $(awk '/not found/ {print $1}' "$LOGS/ldd.txt" | tr '\n' ' ')(rebuild with -Dstatic_deps=true)"
  elif ! LD_PRELOAD=$LIB /bin/true >"$LOGS/preload-true.txt" 2>&1; then
    lib_fatal="LD_PRELOAD=$LIB /bin/true failed: $(head -n 1 "$LOGS/preload-true.txt")"
  elif [[ -s $LOGS/preload-true.txt ]]; then
    note "the library printed while preloaded into /bin/true: $(head -n 1 "$LOGS/preload-true.txt")"
  fi
fi
if [[ -n $lib_extra ]]; then
  lib_state="NOT self-contained: NEEDED $lib_extra(the GPU box may lack these; build with -Dstatic_deps=true)"
  say "library $lib_state"
else
  lib_state="self-contained (NEEDED: ${lib_needed:-?})"
fi
echo "library NEEDED: $lib_needed; $lib_state" >>"$ENV_TXT"
[[ -x $MTTRACE ]] || note "mt-trace not found at $MTTRACE: traces are recorded but not summarised"

report_head() {
  {
    echo "# mtalloc GPU check, $(sed -n 's/^date: //p' "$ENV_TXT")"
    echo
    echo "- GPU: ${gpu_line}"
    echo "- nvcc: ${nvcc_version} (${NVCC:-not found}); torch: ${torch_version}"
    echo "- library: \`$LIB\`, $lib_state"
    echo "- commit: $(git -C "$ROOT" log -1 --format='%h %s' 2>/dev/null || echo unknown)"
    echo "- diagnostics: \`diag.tar.gz\` (logs/, traces/, env.txt)"
    echo
  } >"$REPORT"
}

# pack: everything worth reading into $OUT/diag.tar.gz (under 16 MiB)
pack() {
  local t
  for t in "$TRACES"/*.trace; do
    [[ -f $t ]] || continue
    (($(stat -c %s "$t") > 4 * 1024 * 1024)) && mv "$t" "$WORK/" # too big to carry back; summary kept
  done
  tar -C "$WORK" -czf "$OUT/diag.tar.gz" logs traces env.txt 2>/dev/null
  if (($(stat -c %s "$OUT/diag.tar.gz") > 15 * 1024 * 1024)); then
    tar -C "$WORK" -czf "$OUT/diag.tar.gz" --exclude='*.trace' logs traces env.txt 2>/dev/null
  fi
}

if [[ -n $lib_fatal ]]; then
  kill "$torch_pid" 2>/dev/null
  say "$lib_fatal"
  report_head
  echo "**Not run: $lib_fatal.**" >>"$REPORT"
  pack
  exit 2
fi

# ---- 2. builds ------------------------------------------------------------------------
# cuBLAS: the toolkit's, else the one in PyTorch's nvidia/* wheel folders.
find_cublas() {
  local d f
  if [[ -n ${CUBLAS_DIR:-} ]]; then
    for f in "$CUBLAS_DIR"/libcublas.so*; do
      [[ -e $f ]] && { echo "$f"; return; }
    done
    return
  fi
  if [[ -n $NVCC ]]; then
    d=$(dirname "$(dirname "$(readlink -f "$NVCC")")")
    for f in "$d"/lib64/libcublas.so "$d"/targets/x86_64-linux/lib/libcublas.so "$d"/lib64/libcublas.so.[0-9]*; do
      [[ -e $f ]] && { echo "$f"; return; }
    done
  fi
  timeout 30 "$PYTHON" - <<'EOF' 2>/dev/null
import glob, os
try:
    import nvidia
except ImportError:
    raise SystemExit
for d in nvidia.__path__:
    for p in sorted(glob.glob(os.path.join(d, "**", "libcublas.so*"), recursive=True)):
        print(p)
EOF
  ldconfig -p 2>/dev/null | awk '/libcublas\.so/ && !/Lt/ {print $NF}'
}
CUBLAS=$(find_cublas | head -n 1)
cublas_args=()
if [[ -n $CUBLAS ]]; then
  cdir=$(dirname "$CUBLAS")
  cublas_args=("$CUBLAS" -Xlinker -rpath -Xlinker "$cdir")
  # a toolkit without cuBLAS headers: the wheel's include folder beside lib
  [[ -n $NVCC && ! -f $(dirname "$(dirname "$(readlink -f "$NVCC")")")/include/cublas_v2.h && -f $cdir/../include/cublas_v2.h ]] &&
    cublas_args+=(-I"$cdir/../include")
fi
echo "cuBLAS: ${CUBLAS:-not found}" >>"$ENV_TXT"
# -lcuda: nvcc finds the toolkit's stub itself; say where, in case it does not
cuda_args=()
if [[ -n $NVCC ]]; then
  for d in lib64/stubs targets/x86_64-linux/lib/stubs; do
    d=$(dirname "$(dirname "$(readlink -f "$NVCC")")")/$d
    [[ -d $d ]] && cuda_args+=(-L"$d")
  done
fi
cuda_args+=(-lcuda)

BUILDS=(nvcc_rt_check nvcc_move_bench nvcc_driver_probe nvcc_probe_kernel py_compile)
EXACT_BIN=
for f in "$(dirname "$LIB")/../test_adam_exact" "$(dirname "$LIB")/../tests/optim/test_adam_exact"; do
  [[ -x $f ]] && EXACT_BIN=$f && break
done
build_all() {
  local g=$ROOT/tools/gpu
  if [[ -z $NVCC ]]; then
    for b in nvcc_rt_check nvcc_move_bench nvcc_driver_probe nvcc_probe_kernel; do
      echo "nvcc not found (NVCC, PATH, /usr/local/cuda/bin)" >"$LOGS/$b.err"
      echo 127 >"$LOGS/$b.rc"
    done
  else
    if [[ -z $CUBLAS ]]; then
      echo "cuBLAS not found: not in the toolkit, not in PyTorch's nvidia/ wheel folders; set CUBLAS_DIR" >"$LOGS/nvcc_rt_check.err"
      echo 127 >"$LOGS/nvcc_rt_check.rc"
    else
      step nvcc_rt_check 200 "$NVCC" -O2 -arch="$GPU_ARCH" -o "$BIN/rt_check" "$g/rt_check.cu" "${cublas_args[@]}" &
    fi
    step nvcc_move_bench 200 "$NVCC" -O2 -arch="$GPU_ARCH" -o "$BIN/move_bench" "$g/move_bench.cu" "${cuda_args[@]}" &
    step nvcc_driver_probe 200 "$NVCC" -O2 -arch="$GPU_ARCH" -o "$BIN/driver_probe" "$g/driver_probe.cu" "${cuda_args[@]}" &
    step nvcc_probe_kernel 200 "$NVCC" -cubin -arch="$GPU_ARCH" -o "$BIN/probe_kernel.cubin" "$g/probe_kernel.cu" &
  fi
  step py_compile 60 env PYTHONPYCACHEPREFIX="$WORK/pycache" "$PYTHON" -m py_compile "$g"/*.py "$ROOT/examples/train.py" &
  # The host optimizer's AVX-512 kernel against torch, bit for bit: only a
  # CPU with AVX-512 can run it, and the development VM has none.
  if [[ -z $EXACT_BIN ]]; then
    echo "test_adam_exact not in the build folder (meson.build builds it with -Dtests=false)" >"$LOGS/adam_exact_avx512.err"
    echo 127 >"$LOGS/adam_exact_avx512.rc"
  elif ! grep -qw avx512f /proc/cpuinfo; then
    echo "this CPU has no avx512f" >"$LOGS/adam_exact_avx512.err"
    echo 77 >"$LOGS/adam_exact_avx512.rc"
  else
    step adam_exact_avx512 150 env PYTHON="$PYTHON" sh "$ROOT/tests/optim/adam_exact.sh" avx512 \
      "$EXACT_BIN" "$ROOT/tests/optim/adam_ref.py" &
  fi
  wait
}
t_builds=$(now)
build_all
wait "$torch_pid" 2>/dev/null # (build_all's wait has waited for it already)
torch_version=$(tail -n 1 "$WORK/torch_version" 2>/dev/null)
echo "torch: ${torch_version:=did not answer}" >>"$ENV_TXT"
for b in "${BUILDS[@]}"; do
  rc=$(rc_of "$b")
  if [[ $rc == 0 ]]; then
    case $b in
      nvcc_rt_check) k="$GPU_ARCH, cuBLAS: $CUBLAS" ;;
      py_compile) k="tools/gpu/*.py, examples/train.py" ;;
      *) k=$GPU_ARCH ;;
    esac
    row "build: ${b#nvcc_}" pass "$(secs_of "$b")" "$k"
  else
    row "build: ${b#nvcc_}" FAIL "$(secs_of "$b")" "$(rc_text "$rc"): $(grep -m1 -i -E 'error|not found' "$LOGS/$b.err" | cut -c1-160)"
    fail "build ${b#nvcc_}: $(rc_text "$rc") (logs/$b.err)"
  fi
done
case $(rc_of adam_exact_avx512) in
  0) row "cpu: AdamW avx512 vs torch" pass "$(secs_of adam_exact_avx512)" "bit for bit, torch $torch_version" ;;
  77) row "cpu: AdamW avx512 vs torch" skip 0 "$(head -c 160 "$LOGS/adam_exact_avx512.err")" ;;
  *)
    row "cpu: AdamW avx512 vs torch" FAIL "$(secs_of adam_exact_avx512)" "$(rc_text "$(rc_of adam_exact_avx512)"): $(grep -m1 -i -E 'fail|error|mismatch|differ' "$LOGS/adam_exact_avx512.err" "$LOGS/adam_exact_avx512.out" | cut -c1-160)"
    fail "AdamW avx512 kernel vs torch $torch_version: $(rc_text "$(rc_of adam_exact_avx512)") (logs/adam_exact_avx512.err)"
    ;;
esac
say "builds done in $(elapsed "$t_builds") s"

if ((!have_gpu)); then
  report_head
  {
    echo "**GPU step not run: no GPU** ($(sed -n 's/^GPU: none (\(.*\))/\1/p' "$ENV_TXT"))."
    echo
    echo "| step | result | time (s) | key numbers |"
    echo "|---|---|---:|---|"
    printf '%s\n' "${ROWS[@]}"
    echo
    for f in "${FAILURES[@]}"; do echo "- FAIL: $f"; done
    for f in "${NOTES[@]}"; do echo "- note: $f"; done
  } >>"$REPORT"
  pack
  say "GPU step not run: no GPU; report: $REPORT"
  ((${#FAILURES[@]} == 0)) && exit 0 || exit 1
fi

# ---- GPU steps ------------------------------------------------------------------------
DETAILS=$WORK/details.md
: >"$DETAILS"

# pre_env STEP BUDGET: sets PRE_ENV, the environment of a preloaded run.
pre_env() {
  PRE_ENV=(LD_PRELOAD="$LIB" MT_MAX_VRAM="$2" MT_STATS=1 MT_VERBOSE=2 MT_TRACE="$TRACES/$1.trace")
}
# PyTorch's plain runs get the backend mtalloc sets for itself, so that both
# runs allocate tensor by tensor; preloaded runs get no setting (mtalloc's).
TORCH_PLAIN=plain:PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync

# trace_summary STEP: mt-trace summary of the preloaded run's trace
trace_summary() {
  local t
  t=$(limit 30)
  [[ -x $MTTRACE && -s $TRACES/$1.trace ]] && ((t >= 5)) || return 0
  timeout "$t" "$MTTRACE" summary "$TRACES/$1.trace" >"$TRACES/$1.summary.txt" 2>&1 ||
    echo "(mt-trace summary failed: exit $?)" >>"$TRACES/$1.summary.txt"
}

# times_of RUN: the "ms NAME MS" lines of its stdout, or rt_check's elapsed_ms
times_of() {
  awk '$1 == "ms" {printf "%s %s; ", $2, $3}' "$LOGS/$1.out" 2>/dev/null
  sed -n 's/.*elapsed_ms \([0-9.]*\).*/total \1/p' "$LOGS/$1.err" 2>/dev/null | tail -n 1
}

# pair NAME DIVISOR FLAGS TPLAIN TPRE [plain:VAR=VALUE | pre:VAR=VALUE]... -- CMD...
#   Runs CMD plain (with the plain: settings), sizes MT_MAX_VRAM =
#   footprint_bytes / DIVISOR from its stdout, runs it preloaded (with the
#   pre: settings), checks both runs, the outputs and the preloaded run's
#   stats, and adds a row and a details section. FLAGS, comma-separated:
#   oversub (the run must evict), cmp (compare whole stdout byte for byte;
#   else compare.py's exact/approx lines). Saves what a rerun needs.
pair() {
  local name=$1 div=$2 flags=$3 tplain=$4 tpre=$5
  shift 5
  local plain_env=() extra=()
  while [[ $1 != -- ]]; do
    case $1 in
      plain:*) plain_env+=("${1#plain:}") ;;
      pre:*) extra+=("${1#pre:}") ;;
    esac
    shift
  done
  shift
  local plain=$name.plain pre=$name.pre rc fp budget why key same result=pass f
  if [[ -n ${PAIR_PLAIN_AHEAD:-} ]]; then # only start the plain run, in the background
    step "$plain" "$tplain" env "${plain_env[@]}" "$@" &
    return
  fi
  [[ -f $LOGS/$plain.rc ]] || step "$plain" "$tplain" env "${plain_env[@]}" "$@"
  rc=$(rc_of "$plain")
  if [[ $rc == 77 ]]; then
    row "$name" skip "$(secs_of "$plain")" "$(grep -m1 '^skip:' "$LOGS/$plain.out" || echo 'skipped itself (exit 77)')"
    return
  fi
  if [[ $rc == 125 ]]; then
    row "$name" FAIL 0 "not run: out of time"
    fail "$name: not run before the deadline"
    return
  fi
  if [[ $rc != 0 ]]; then
    why="plain run $(rc_text "$rc"): $(reason "$plain")"
    row "$name" FAIL "$(secs_of "$plain")" "$why"
    fail "$name: $why (the check itself, before mtalloc)"
    return
  fi
  fp=$(awk '$1 == "footprint_bytes" {print $2}' "$LOGS/$plain.out" | tail -n 1)
  if [[ -z $fp ]]; then
    row "$name" FAIL "$(secs_of "$plain")" "plain run printed no footprint_bytes"
    fail "$name: plain run printed no footprint_bytes"
    return
  fi
  budget=$((fp / div))
  echo "$budget" >"$LOGS/$name.budget"
  : >"$LOGS/$name.extra"
  ((${#extra[@]} == 0)) || printf '%s\0' "${extra[@]}" >"$LOGS/$name.extra"
  printf '%s\0' "$@" >"$LOGS/$name.cmd"
  pre_env "$name" "$budget"
  step "$pre" "$tpre" env "${PRE_ENV[@]}" "${extra[@]}" "$@"
  rc=$(rc_of "$pre")
  local problems=()
  [[ $rc == 0 ]] || problems+=("preloaded run $(rc_text "$rc"): $(reason "$pre")")
  [[ -z $(first_fault "$pre") ]] || problems+=("fault: $(reason "$pre")")
  if [[ ,$flags, == *,cmp,* ]]; then
    if cmp -s "$LOGS/$plain.out" "$LOGS/$pre.out"; then
      same="stdout identical"
    else
      diff "$LOGS/$plain.out" "$LOGS/$pre.out" >"$LOGS/$name.diff" 2>&1
      same="stdout DIFFERENT (logs/$name.diff)"
      problems+=("outputs differ plain vs preloaded (logs/$name.diff)")
    fi
  else
    same=$("$PYTHON" "$ROOT/tools/gpu/compare.py" "$LOGS/$plain.out" "$LOGS/$pre.out") ||
      problems+=("outputs differ plain vs preloaded: ${same#DIFFERENT: }")
  fi
  local sflags=(--check --budget "$budget" --verdict "$LOGS/$name.verdict") summary
  [[ ,$flags, == *,oversub,* ]] && sflags+=(--oversubscribed)
  summary=$("$PYTHON" "$ROOT/tools/gpu/stats_summary.py" "${sflags[@]}" "$LOGS/$pre.err" "$LOGS/$pre.out" 2>&1)
  key=$(sed -n 's/^key //p' "$LOGS/$name.verdict" 2>/dev/null)
  while IFS= read -r f; do
    [[ -n $f ]] && problems+=("stats: $f")
  done < <(sed -n 's/^FAIL //p' "$LOGS/$name.verdict" 2>/dev/null)
  trace_summary "$name"
  if ((${#problems[@]})); then
    result=FAIL
    RERUN+=("$name")
    for f in "${problems[@]}"; do fail "$name: $f"; done
  fi
  row "$name" "$result" "$(secs_of "$plain") + $(secs_of "$pre")" \
    "budget $((budget >> 20)) MiB = footprint/$div; $same; ${key}$([[ $result == FAIL ]] && echo "; **${problems[0]}**")"
  {
    echo "## $name"
    echo
    echo "- command: \`${*#"$ROOT"/}\`; preloaded with MT_MAX_VRAM=$budget ${extra[*]}"
    echo "- plain: $(rc_text "$(rc_of "$plain")") in $(secs_of "$plain") s; preloaded: $(rc_text "$rc") in $(secs_of "$pre") s"
    echo "- outputs: $same"
    echo "- times (ms), plain: $(times_of "$plain")"
    echo "- times (ms), preloaded: $(times_of "$pre")"
    grep -h '^info ' "$LOGS/$pre.out" 2>/dev/null | sed 's/^info \([^ ]*\) /- preloaded \1: /'
    warnings "$pre"
    if ((${#problems[@]})); then
      echo "- problems:"
      printf '  - %s\n' "${problems[@]}"
      echo '```'
      faults "$pre"
      tail -n 5 "$LOGS/$pre.err" 2>/dev/null
      echo '```'
    fi
    echo
    echo "$summary"
    [[ -s $TRACES/$name.summary.txt ]] && echo && echo "mt-trace summary: traces/$name.summary.txt"
    echo
  } >>"$DETAILS"
}

# ---- 3. driver probe ----------------------------------------------------------------------
if [[ -x $BIN/driver_probe && -s $BIN/probe_kernel.cubin ]]; then
  step driver_probe 45 "$BIN/driver_probe" "$BIN/probe_kernel.cubin"
  rc=$(rc_of driver_probe)
  s=$(sed -n 's/^summary //p' "$LOGS/driver_probe.out")
  if [[ $rc == 0 ]]; then
    row driver_probe pass "$(secs_of driver_probe)" "$s"
    [[ $s == *"func_on_kernel_paraminfo ok"* ]] ||
      note "cuFuncGetParamInfo does not accept a CUkernel here: launch.c must ask cuKernelGetParamInfo (issue 7, item 1)"
  else
    row driver_probe FAIL "$(secs_of driver_probe)" "$(rc_text "$rc"): $(reason driver_probe)"
    fail "driver_probe: $(rc_text "$rc") (logs/driver_probe.err)"
  fi
  {
    echo "## driver_probe: CUkernel handles, host-NUMA mappings"
    echo
    grep -v -E '^(summary|driver_probe:)' "$LOGS/driver_probe.out"
    [[ $rc == 0 ]] || { echo '```'; tail -n 5 "$LOGS/driver_probe.err"; echo '```'; }
    echo
  } >>"$DETAILS"
else
  row driver_probe FAIL 0 "not built"
fi

# ---- 4. move benchmark -----------------------------------------------------------------------
if [[ -x $BIN/move_bench ]]; then
  step move_bench 60 "$BIN/move_bench" 10
  rc=$(rc_of move_bench)
  s=$(sed -n 's/^summary //p' "$LOGS/move_bench.out")
  if [[ $rc == 0 ]]; then
    row move_bench pass "$(secs_of move_bench)" "$s"
  else
    row move_bench FAIL "$(secs_of move_bench)" "$(rc_text "$rc"): $(reason move_bench)"
    fail "move_bench: $(rc_text "$rc") (logs/move_bench.err)"
  fi
  {
    echo "## move_bench: the move path, call by call"
    echo
    grep -v -E '^(summary|move_bench:)' "$LOGS/move_bench.out"
    [[ $rc == 0 ]] || { echo '```'; tail -n 5 "$LOGS/move_bench.err"; echo '```'; }
    echo
  } >>"$DETAILS"
else
  row move_bench FAIL 0 "not built"
fi

# ---- 5. rt_check ---------------------------------------------------------------------------------
if [[ -x $BIN/rt_check ]]; then
  pair rt_check 4 oversub,cmp 60 90 -- "$BIN/rt_check" 24 16
else
  row rt_check FAIL 0 "not built"
fi

# ---- 6. PyTorch steps ----------------------------------------------------------------------------
TC=$ROOT/tools/gpu/torch_check.py
if [[ $torch_version == *Error* || $torch_version == *"No module"* ]]; then
  row "torch steps" FAIL 0 "torch does not import: $torch_version"
  fail "torch does not import with $PYTHON"
else
  torch_pairs() {
    pair adamw 4 oversub 90 120 "$TORCH_PLAIN" -- "$PYTHON" "$TC" adamw
    pair gemm_bf16 2 "" 60 90 "$TORCH_PLAIN" pre:MT_HOST_MAP=off -- "$PYTHON" "$TC" gemm_bf16
    pair graph 2 "" 60 90 "$TORCH_PLAIN" -- "$PYTHON" "$TC" graph
    pair conv 2 "" 60 90 "$TORCH_PLAIN" -- "$PYTHON" "$TC" conv
    # backend: the plain run has no allocator setting at all (PyTorch's
    # default); preloaded, mtalloc must have chosen cudaMallocAsync.
    pair backend 1 "" 45 45 -- "$PYTHON" "$TC" backend
    pair compile 2 "" 150 90 "$TORCH_PLAIN" -- "$PYTHON" "$TC" compile
    # examples/train.py (issue 11): a GPT-style model trained at a quarter
    # of its footprint (MT_MAX_VRAM = max_memory_allocated of the plain run
    # / 4). Paging alone must give the same loss bits (deterministic
    # algorithms); the host optimizer (MT_OPTIMIZER=host through megatrain's
    # sitecustomize, as megatrain-run sets it) must stay within a stated
    # relative tolerance of torch's GPU AdamW: 1e-3 with FP32 state (the
    # two differ in rounding only), 2e-2 with 4-bit state (quantised m and
    # v change each update a little). The tolerance travels in the plain
    # run's "rtol" line (tools/gpu/compare.py).
    local tr=("$PYTHON" "$ROOT/examples/train.py" --size 125m --seq 256 --micro-batch 4 --steps 4
              --device cuda --deterministic)
    local site=pre:PYTHONPATH=$ROOT/python/megatrain/_site:$ROOT/python
    pair train_paging 4 oversub 90 90 "$TORCH_PLAIN" -- "${tr[@]}" --report exact
    pair train_host 4 oversub 90 90 "$TORCH_PLAIN" pre:MT_OPTIMIZER=host "$site" -- "${tr[@]}" --report rtol=1e-3
    pair train_host_4bit 4 oversub 90 90 "$TORCH_PLAIN" pre:MT_OPTIMIZER=host pre:MT_OPTIMIZER_COMPRESSION=4bit \
      "$site" -- "${tr[@]}" --report rtol=2e-2
  }
  # The plain runs need nothing from each other and the card has room for
  # all of them: they run together (their times are then only indicative),
  # the preloaded runs one at a time.
  t_plain=$(now)
  PAIR_PLAIN_AHEAD=1 torch_pairs
  wait
  say "plain PyTorch runs done together in $(elapsed "$t_plain") s"
  torch_pairs
  b=$(awk '$1 == "info" && $2 == "backend" {print $3}' "$LOGS/backend.pre.out" 2>/dev/null)
  if [[ -n $b && $b != cudaMallocAsync ]]; then
    fail "backend: PyTorch reports allocator backend '$b' under mtalloc, not cudaMallocAsync"
    ROWS+=("| backend (under mtalloc) | FAIL | - | torch.cuda.get_allocator_backend() = $b |")
  elif [[ -n $b ]]; then
    ROWS+=("| backend (under mtalloc) | pass | - | torch.cuda.get_allocator_backend() = $b (plain: $(awk '$1 == "info" && $2 == "backend" {print $3}' "$LOGS/backend.plain.out")) |")
  fi
  # PYTORCH_ALLOC_CONF, the name PyTorch 2.11 reads first: reported, not failed.
  pre_env backend_expandable $((1 << 30))
  step backend_expandable 45 env "${PRE_ENV[@]}" PYTORCH_ALLOC_CONF=expandable_segments:True \
    "$PYTHON" "$TC" backend
  "$PYTHON" "$ROOT/tools/gpu/stats_summary.py" --verdict "$LOGS/backend_expandable.verdict" \
    "$LOGS/backend_expandable.err" >/dev/null 2>&1
  row backend_expandable "$([[ $(rc_of backend_expandable) == 0 ]] && echo "reported" || echo "reported ($(rc_text "$(rc_of backend_expandable)"))")" \
    "$(secs_of backend_expandable)" \
    "PYTORCH_ALLOC_CONF=expandable_segments:True: backend $(awk '$1 == "info" && $2 == "backend" {print $3}' "$LOGS/backend_expandable.out" 2>/dev/null); $(sed -n 's/^key //p' "$LOGS/backend_expandable.verdict" 2>/dev/null); mtalloc warned: $(grep -c -i 'PYTORCH_ALLOC_CONF\|bypass' "$LOGS/backend_expandable.err" 2>/dev/null || true) line(s)"
fi

# ---- 7. reruns with CUDA_LAUNCH_BLOCKING=1, Xid ------------------------------------------------------
DEADLINE=$((DEADLINE + 20)) # the reruns may use the reserve kept for the report
for name in "${RERUN[@]}"; do
  mapfile -d '' -t cmd <"$LOGS/$name.cmd"
  mapfile -d '' -t extra <"$LOGS/$name.extra"
  pre_env "$name.blocking" "$(cat "$LOGS/$name.budget")"
  step "$name.blocking" 60 env "${PRE_ENV[@]}" CUDA_LAUNCH_BLOCKING=1 "${extra[@]}" "${cmd[@]}"
  rc=$(rc_of "$name.blocking")
  note "$name rerun with CUDA_LAUNCH_BLOCKING=1: $(rc_text "$rc")$([[ $rc == 0 ]] || echo ": $(reason "$name.blocking")") (logs/$name.blocking.err)"
done

xid_text="kernel log not readable (dmesg denied, no journalctl -k or /var/log/kern.log): no Xid information"
if ((xid_readable)) && kernel_log >"$WORK/kernel.log" 2>/dev/null; then
  grep -i 'xid' "$WORK/kernel.log" | tail -n +$((xid_before + 1)) >"$LOGS/xid.txt"
  n=$(wc -l <"$LOGS/xid.txt")
  if ((n > 0)); then
    xid_text="**$n kernel log line(s) mentioning Xid during the run** (logs/xid.txt): $(head -n 1 "$LOGS/xid.txt" | cut -c1-200)"
    fail "the kernel logged $n Xid line(s) during the run"
  else
    xid_text="no new kernel log line mentions Xid ($xid_before before the run)"
  fi
  grep -q -i gvisor "$WORK/kernel.log" &&
    xid_text+="; this kernel log is gVisor's own: the host driver's Xid lines do not reach it"
fi

# ---- report ------------------------------------------------------------------------------------
report_head
{
  echo "| step | result | time (s) | key numbers |"
  echo "|---|---|---:|---|"
  printf '%s\n' "${ROWS[@]}"
  echo
  echo "- Xid: $xid_text"
  echo "- total time: ${SECONDS} s"
  echo
  echo "## Verdict"
  echo
  if ((${#FAILURES[@]} == 0)); then
    echo "All checks passed."
  else
    for f in "${FAILURES[@]}"; do echo "- FAIL: $f"; done
  fi
  for f in "${NOTES[@]}"; do echo "- note: $f"; done
  echo
  cat "$DETAILS"
} >>"$REPORT"
pack
say "report: $REPORT (${#FAILURES[@]} failure(s), ${SECONDS} s)"
((${#FAILURES[@]} == 0))
