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
# cpp-httplib 0.11.4 (Debian 12) sends with flags 0: a write to a connection the server has
# closed raises SIGPIPE and kills the client process (dp_api_test died so once in CI-like runs,
# with no output). Later versions default to MSG_NOSIGNAL on Linux; so do we.
set_property(TARGET PkgConfig::HTTPLIB APPEND PROPERTY
             INTERFACE_COMPILE_DEFINITIONS CPPHTTPLIB_SEND_FLAGS=MSG_NOSIGNAL)
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
