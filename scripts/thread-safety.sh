#!/usr/bin/env bash
# Runs clang's thread-safety analysis (-Wthread-safety; common/thread_annotations.h) over every
# .cc file under src/ and bench/ that includes common/thread_annotations.h (through
# common/mutex.h, mostly), syntax only: no objects, no clang build directory. Each file is checked
# with its flags from a build's compile_commands.json (g++ or clang, any variant), the compiler
# swapped for clang++ and the warnings reduced to the thread-safety group. Which files include
# the annotations is asked of clang's preprocessor (-M: ~0.3 s a file, against 1-6 s to analyse
# one), so a file that starts using them is never missed.
#
#   scripts/thread-safety.sh                  every .cc under src/ and bench/ that build/ compiles
#   scripts/thread-safety.sh src/store x.cc   only those folders / files
#   THREAD_SAFETY_ALL=1 scripts/thread-safety.sh   analyse every file, annotations or not
#   BUILD_DIR=build-asan scripts/thread-safety.sh
#
# Prints one line per file that fails (its first finding; THREAD_SAFETY_VERBOSE=1 adds every
# diagnostic), then "thread-safety: N files, M findings" (N: the files analysed). Exits 1 on any
# finding, or when clang cannot parse a file (the analysis did not run); 2 without a
# compile_commands.json, or when CLANGXX names no program; 0, with a message, when clang++ is not
# installed (CLANGXX names one; else clang++-14, then clang++).
# Parallelism: DUALPATH_JOBS (default: every core), as in scripts/build.sh. Cost on the 2-core
# dev VM at DUALPATH_JOBS=2 (shared with other work): 74 of the 180 files carry the annotations,
# 5 min; THREAD_SAFETY_ALL=1, 6.5 min.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"

clangxx="${CLANGXX:-}"
if [ -n "$clangxx" ] && ! command -v "$clangxx" >/dev/null 2>&1; then
  echo "thread-safety: CLANGXX=$clangxx not found" >&2
  exit 2
fi
if [ -z "$clangxx" ]; then
  for c in clang++-14 clang++; do
    if command -v "$c" >/dev/null 2>&1; then clangxx="$c"; break; fi
  done
fi
if [ -z "$clangxx" ]; then
  echo "thread-safety: clang++ not installed; skipped"
  exit 0
fi

db="${BUILD_DIR:-build}/compile_commands.json"
if [ ! -f "$db" ]; then
  echo "thread-safety: $db not found; configure a build first (scripts/build.sh)" >&2
  exit 2
fi
jobs="${DUALPATH_JOBS:-$(nproc)}"
(($# > 0)) || set -- src bench

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# Per translation unit: <n>.rsp (the build's flags minus output, warning and debug flags, and the
# source), <n>.dir (where the build ran it; clang runs there too) and <n>.src.
python3 - "$root" "$db" "$work" "$@" <<'PY'
import json, os, shlex, sys

root, db, work, wanted = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
wanted = [os.path.abspath(os.path.join(root, w)).rstrip("/") for w in wanted]
seen = set()
n = 0
for entry in json.load(open(db)):
    cwd = entry["directory"]
    src = os.path.abspath(os.path.join(cwd, entry["file"]))
    if not src.endswith(".cc") or src in seen:
        continue
    if not any(src == w or src.startswith(w + "/") for w in wanted):
        continue
    seen.add(src)
    args = entry["arguments"] if "arguments" in entry else shlex.split(entry["command"])
    out, skip = [], False
    for a in args[1:]:
        if skip:
            skip = False
        elif a in ("-o", "-MT", "-MF", "-MQ"):
            skip = True
        elif a in ("-c", "-MD", "-MMD", "-w") or a.startswith(("-W", "-g")):
            pass
        elif os.path.abspath(os.path.join(cwd, a)) != src:
            out.append(a)
    out.append(src)
    n += 1
    base = os.path.join(work, f"{n:05d}")
    with open(base + ".rsp", "w") as f:
        f.write(" ".join(shlex.quote(a) for a in out) + "\n")
    with open(base + ".dir", "w") as f:
        f.write(cwd + "\n")
    with open(base + ".src", "w") as f:
        f.write(os.path.relpath(src, root) + "\n")
PY

# Each job leaves <n>.out (clang's diagnostics) and <n>.rc, or <n>.skip for a file without the
# annotations (one whose includes the preprocessor cannot list is analysed, and fails there).
export clangxx
all="${THREAD_SAFETY_ALL:-0}"
export all
find "$work" -name '*.rsp' -print0 | sort -z |
  xargs -0 -r -P "$jobs" -n 1 sh -c '
    base="${1%.rsp}"
    cd "$(cat "$base.dir")" || exit 1
    if [ "$all" != 1 ] && "$clangxx" "@$1" -M -w >"$base.deps" 2>/dev/null &&
        ! grep -q "common/thread_annotations\.h" "$base.deps"; then
      : >"$base.skip"
      exit 0
    fi
    "$clangxx" "@$1" -fsyntax-only -Wthread-safety -Werror=thread-safety >"$base.out" 2>&1
    echo $? >"$base.rc"
  ' sh

files=0 findings=0 failed=0
for rsp in "$work"/*.rsp; do
  [ -e "$rsp" ] || continue
  base="${rsp%.rsp}"
  [ -e "$base.skip" ] && continue
  src="$(cat "$base.src")"
  rc="$(cat "$base.rc" 2>/dev/null || echo 1)"
  files=$((files + 1))
  n="$(grep -c -e '-Wthread-safety' "$base.out" 2>/dev/null || true)"
  n="${n:-0}"
  if ((n > 0)); then
    findings=$((findings + n))
    failed=$((failed + 1))
    echo "$src: $n finding(s), first: $(grep -m1 -e '-Wthread-safety' "$base.out" | sed "s|$root/||")"
  elif [ "$rc" != 0 ]; then
    failed=$((failed + 1))
    echo "$src: clang could not parse it, not analysed: $(grep -m1 'error' "$base.out" | sed "s|$root/||")"
  fi
  if [ "${THREAD_SAFETY_VERBOSE:-0}" = 1 ] && { ((n > 0)) || [ "$rc" != 0 ]; }; then
    sed "s|$root/||" "$base.out"
  fi
done
echo "thread-safety: $files files, $findings findings"
((failed == 0))
