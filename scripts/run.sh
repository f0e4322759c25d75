#!/usr/bin/env bash
# The main job on embedded defaults: installs dependencies, builds, and runs dualpath.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
./scripts/build.sh default
exec ./build/dualpath sim "$@"
