#!/bin/sh
# Sets up and runs the whole test suite: a normal build (warnings are
# errors), the same suite under AddressSanitizer + UndefinedBehaviorSanitizer,
# and the threaded parts under ThreadSanitizer.
#   tools/test.sh
set -eu
cd "$(dirname "$0")/.."
jobs=$(nproc 2>/dev/null || echo 2)

tools/setup-python.sh
tools/setup.sh build -Dwerror=true
meson test -C build --print-errorlogs --num-processes "$jobs"

tools/setup.sh build-asan -Dwerror=true -Db_sanitize=address,undefined -Db_lundef=false -Ddebug_checks=3
ASAN_OPTIONS=abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  meson test -C build-asan --print-errorlogs --num-processes "$jobs"

# ThreadSanitizer runs the multi-threaded programs under the interposer (the
# 'tsan' suite). Not criterion (its arena cannot live beside TSan's memory
# layout) and not the fake driver's deliberate-race test.
tools/setup.sh build-tsan -Dwerror=true -Db_sanitize=thread -Db_lundef=false
meson test -C build-tsan --print-errorlogs --num-processes "$jobs" --suite tsan
# libFuzzer on the trace reader (clang; a short fixed-seed session).
tests/fuzz/run.sh
echo "tools/test.sh: all suites passed"
