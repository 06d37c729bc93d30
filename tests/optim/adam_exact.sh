#!/bin/sh
# Description: generates torch's reference vectors (adam_ref.py) and checks
# one kernel against them bit for bit (test_adam_exact), with the global
# gradient norm, the clip coefficient and bf16/fp16 weights and gradients:
#  scalar|avx2|avx512: that kernel, forced through MT_OPTIM_KERNEL, against
#     torch with Tensor.sqrt made correctly rounded (--sqrt=ieee): every
#     other operation is torch's own; a kernel this CPU lacks is a skip
#     (exit 77) whose message names the missing CPU flag;
#  mkl: the two-pass kernel with MKL's vmsSqrt (mkl==2024.2.0, the MKL that
#     torch 2.15.0 links) against stock torch (--sqrt=torch).
# torch or MKL missing is a FAIL, never a skip (tools/setup.sh installs both).
#   adam_exact.sh KERNEL TEST_BINARY REF_SCRIPT
set -eu
kernel=$1
test_bin=$2
ref_py=$3
python=${PYTHON:-python3}
if [ "$kernel" != mkl ]; then
  # before the minute of reference generation: is the kernel here at all?
  rc=0
  MT_OPTIM_KERNEL=$kernel "$test_bin" --probe || rc=$?
  [ "$rc" -eq 0 ] || exit "$rc"
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if ! "$python" -c 'import torch' 2>/dev/null; then
  echo "adam_exact: FAIL: torch is not importable by $python; tools/setup.sh installs it" >&2
  exit 1
fi
if [ "$kernel" != mkl ]; then
  "$python" "$ref_py" --sqrt=ieee "$tmp/ref.bin"
  MT_OPTIM_KERNEL=$kernel "$test_bin" "$tmp/ref.bin"
  exit 0
fi
mkl=$("$python" -c 'import glob, sys; print((glob.glob(sys.prefix + "/lib/libmkl_rt.so.2") + [""])[0])')
if [ -z "$mkl" ]; then
  echo "adam_exact: FAIL: libmkl_rt.so.2 not found under $python's prefix; tools/setup.sh installs mkl==2024.2.0" >&2
  exit 1
fi
"$python" "$ref_py" --sqrt=torch "$tmp/ref_torch.bin"
"$test_bin" --mkl "$mkl" "$tmp/ref_torch.bin"
