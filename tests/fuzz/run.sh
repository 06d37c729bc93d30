#!/bin/sh
# Builds the trace reader's libFuzzer target with clang (not meson: it needs
# -fsanitize=fuzzer) and runs a short fixed-seed session on a seed corpus
# made by the real writer. Exits non-zero on a crash, a leak, a sanitizer
# report or a failed check; the failing input is left in the build folder.
#   tests/fuzz/run.sh [RUNS]          (default 200000 inputs, at most 60 s)
# Environment: MT_FUZZ_DIR (build folder, default build-fuzz), MT_FUZZ_TIME.
set -eu
cd "$(dirname "$0")/../.."
runs=${1:-200000}
out=${MT_FUZZ_DIR:-build-fuzz}
mkdir -p "$out"

# libFuzzer ships with clang's compiler-rt (Debian: libclang-rt-*-dev).
probe() {
  printf 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n) { (void)d; (void)n; return 0; }\n' \
    > "$out/probe.c"
  clang -fsanitize=fuzzer "$out/probe.c" -o "$out/probe" >/dev/null 2>&1
}
if ! command -v clang >/dev/null 2>&1 || ! probe; then
  echo "fuzz: installing clang and libclang-rt-dev"
  sudo=""
  [ "$(id -u)" = 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq clang libclang-rt-dev >/dev/null
  probe || { echo "fuzz: clang -fsanitize=fuzzer does not work here" >&2; exit 1; }
fi

cflags="-std=gnu11 -D_GNU_SOURCE -g -O1 -Wall -Wextra -Werror -Ilibmtalloc"
clang $cflags -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
  tests/fuzz/fuzz_trace.c libmtalloc/trace_io.c -o "$out/fuzz_trace"
clang $cflags tests/fuzz/gen_seeds.c libmtalloc/trace_io.c -o "$out/gen_seeds"
rm -rf "$out/corpus"
mkdir -p "$out/corpus"
"$out/gen_seeds" "$out/corpus"

echo "fuzz: trace reader, $runs inputs (seed 1)"
"$out/fuzz_trace" -seed=1 -runs="$runs" -max_total_time="${MT_FUZZ_TIME:-60}" -max_len=8192 \
  -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$out/" "$out/corpus" \
  > "$out/fuzz.log" 2>&1 || { tail -40 "$out/fuzz.log"; echo "fuzz: FAILED (input in $out/)" >&2; exit 1; }
grep -E '^(Done|stat::number_of_executed_units)' "$out/fuzz.log" || true
echo "fuzz: ok"
