#!/usr/bin/env bash
# The test command of README.md: installs dependencies, builds with warnings as errors, runs every
# test and the docs' shell blocks (scripts/docs-test.sh), then runs the whole suite again under
# ASan+UBSan and the concurrent parts under TSan, then every libFuzzer target for 10 s.
#   scripts/test.sh            everything (what CI runs)
#   scripts/test.sh quick      the default build's tests and the docs' blocks only
set -euo pipefail
cd "$(dirname "$0")/.."
# Each stage's wall time, printed as it ends and as a table at exit (pass or fail), so that CI's
# log says where its budget goes.
stages=""; stage_t0=$SECONDS; stage_name="install-deps"
stage() {
  stages+=$(printf '%-26s %5d s\n' "$stage_name" $((SECONDS - stage_t0)))$'\n'
  echo "test.sh: $stage_name took $((SECONDS - stage_t0)) s"
  stage_name="$1"; stage_t0=$SECONDS
}
trap 'stage end >/dev/null; printf "test.sh: stage times (total %d s)\n%s" $SECONDS "$stages"' EXIT
./scripts/install-deps.sh
export CI="${CI:-true}"   # warnings are errors in tests
stage "build default"
./scripts/build.sh default
stage "tests default"
(cd build && ctest --output-on-failure -j 2)
# The docs' shell blocks against this build (docs/docs-test.md): README.md, docs/deploy.md and
# the user-facing commands of docs/api.md, bench.md and serve.md, in their CI forms.
stage "docs"
./scripts/docs-test.sh
[ "${1:-}" = "quick" ] && exit 0
stage "build asan"
./scripts/build.sh asan
stage "tests asan"
(cd build-asan && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
  LSAN_OPTIONS="suppressions=$PWD/../scripts/lsan.supp" ctest --output-on-failure -j 2 -LE no-asan)
# TSan: only the suites labelled `tsan` (the concurrent parts), and only their targets are built.
tsan_tests=$(cd build && ctest -N -L tsan | sed -n 's/^ *Test *#[0-9]*: //p')
if [ -n "$tsan_tests" ]; then
  stage "build tsan"
  ./scripts/build.sh tsan --target $tsan_tests
  stage "tests tsan"
  (cd build-tsan && TSAN_OPTIONS="suppressions=$PWD/../scripts/tsan.supp" \
    ctest --output-on-failure -j 2 -L tsan)
fi
# Every fuzz target for a short while on its seed corpus (clang, ASan+UBSan; docs/fuzzing.md).
stage "fuzz (build and run)"
./scripts/fuzz.sh --seconds "${DUALPATH_FUZZ_SECONDS:-10}"
