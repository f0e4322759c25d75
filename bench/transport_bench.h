#pragma once
// The transport benchmark behind `dualpath bench transport` (issue 4): put, get and active-
// message bandwidth through the traffic manager against ucx_perftest on the same transport,
// operation and size, in the same run; and the isolation experiment (model-class latency alone
// and under a saturating KV-class stream).

#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "dualpath/result.h"
#include "transport/traffic_manager.h"

namespace dualpath::transport {

inline constexpr uint64_t kAutoBytesPerCaseSm = 1ull << 30;
inline constexpr uint64_t kAutoBytesPerCaseTcp = 128ull << 20;

struct TransportBenchOptions {
  std::vector<std::string> transports{"sm", "tcp"};  // sm: UCX_TLS=sm,self; tcp: tcp,self on lo
  std::vector<std::string> ops{"put", "get", "am"};
  std::vector<uint64_t> sizes{64u << 10, 256u << 10, 1u << 20, 4u << 20, 16u << 20};
  // Bytes moved per measurement (iterations = bytes / size, clamped to [8, 16384]). 0 (the
  // default) picks per transport so one measurement lasts ~0.1 s: kAutoBytesPerCaseSm on sm
  // (10-50 GB/s here), kAutoBytesPerCaseTcp on tcp (1-6 GB/s). Shorter runs are mostly noise on
  // shared cores: 128 MiB on sm is ~10 ms, and one preemption then costs a cell 10-20 %.
  uint64_t bytes_per_case = 0;
  // Each measurement runs `repeats` times for both tools, interleaved; each tool's median run is
  // reported ("median"), or its best ("best": interference only ever slows a run down, but one
  // lucky quiet window then decides a cell).
  int repeats = 5;
  std::string statistic = "median";
  bool run_perftest = true;
  // Where our endpoints use peer error handling (tcp; docs/transport.md "Failure model"), also
  // run ucx_perftest with it (-e): UCX 1.13 then moves rendezvous data through bounce buffers,
  // for both tools. Reported beside the plain figure, which stays the reference.
  bool perftest_error_handling = true;
  std::string perftest_program = "ucx_perftest";
  // How to start the peer process: `peer_program peer_args... --peer-*` (peer_process.h).
  std::string peer_program;
  std::vector<std::string> peer_args;
  std::vector<std::string> isolation_transports{"sm", "tcp"};
  int isolation_probes = 2000;
  uint64_t isolation_kv_message_bytes = 4u << 20;
  bool isolation_control = true;  // also probe beside a plain copy loop (IsolationResult)
  TrafficManagerOptions traffic;
  // Our side runs in up to two progress modes, each with its own workers and peer process:
  //  - "polled": every progress thread (ours and the peer's) polls `polled_us` after its last
  //    event before sleeping, so during a measurement it never sleeps: how ucx_perftest runs
  //    (it busy-polls), and how an engine runs on dedicated cores ([transport] poll_us). The
  //    like-for-like comparison with ucx_perftest, reported as dualpath_gbps.
  //  - "event": the default of the library and the live system on shared cores: threads sleep
  //    on the UCX event fd (the worker_poll_* settings below), reported as dualpath_event_gbps.
  std::vector<std::string> modes{"polled", "event"};
  uint64_t polled_us = 20000;
  // Event mode: WorkerOptions::poll_before_sleep of every worker, ours and the peer's (0: sleep
  // at once).
  uint64_t worker_poll_us = 0;
  // Event mode: WorkerOptions::poll_while_in_flight of every worker, µs (negative: the worker
  // default).
  int64_t worker_poll_in_flight_us = -1;
  // Active messages per TrafficManager::send_am submission (0: all of a measurement's messages
  // in one submission, as a put's requests are; 1: one submission per message, up to 64
  // unfinished at a time, the way a caller without batching sends).
  uint64_t am_batch = 0;
};

struct BenchCase {
  std::string transport;
  std::string op;
  uint64_t message_bytes = 0;
  uint64_t iterations = 0;
  // Gb/s (1e9 bits per second), as everywhere in dualpath. dualpath_gbps is the polled mode
  // (like ucx_perftest) when it ran, else the event mode.
  double dualpath_gbps = 0;
  double dualpath_us_per_message = 0;
  std::string dualpath_mode;       // "polled" or "event": what dualpath_gbps measured
  double dualpath_event_gbps = 0;  // the event mode (default); 0 when it did not run
  double dualpath_event_us_per_message = 0;
  double perftest_gbps = 0;  // plain ucx_perftest; 0 when it did not run
  double perftest_us_per_message = 0;
  // ucx_perftest -e (peer error handling, as our endpoints on this transport); 0 when not run.
  double perftest_err_gbps = 0;
  double perftest_err_us_per_message = 0;
  // The like-for-like reference: ucx_perftest in our endpoints' error-handling mode (-e where
  // we use peer error handling, i.e. tcp), else plain ucx_perftest.
  double reference_gbps() const {
    return perftest_err_gbps > 0 ? perftest_err_gbps : perftest_gbps;
  }
  const char* reference_name() const { return perftest_err_gbps > 0 ? "perftest -e" : "perftest"; }
  double reference_us_per_message() const {
    return perftest_err_gbps > 0 ? perftest_err_us_per_message : perftest_us_per_message;
  }
  double ratio() const { return reference_gbps() > 0 ? dualpath_gbps / reference_gbps() : 0; }
  double event_ratio() const {
    return reference_gbps() > 0 ? dualpath_event_gbps / reference_gbps() : 0;
  }
  double plain_ratio() const { return perftest_gbps > 0 ? dualpath_gbps / perftest_gbps : 0; }
};

struct IsolationResult {
  std::string transport;
  std::string mode;  // the progress mode of the session it ran on
  int probes = 0;
  double idle_p50_us = 0;
  double idle_p99_us = 0;
  double loaded_p50_us = 0;
  double loaded_p99_us = 0;
  // The same probes sent in the KV class instead, behind the stream in the same queue: what a
  // model message would see without the class separation (the manager's effect).
  int fifo_probes = 0;
  double loaded_as_kv_p50_us = 0;
  double loaded_as_kv_p99_us = 0;
  double kv_gbps_during_load = 0;  // the KV stream's rate while the probes ran
  double kv_gbps_alone = 0;        // the same stream without probes
  // Control: the same probes while a plain copy loop (no UCX, no traffic manager) runs at the KV
  // lane's nice level: what the emulation's CPU copying alone costs the model path. 0: not run.
  double control_p50_us = 0;
  double control_p99_us = 0;
  double control_copy_gbps = 0;
  // p99 under the KV stream, and under the control, as multiples of the idle p99.
  double p99_ratio() const { return idle_p99_us > 0 ? loaded_p99_us / idle_p99_us : 0; }
  double control_p99_ratio() const { return idle_p99_us > 0 ? control_p99_us / idle_p99_us : 0; }
};

struct TransportBenchReport {
  TransportBenchOptions options;
  std::vector<BenchCase> cases;
  std::vector<IsolationResult> isolation;
};

// Runs every case, reporting each finished line through `progress`.
Result<TransportBenchReport> run_transport_bench(
    const TransportBenchOptions& options, const std::function<void(const std::string&)>& progress);

// The terminal table with the ratio column and the isolation lines.
std::string format_transport_report(const TransportBenchReport& report);
// {"cases": [...], "isolation": {...first isolation transport...}, "isolation_by_transport": [...]}
nlohmann::json transport_report_json(const TransportBenchReport& report);

}  // namespace dualpath::transport
