#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz/, docs/fuzzing.md) with clang and ASan+UBSan into
# build-fuzz/, then runs each for N seconds on its committed seed corpus.
#   scripts/fuzz.sh                  build, then run every target for 10 s (what CI runs)
#   scripts/fuzz.sh --seconds 600    run every target for 10 minutes
#   scripts/fuzz.sh --only http_body_fuzz --seconds 60
#   scripts/fuzz.sh --build-only
# New inputs the fuzzer finds go to build-fuzz/corpus/<target>/ (the committed corpus is only
# read). A crash leaves its input in build-fuzz/crashes/ and fails the script: turn it into a
# regression test beside the parser's unit tests.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=10
only=""
build_only=0
while (($#)); do
  case "$1" in
    --seconds) seconds="$2"; shift 2 ;;
    --only) only="$2"; shift 2 ;;
    --build-only) build_only=1; shift ;;
    -h|--help) sed -n '2,11p' "$0"; exit 0 ;;
    *) echo "fuzz.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
[[ "$seconds" =~ ^[0-9]+$ && "$seconds" -ge 1 ]] || { echo "fuzz.sh: --seconds $seconds: give whole seconds >= 1" >&2; exit 2; }
# clang and libFuzzer (libfuzzer-14-dev) come from Debian with the project's other packages.
./scripts/install-deps.sh >/dev/null
export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=1
if [ ! -f build-fuzz/build.ninja ]; then
  CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DDUALPATH_FUZZ=ON \
    -DDUALPATH_SANITIZE=address,undefined -DDUALPATH_BUILD_TESTS=OFF -DDUALPATH_BUILD_BENCHMARKS=OFF \
    "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG" >/dev/null
fi
cmake --build build-fuzz -j "${DUALPATH_JOBS:-$(nproc)}" --target dp_fuzzers
((build_only)) && exit 0
mkdir -p build-fuzz/crashes
fail=0
for dir in fuzz/corpus/*/; do
  t=$(basename "$dir")
  [ -n "$only" ] && [ "$t" != "$only" ] && continue
  work="build-fuzz/corpus/$t"
  mkdir -p "$work"
  dict=(); [ -f "fuzz/$t.dict" ] && dict=(-dict="fuzz/$t.dict")
  log="build-fuzz/$t.log"
  # UBSan findings abort like ASan ones; leaks of the targets' static fixtures are not findings.
  if UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 ASAN_OPTIONS=detect_leaks=0 \
     "build-fuzz/fuzz/$t" "$work" "$dir" "${dict[@]}" -max_total_time="$seconds" -timeout=10 \
     -rss_limit_mb=2048 -max_len=65536 -print_final_stats=1 \
     -artifact_prefix="build-fuzz/crashes/$t-" >"$log" 2>&1; then
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
    speed=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log")
    cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1)
    printf 'fuzz: %-18s ok: %s runs in %s s (%s/s), %s, corpus %s files\n' "$t" "$execs" "$seconds" "$speed" "$cov" "$(ls "$work" | wc -l)"
  else
    echo "fuzz: $t FAILED (log $log, input in build-fuzz/crashes/):"
    grep -m5 -E "ERROR|runtime error|SUMMARY" "$log" || tail -20 "$log"
    fail=1
  fi
done
exit $fail
