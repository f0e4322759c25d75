#pragma once
// `dualpath bench control` (issue 33): the control plane alone at cluster scale. A real
// `dualpath serve --external-nodes` process (the scheduler service and the HTTP API, one process
// today) over fake nodes (bench/fake_nodes.h: the real RPC and protocol, no work), driven through
// the real HTTP API by an open-loop load generator at a given turn rate. Reports, side by side:
//   turns/s sustained and errors;
//   placement overhead: a request's arrival at the API to its prefill call on the (fake) node;
//   token-delivery overhead: a token leaving its node to the client reading it;
//   CPU of the scheduler process (utime + stime from /proc/PID/stat, the figure getrusage gives):
//     per turn, from a phase whose decodes stream one token, and per token, from the difference
//     between that phase and the main one (tokens per decode as given), per 1,000 tokens too;
//     per load report, from an idle phase with the nodes reporting and no turns.
// The API lives in the scheduler's process, so its CPU is in the scheduler's figures and the
// api_* fields are 0 (the JSON contract's "0 where a process is not on the path").
//
// The load generator and the fake nodes share this process; their CPU is reported too, as the
// price of the measurement, not of the system.

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

#include <nlohmann/json.hpp>

#include "common/percentiles.h"
#include "dualpath/result.h"

namespace dualpath::bench {

struct ControlBenchOptions {
  std::string dualpath_program;  // the dualpath binary to run `serve` with
  int prefill_nodes = 44;
  int decode_nodes = 88;
  double rate = 100;             // turns per second offered
  int64_t tokens = 176;          // tokens per decode
  double token_rate = 0;         // tokens per second per decode; 0: as fast as they go
  double duration_s = 10;        // each loaded phase
  double idle_s = 3;             // the idle phase (reports only)
  int64_t prompt_bytes = 1024;   // prompt length (byte tokens)
  int clients = 64;              // HTTP connections of the load generator
  int report_interval_ms = 100;
  double fetch_interval_s = 0;   // the scheduler's group-fetch interval; 0: serve's default
  bool per_token_phase = true;   // run the one-token phase that splits CPU per turn and per token
  std::string work_dir;          // logs and the generated config; empty: a temporary directory
  // Tests: a pause between two fake nodes' registrations, as a loaded machine makes them.
  std::chrono::milliseconds register_pause{0};
};

struct ControlPhase {
  std::string name;
  int64_t tokens_per_turn = 0;
  int64_t offered = 0, completed = 0, errors = 0, late = 0;
  double wall_s = 0;
  double turns_per_s = 0;
  int64_t tokens = 0;
  LatencyStats placement_ms, token_delivery_ms, e2e_ms;
  double scheduler_cpu_s = 0, bench_cpu_s = 0;
  std::string first_error;
};

struct ControlBenchResult {
  ControlBenchOptions options;
  ControlPhase main, one_token;
  bool has_one_token = false;
  double idle_wall_s = 0, idle_scheduler_cpu_s = 0;
  int64_t idle_reports = 0;
  double scheduler_cpu_us_per_turn = 0, scheduler_cpu_us_per_token = 0;
  double scheduler_cpu_us_per_report = 0;
  double scheduler_cpu_us_per_turn_all_in = 0;  // the main phase's CPU over its turns
  nlohmann::json to_json() const;
};

// Runs the three phases; `progress` gets a line per step (may be empty).
Result<ControlBenchResult> run_control_bench(const ControlBenchOptions& options,
                                             const std::function<void(const std::string&)>& progress);

std::string format_control_bench(const ControlBenchResult& r);

}  // namespace dualpath::bench
