#!/usr/bin/env bash
# Installs everything dualpath needs to build, test and benchmark, from Debian 12 packages only.
# Idempotent: re-running it is cheap. Run as root (or with sudo available).
set -euo pipefail

pkgs=(
  # toolchain
  g++ cmake ninja-build ccache pkg-config git
  # libraries (each chosen for its field; see README "Dependencies")
  libucx-dev ucx-utils          # transport: UCP over shm / TCP / verbs; ucx_perftest for side-by-side benches
  liburing-dev                  # storage I/O: io_uring
  libxxhash-dev                 # block keys and checksums (xxh3-128)
  libtomlplusplus-dev           # config files
  libfmt-dev                    # formatting
  libcli11-dev                  # command line
  nlohmann-json3-dev            # JSON output and trace parsing
  libcpp-httplib-dev            # HTTP API
  libgtest-dev libgmock-dev     # unit tests
  libbenchmark-dev              # micro-benchmarks
  # tools used by benchmarks and figure generation
  fio                           # side-by-side storage baseline
  gnuplot-nox                   # PNG/SVG figures (docs/results)
)

missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]} == 0)); then
  echo "install-deps: all ${#pkgs[@]} packages present"
  exit 0
fi
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
