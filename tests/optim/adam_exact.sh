#!/bin/sh
# Description: generates torch's reference vectors (adam_ref.py) and checks
# the kernels against them bit for bit (test_adam_exact), twice:
#  1. every kernel (scalar, AVX2, AVX-512 where the CPU has it, the
#     two-pass kernel) against torch with Tensor.sqrt made correctly
#     rounded (--sqrt=ieee): every other operation is torch's own;
#  2. the two-pass kernel with MKL's vmsSqrt (mkl==2024.2.0, the MKL that
#     torch 2.15.0 links) against stock torch (--sqrt=torch).
# torch or MKL missing is a FAIL, never a skip (tools/setup.sh installs both).
#   adam_exact.sh TEST_BINARY REF_SCRIPT
set -eu
test_bin=$1
ref_py=$2
python=${PYTHON:-python3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if ! "$python" -c 'import torch' 2>/dev/null; then
  echo "adam_exact: FAIL: torch is not importable by $python; tools/setup.sh installs it" >&2
  exit 1
fi
mkl=$("$python" -c 'import glob, sys; print((glob.glob(sys.prefix + "/lib/libmkl_rt.so.2") + [""])[0])')
if [ -z "$mkl" ]; then
  echo "adam_exact: FAIL: libmkl_rt.so.2 not found under $python's prefix; tools/setup.sh installs mkl==2024.2.0" >&2
  exit 1
fi
"$python" "$ref_py" --sqrt=ieee "$tmp/ref.bin"
"$test_bin" "$tmp/ref.bin"
"$python" "$ref_py" --sqrt=torch "$tmp/ref_torch.bin"
"$test_bin" --mkl "$mkl" "$tmp/ref_torch.bin"
