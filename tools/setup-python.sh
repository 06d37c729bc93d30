#!/bin/sh
# Installs the Python packages the test suite needs, once: PyTorch and the
# MKL runtime it links, for the host optimizer's exactness test
# (tests/optim/adam_ref.py makes its reference vectors with them; the test
# fails without them), and transformers with accelerate, for megatrain.Trainer's
# test (tests/python/test_trainer.py). Called by tools/test.sh; tools/run.sh
# and the GPU build do not need them.
#   tools/setup-python.sh
set -eu

# pip into this python3; a Debian system Python refuses (PEP 668) unless
# told, and may lack pip altogether.
pip_install() {
  if ! python3 -m pip --version >/dev/null 2>&1; then
    sudo=""
    [ "$(id -u)" = 0 ] || sudo="sudo"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq python3-pip >/dev/null
  fi
  python3 -m pip install -q "$@" || python3 -m pip install -q --break-system-packages "$@"
}

# Pinned: the bit-exact recipe in libmtalloc/optim/adam.h is checked
# against this version. PyPI's default wheel (it runs on a CPU; about 4 GB
# with its CUDA libraries, a few minutes) is installed once.
torch_version=2.15.0
if ! python3 -c "import torch, sys; sys.exit(torch.__version__.split('+')[0] != '$torch_version')" 2>/dev/null; then
  echo "setup: installing torch==$torch_version (PyPI default wheel)"
  pip_install "torch==$torch_version"
fi
# MKL's runtime, the version torch 2.15.0 links statically: the exactness
# test calls its vmsSqrt, which torch's CPU sqrt is (about 200 MB, once).
mkl_version=2024.2.0
if ! python3 -c "import glob, sys; sys.exit(not glob.glob(sys.prefix + '/lib/libmkl_rt.so.2'))" 2>/dev/null ||
   ! python3 -m pip show mkl 2>/dev/null | grep -qx "Version: $mkl_version"; then
  echo "setup: installing mkl==$mkl_version"
  pip_install "mkl==$mkl_version"
fi
# transformers and accelerate (its Trainer needs accelerate), for
# megatrain.Trainer (tests/python/test_trainer.py). Pinned like torch, and
# the same pins as pyproject.toml's [trainer] extra; installed once.
transformers_version=5.23.0
accelerate_version=1.15.0
if ! python3 -c "import sys, transformers, accelerate; sys.exit(transformers.__version__ != '$transformers_version' or accelerate.__version__ != '$accelerate_version')" 2>/dev/null; then
  echo "setup: installing transformers==$transformers_version accelerate==$accelerate_version"
  pip_install "transformers==$transformers_version" "accelerate==$accelerate_version"
fi
# python3 -m venv with pip inside, for tests/python/test_wheel.py (pip
# install . into a fresh environment); Debian's python3 has it only with
# python3-venv.
if ! python3 -c "import ensurepip, venv" 2>/dev/null; then
  echo "setup: installing python3-venv"
  sudo=""
  [ "$(id -u)" = 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq python3-venv >/dev/null
fi
