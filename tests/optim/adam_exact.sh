#!/bin/sh
# Description: generates torch's reference vectors (adam_ref.py, one python
# process) and checks every kernel against them bit for bit
# (test_adam_exact). torch missing is a FAIL, never a skip. --sqrt=ieee:
# see adam_ref.py (torch's CPU sqrt is MKL's, not correctly rounded).
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
"$python" "$ref_py" --sqrt=ieee "$tmp/ref.bin"
"$test_bin" "$tmp/ref.bin"
