#!/usr/bin/env bash
# The main job on embedded defaults: installs dependencies, builds, and runs the live system on
# this machine -- one prefill and two decode node processes, a block store on real files (io_uring),
# UCX over shared memory, the tiny CPU transformer -- replaying 4 agent sessions of 24 turns with
# DualPath's read-path choice. Extra arguments go to `dualpath demo` (see `build/dualpath demo -h`).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
./scripts/build.sh default
exec ./build/dualpath demo "$@"
