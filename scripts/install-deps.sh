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
  libboost-dev libssl-dev       # the HTTP API's server: Boost.Beast on Asio, HTTPS and key hashes through OpenSSL
  libcpp-httplib-dev            # the HTTP client of the API's tests and of `bench serve`
  prometheus-cpp-dev            # Prometheus /metrics
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler  # control plane: gRPC, protobuf
  libsentencepiece-dev sentencepiece  # a checkpoint's tokenizer.model (serve --model DIR); spm_train for its test
  libgtest-dev libgmock-dev     # unit tests
  clang libfuzzer-14-dev        # fuzzing (scripts/fuzz.sh, fuzz/)
  libbenchmark-dev              # micro-benchmarks
  # tools used by benchmarks and figure generation
  fio                           # side-by-side storage baseline
  curl jq hey openssl           # the API tests: curl and jq as the deployment guide uses them, hey for load, a TLS certificate
  iproute2 ethtool python3      # the network-fault test: namespaces, veth, a bridge (src/serve/netns)
  wamerican                     # /usr/share/dict/words: the built-in model's readability test
  gnuplot-nox                   # PNG/SVG figures (docs/results)
  python3-cram                  # scripts/docs-test.sh: the docs' shell blocks run as cram tests (docs/docs-test.md)
  prometheus                    # the /metrics test: a real Prometheus scrapes serve, the dashboard's queries run on it
  chromium fonts-dejavu-core    # the /dashboard test: the page in a real headless browser (DevTools protocol), its screenshot
)

missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]} == 0)); then
  echo "install-deps: all ${#pkgs[@]} packages present"
else
  SUDO=""
  if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
  echo "install-deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# The official OpenAI Node client, for the API's client test (src/serve/api_clients_test.sh),
# from the npm registry into a cache outside the checkout: v4 as `openai`, the current major as
# `openai7` (an npm alias), and LangChain's ChatOpenAI. Best effort: without Node or the registry
# the test says it skips them.
npm_dir="${DUALPATH_NPM_DIR:-$HOME/.cache/dualpath/npm}"
if command -v npm >/dev/null; then
  npm_want=()
  [ -d "$npm_dir/node_modules/openai" ] || npm_want+=(openai@4)
  [ -d "$npm_dir/node_modules/openai7" ] || npm_want+=(openai7@npm:openai@7)
  [ -d "$npm_dir/node_modules/@langchain/openai" ] || npm_want+=(@langchain/openai@1 @langchain/core@1)
  if ((${#npm_want[@]})); then
    mkdir -p "$npm_dir"
    if (cd "$npm_dir" && { [ -f package.json ] || npm init -y >/dev/null 2>&1; } &&
        timeout 300 npm install --no-audit --no-fund --silent "${npm_want[@]}" >/dev/null 2>&1); then
      echo "install-deps: ${npm_want[*]} in $npm_dir"
    else
      echo "install-deps: warning: could not install ${npm_want[*]} into $npm_dir (the API client test skips them)"
    fi
  fi
fi
