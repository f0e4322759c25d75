#!/usr/bin/env bash
# Configures and builds one variant of dualpath into build/ (or build-<variant>/).
#   scripts/build.sh            release-with-debug-info build in build/
#   scripts/build.sh asan       ASan+UBSan build in build-asan/
#   scripts/build.sh tsan       TSan build in build-tsan/
# Extra arguments go to the build tool (e.g. a target name).
set -euo pipefail
cd "$(dirname "$0")/.."
variant="${1:-default}"; shift || true
jobs="${DUALPATH_JOBS:-$(nproc)}"
# ccache across checkouts: paths below the source tree are hashed relative to it, and the working
# directory is not hashed, so a fresh clone (CI) reuses what any other clone compiled.
export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=1
case "$variant" in
  # CI's default build keeps line tables only (-g1): ~15 % less compile time than -g.
  default) dir=build; extra=(); [ "${CI:-}" = "true" ] && extra=("-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O2 -g1 -DNDEBUG") ;;
  # Sanitizer builds compile at -O1 with line tables only (-g1): enough for symbolized stacks, and
  # about 40 % less compile time than -O2 -g under ASan+UBSan, which is what CI's budget is spent on.
  # They are unity builds (16 files per TU; the CLI's target opts out): a cold ASan build took
  # 7 min 18 s against 9 min 36 s file by file.
  asan) dir=build-asan; extra=(-DDUALPATH_SANITIZE=address,undefined -DDUALPATH_BUILD_BENCHMARKS=OFF
                               "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG"
                               -DCMAKE_UNITY_BUILD=ON -DCMAKE_UNITY_BUILD_BATCH_SIZE=16) ;;
  tsan) dir=build-tsan; extra=(-DDUALPATH_SANITIZE=thread -DDUALPATH_BUILD_BENCHMARKS=OFF
                               "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG"
                               -DCMAKE_UNITY_BUILD=ON -DCMAKE_UNITY_BUILD_BATCH_SIZE=16) ;;
  *) echo "build.sh: unknown variant '$variant' (use default, asan or tsan)" >&2; exit 2 ;;
esac
werror=OFF; [ "${CI:-}" = "true" ] && werror=ON
# Configured once; the warnings setting follows CI every time, so that `scripts/test.sh` builds
# with warnings as errors even after `scripts/run.sh` configured the same directory without.
if [ -f "$dir/build.ninja" ]; then
  cached=$(sed -n 's/^DUALPATH_WERROR:BOOL=//p' "$dir/CMakeCache.txt" 2>/dev/null || true)
  [ "$cached" = "$werror" ] || cmake -S . -B "$dir" -DDUALPATH_WERROR="$werror" >/dev/null
else
  cmake -S . -B "$dir" -G Ninja -DDUALPATH_WERROR="$werror" "${extra[@]}" >/dev/null
fi
cmake --build "$dir" -j "$jobs" "$@"
