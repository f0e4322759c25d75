#pragma once
// The live benchmark (`dualpath bench live`): agents replayed through the live cluster (the
// scheduler service and its node processes), one driver thread per agent, each turn's shape
// (context kept, append, generation) taken from the same workload/ replay the simulator runs
// (sim::build_agents on the same config file), so the two compare turn for turn:
//
//   prompt_i  = context_i (the agent's earlier prompts and generated tokens, cut to the turn's
//               kept context) + append_i fresh random token ids;
//   hit       = the longest prefix of it in the store (the blocks earlier turns persisted), or
//               for the oracle the kept context less its last (generated) token, whose KV
//               only the next prefill computes, block-rounded: the same hits;
//   output    = exactly gen_i tokens, which join the context.
//
// Offline every agent starts at once; online (the simulator's Poisson agents, --aps) each starts
// at its arrival time, and the simulator's stop rule (sim/stop_rule.h: the TTFT over the last
// window past the SLO, a steady state, or the duration) ends the run: no turn starts after it,
// the turns in flight finish, and the latencies are those of the last window before it. The scheduler places every turn
// (PAPER.md §8). Times are reported in emulated seconds (real seconds / time_dilation) next to
// the real ones, so a modeled cluster's figures compare with the simulator's. A turn that fails
// is counted (failed_turns) and ends its agent; the others go on.
//
// Fault injection (the failure checks of docs/serve.md): one node is SIGKILLed at a given
// emulated time; its turns are retried or migrated by the service.
//
// Threads: run_live_bench blocks; it runs one thread per agent (and one for the fault, one for
// the stop rule) and calls
// `progress` from them, one call at a time.

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/percentiles.h"
#include "serve/cluster.h"
#include "sim/cluster_sim.h"
#include "sim/sim_config.h"

namespace dualpath::bench {

using engine::HopBytes;
using Json = nlohmann::json;
using serve::TurnRequest;
using serve::TurnResult;

struct LiveBenchOptions {
  sched::PathRequest path;  // a fixed read path, or nullopt: the service's policy
  uint64_t seed = 1;        // the appended token ids
  bool online = false;      // agents start at their AgentPlan::start_s (emulated)
  // The SLO the latencies are judged by, and online the simulator's stop rule and report window
  // (sim/stop_rule.h): duration_s caps the run, window_s is the latencies' window.
  sim::OnlineConfig slo;
  double balance_window_s = 10;  // emulated seconds per storage-NIC balance window (Fig. 13)
  // Fault: SIGKILL this node at this emulated time (it stays down).
  std::optional<engine::NodeId> kill;
  double kill_at_s = 0;
  // Called after every turn with (turns done, turns in all, real seconds since the start).
  std::function<void(int64_t, int64_t, double)> progress;
};

struct LiveBenchResult {
  double time_dilation = 1;
  double jct_s = 0;       // emulated: the last agent's finish (real / time_dilation)
  double jct_real_s = 0;  // real
  int agents = 0;
  int prefill_nodes = 0, decode_nodes = 0;
  int64_t turns = 0;           // completed
  int64_t failed_turns = 0;    // ended with an error
  int64_t retried_turns = 0;   // completed after more than one attempt (a node died under them)
  int64_t migrated_turns = 0;  // completed after their decode moved to another node
  int64_t migrated_read_bytes = 0;  // what the migrated attempts read from storage
  int64_t prompt_tokens = 0;
  int64_t hit_tokens = 0;
  int64_t pe_path_turns = 0;
  int64_t de_path_turns = 0;
  HopBytes bytes;
  // Storage reads per node: prefill nodes, then decode nodes.
  std::vector<int64_t> storage_read_by_node;
  // max/avg of the nodes' storage-NIC read bytes, over the run and over window_s windows of
  // the busy period (byte-weighted as the simulator's snic_read_max_over_avg).
  double snic_max_over_avg_run = 0;
  double snic_max_over_avg = 0;
  // max/avg over the PE nodes of their prefill busy time.
  double pe_busy_max_over_avg = 0;
  // Emulated seconds. Online: over the last window before the stop, as the simulator reports.
  LatencyStats ttft, ttst, tpot;
  LatencyStats turn_s;  // every turn, start to last token (emulated): nothing hangs
  // Real milliseconds each turn's first attempt waited for its placement (the group fetch).
  LatencyStats queue_ms;
  // Emulated seconds from a turn's placement to its storage reads done (turns that read).
  LatencyStats read_s;
  bool slo_met = false;
  // Online: why no more turns started (the simulator's stop rule: "ttft_slo", "steady_state",
  // "duration"; "all_done" when every agent finished first), and the window reported.
  std::string stop_reason;
  double report_from_s = 0, report_to_s = 0;
  int64_t persist_skipped_blocks = 0;  // blocks the decodes could not persist (cache degraded)
  double ttft_p50_s = 0, ttft_p99_s = 0, ttft_mean_s = 0;  // emulated (as ttft)
  double tpot_p50_s = 0, tpot_p99_s = 0;                   // emulated (as tpot)
  std::vector<double> agent_jct_s;  // per agent, emulated seconds from its start
  // Per agent, a digest of every output token of its turns (equal runs give equal digests).
  std::vector<uint64_t> agent_output_digest;
  std::vector<std::string> errors;  // the first few failed turns' errors

  Json to_json() const;
  std::string table() const;
};

// Runs every agent's turns to completion (failed turns are counted, not fatal).
Result<LiveBenchResult> run_live_bench(serve::Cluster& cluster,
                                       const std::vector<sim::AgentPlan>& agents,
                                       const LiveBenchOptions& options);

}  // namespace dualpath::bench
