# Every dependency is a Debian 12 package (scripts/install-deps.sh). Nothing is vendored or fetched.
find_package(PkgConfig REQUIRED)
find_package(Threads REQUIRED)
find_package(fmt REQUIRED)
find_package(nlohmann_json REQUIRED)
find_package(CLI11 CONFIG REQUIRED)
pkg_check_modules(TOMLPP REQUIRED IMPORTED_TARGET tomlplusplus)
pkg_check_modules(XXHASH REQUIRED IMPORTED_TARGET libxxhash)
pkg_check_modules(URING REQUIRED IMPORTED_TARGET liburing)
pkg_check_modules(UCX REQUIRED IMPORTED_TARGET ucx)
pkg_check_modules(HTTPLIB REQUIRED IMPORTED_TARGET cpp-httplib)  # the tests' and bench's HTTP client
find_package(Boost 1.74 REQUIRED)                                  # the API's server: Beast on Asio (header-only)
find_package(OpenSSL REQUIRED)                                     # SHA-256 of API keys, HTTPS
find_package(prometheus-cpp CONFIG REQUIRED)                       # /metrics
find_package(Protobuf REQUIRED)                                    # the control plane's messages
find_package(gRPC CONFIG REQUIRED)                                 # the control plane's RPC
pkg_check_modules(SENTENCEPIECE REQUIRED IMPORTED_TARGET sentencepiece)  # checkpoints' tokenizer.model
if(DUALPATH_BUILD_TESTS)
  find_package(GTest REQUIRED)
endif()
if(DUALPATH_BUILD_BENCHMARKS)
  find_package(benchmark QUIET)
endif()
