#!/bin/sh
# Installs what mtalloc needs to build (Debian/Ubuntu) and builds it.
#   tools/setup.sh [BUILD_DIR] [extra meson options...]
# The CUDA toolkit headers (cuda.h) must be present; point -Dcuda-include=DIR
# at them if they are not in /usr/local/cuda/include. Nothing links libcuda.
set -eu
cd "$(dirname "$0")/.."
build=${1:-build}
[ $# -gt 0 ] && shift

pkgs="meson ninja-build pkg-config gcc liburing-dev libnuma-dev libxxhash-dev libcriterion-dev"
missing=""
for p in $pkgs; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
  echo "setup: installing$missing"
  sudo=""
  [ "$(id -u)" = 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq $missing >/dev/null
fi

# PyTorch for the optimizer's exactness test (tests/optim/adam_ref.py
# generates its reference vectors with it; the test fails without it).
# Pinned: the bit-exact recipe in libmtalloc/optim/adam.h is checked
# against this version. PyPI's default wheel (it runs on a CPU; about 4 GB
# with its CUDA libraries, a few minutes) is installed once.
torch_version=2.15.0
if ! python3 -c "import torch, sys; sys.exit(torch.__version__.split('+')[0] != '$torch_version')" 2>/dev/null; then
  echo "setup: installing torch==$torch_version (PyPI default wheel)"
  python3 -m pip install -q "torch==$torch_version"
fi
# MKL's runtime, the version torch 2.15.0 links statically: the exactness
# test calls its vmsSqrt, which torch's CPU sqrt is (about 200 MB, once).
mkl_version=2024.2.0
if ! python3 -c "import glob, sys; sys.exit(not glob.glob(sys.prefix + '/lib/libmkl_rt.so.2'))" 2>/dev/null ||
   ! python3 -m pip show mkl 2>/dev/null | grep -qx "Version: $mkl_version"; then
  echo "setup: installing mkl==$mkl_version"
  python3 -m pip install -q "mkl==$mkl_version"
fi

if [ -f "$build/build.ninja" ]; then
  [ $# -gt 0 ] && meson configure "$build" "$@"
else
  meson setup "$build" "$@"
fi
meson compile -C "$build"
