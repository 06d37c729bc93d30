#!/bin/sh
# Description: runs one pager_test case under the interposer and checks the
# message the library must print, if any.
#   run_case.sh LIB PROGRAM CASE [EXPECTED-STDERR-REGEX]
# The environment carries MT_* settings and MT_TEST_PRELOAD_PREFIX, and
# MT_TEST_DRIVER_DIR: a libcuda.so.1 to take before the one meson's path
# names (the program links the fake, so meson puts its directory first).
set -u
if [ -n "${MT_TEST_DRIVER_DIR:-}" ]; then
  LD_LIBRARY_PATH="$MT_TEST_DRIVER_DIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export LD_LIBRARY_PATH
fi
lib=$1 prog=$2 case=$3 want=${4:-}
err=$(mktemp "${TMPDIR:-/tmp}/mt-case.XXXXXX")
trap 'rm -f "$err"' EXIT
LD_PRELOAD="${MT_TEST_PRELOAD_PREFIX:-}$lib" "$prog" "$case" 2>"$err"
rc=$?
cat "$err" >&2
[ "$rc" = 0 ] || exit "$rc"
if [ -n "$want" ] && ! grep -Eq "$want" "$err"; then
  echo "run_case: $case: expected a message matching /$want/ on stderr"
  exit 1
fi
exit 0
