#!/bin/sh
# Sets up mtalloc and runs the main job.
#   tools/run.sh                 no arguments: the built-in demo
#   tools/run.sh PROGRAM [ARGS]  run PROGRAM under LD_PRELOAD=libmtalloc.so
# On a machine without a GPU the demo runs on the fake CUDA driver
# (tests/fakecuda) so that everything mtalloc does can be watched.
set -eu
cd "$(dirname "$0")/.."
tools/setup.sh build >/dev/null
lib=$(pwd)/build/preload/libmtalloc.so
if [ $# -gt 0 ]; then
  exec env LD_PRELOAD="$lib${LD_PRELOAD:+:$LD_PRELOAD}" "$@"
fi
fake=$(pwd)/build/tests/fakecuda
echo "run: no GPU program given; running the fake-driver demo (tests/fakecuda/cudart_like)"
echo "run: under LD_PRELOAD=$lib with MT_SHOW_CONFIG=1"
LD_LIBRARY_PATH="$fake" MT_SHOW_CONFIG=1 LD_PRELOAD="$lib" "$fake/cudart_like"
