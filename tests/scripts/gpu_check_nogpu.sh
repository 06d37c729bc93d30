#!/bin/sh
# Description: tools/gpu-check.sh in no-GPU mode (GPU_CHECK_NO_GPU=1) does
# everything up to its GPU step: the library is found loadable and
# self-contained or not, every tools/gpu/*.cu builds with nvcc for sm_90,
# every tools/gpu/*.py compiles, and it ends "GPU step not run: no GPU",
# exit 0. Skips (77) without nvcc, and under sanitizers (the library then
# needs the sanitizer runtime preloaded first, which the script does not do).
# Usage: gpu_check_nogpu.sh path/to/libmtalloc.so
set -eu
lib=$1
[ -z "${MT_TEST_PRELOAD_PREFIX:-}" ] || { echo "gpu_check_nogpu: sanitizer build: skipped"; exit 77; }
if ! command -v nvcc >/dev/null 2>&1 && [ ! -x /usr/local/cuda/bin/nvcc ]; then
  echo "gpu_check_nogpu: no nvcc: skipped"
  exit 77
fi
root=$(cd "$(dirname "$0")/../.." && pwd)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
rc=0
GPU_CHECK_NO_GPU=1 OUT=$out MTALLOC_LIB=$lib "$root/tools/gpu-check.sh" >"$out/stdout" 2>&1 || rc=$?
fail() { echo "gpu_check_nogpu: $1"; echo "--- report.md:"; cat "$out/report.md"; echo "--- output:"; cat "$out/stdout"; exit 1; }
[ "$rc" = 0 ] || fail "exit $rc, want 0"
grep -q 'GPU step not run: no GPU' "$out/report.md" || fail "report does not say the GPU step was not run"
for b in rt_check move_bench driver_probe probe_kernel py_compile; do
  grep -Eq "^\| build: $b \| pass \|" "$out/report.md" || fail "build $b did not pass"
done
grep -q '^- library: .*NEEDED' "$out/report.md" || fail "report does not list the library's NEEDED entries"
for f in report.md gpu-check.log diag.tar.gz; do
  [ -s "$out/$f" ] || fail "$f missing from OUT"
done
n=$(find "$out" -maxdepth 1 -type f ! -name stdout | wc -l)
[ "$n" -le 8 ] || fail "$n files in OUT: a device run returns at most 8"
echo "gpu_check_nogpu: ok"
