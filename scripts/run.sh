#!/usr/bin/env bash
# The main job on embedded defaults: installs dependencies, builds, and serves the live system on
# this machine -- the scheduler service with one prefill and two decode node processes, a block
# store on real files (io_uring), UCX over shared memory, the tiny CPU transformer -- behind the
# OpenAI-compatible API on 127.0.0.1:8000 (docs/api.md). Ctrl-C stops it. Extra arguments go to
# `dualpath serve` (see `build/dualpath serve -h`); `scripts/run.sh demo` runs the session replay
# (`dualpath demo`) instead.
set -euo pipefail
cd "$(dirname "$(readlink -f "$0")")/.."
./scripts/install-deps.sh
./scripts/build.sh default
if [ "${1:-}" = demo ]; then
  shift
  exec ./build/dualpath demo "$@"
fi
exec ./build/dualpath serve "$@"
