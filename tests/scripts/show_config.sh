#!/bin/sh
# Description: the preload library's constructor reads the options and, with
# MT_SHOW_CONFIG=1, prints the effective table; a bad value gets one warning
# line and the default. Usage: show_config.sh path/to/libmtalloc.so
set -eu
lib=${MT_TEST_PRELOAD_PREFIX:-}$1
out=$(MT_SHOW_CONFIG=1 MT_MAX_VRAM=3G MT_STATS=maybe LD_PRELOAD="$lib" /bin/true 2>&1)
fail() { echo "show_config: $1"; echo "--- output:"; echo "$out"; exit 1; }
for opt in MT_MAX_VRAM MT_MAX_HOST MT_OFFLOAD_DIR MT_CHUNK MT_SMALL_REGION MT_TRACE MT_STATS \
           MT_VERBOSE MT_LOG MT_POLICY MT_PREDICTOR MT_PREFETCH_DEPTH MT_THREADS MT_NUMA_NODE \
           MT_OPTIMIZER MT_OPTIMIZER_COMPRESSION MT_SHOW_CONFIG; do
  echo "$out" | grep -q "^mtalloc: $opt " || fail "$opt missing from the table"
done
echo "$out" | grep -Eq '^mtalloc: MT_MAX_VRAM +3221225472 +0 +env' || fail "MT_MAX_VRAM row wrong"
echo "$out" | grep -Eq '^mtalloc: MT_CHUNK +2097152 +2M +default' || fail "MT_CHUNK row wrong"
n=$(echo "$out" | grep -c 'MT_STATS="maybe" is not valid') || true
[ "$n" = 1 ] || fail "expected one warning for MT_STATS, got $n"
# Without MT_SHOW_CONFIG and with good values the library says nothing.
quiet=$(LD_PRELOAD="$lib" /bin/true 2>&1)
[ -z "$quiet" ] || { out=$quiet; fail "library printed without being asked"; }
echo "show_config: ok"
