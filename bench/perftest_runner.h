#pragma once
// Runs ucx_perftest (from ucx-utils) as a server/client pair of processes on localhost, the
// reference the transport benchmark reports beside its own figures (issue 4).

#include <cstdint>
#include <string>

#include "dualpath/result.h"
#include "dualpath/units.h"

namespace dualpath::transport {

struct PerftestRun {
  std::string perftest = "ucx_perftest";  // the program, found on PATH
  std::string test;                       // ucp_put_bw, ucp_get or ucp_am_bw
  std::string transports;                 // UCX_TLS for both sides
  std::string net_devices;                // UCX_NET_DEVICES for both sides; empty: unset
  uint64_t message_bytes = 0;
  uint64_t iterations = 0;
  uint64_t warmup_iterations = 0;
  // -e on both sides: endpoints with peer error handling (UCP_ERR_HANDLING_MODE_PEER), the mode
  // our endpoints use where the transport supports it (tcp).
  bool peer_error_handling = false;
  Duration timeout = std::chrono::seconds(120);
};

struct PerftestResult {
  double bandwidth_bytes_per_s = 0;  // "overall" bandwidth
  double latency_us = 0;             // "overall" time per message
};

// Starts the server, waits until it listens, runs the client and parses its CSV output (-v).
// kNotFound when ucx_perftest is not installed; kIoError with its output when it fails.
Result<PerftestResult> run_perftest(const PerftestRun& run);

}  // namespace dualpath::transport
