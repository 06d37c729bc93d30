#!/bin/sh
# Sets up mtalloc and runs the main job.
#   tools/run.sh                 the built-in job (below)
#   tools/run.sh PROGRAM [ARGS]  run PROGRAM under LD_PRELOAD=libmtalloc.so
#
# The built-in job trains tinytrain (tests/e2e: a 16-layer MLP with Adam,
# allocating and launching the way a framework does) three times on the fake
# CUDA driver: alone, under mtalloc, and under mtalloc with MT_MAX_VRAM at
# one eighth of the model's footprint, and checks that the losses agree bit
# for bit and that device memory never exceeded the budget. On a machine
# with a GPU, give it your own program instead (tools/gpu-check.sh runs the
# real-GPU checks). TINYTRAIN_STEPS sets the number of steps (default 8).
set -eu
cd "$(dirname "$0")/.."
tools/setup.sh build >/dev/null
lib=$(pwd)/build/preload/libmtalloc.so
if [ $# -gt 0 ]; then
  exec env LD_PRELOAD="$lib${LD_PRELOAD:+:$LD_PRELOAD}" "$@"
fi
echo "run: training tinytrain on the fake CUDA driver at 8x oversubscription (no GPU needed)"
exec tests/e2e/tinytrain_check.sh build/tests/e2e/tinytrain "$lib" build/tests/fakecuda
