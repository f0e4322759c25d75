#pragma once
// The cluster simulator: P prefill and D decode nodes of g GPUs replaying agent trajectories
// through both read paths (PAPER.md §4), on shared resources (DESIGN.md sim/). Modes in
// sim_config.h. The scheduling policies are sched/'s and the GPU times model/'s: the simulator
// only moves requests between them.
//
// What is modelled, per turn of an agent:
//   schedule (PE: Algorithm 1 or round robin; DE: two-phase or round robin; DE HBM reserved)
//   -> storage read of the hit KV on the chosen node's storage NIC (processor sharing among the
//      reads in flight, a bounded queue depth, admission into the node's DRAM buffer)
//   -> prefill in forward passes of the PE's EP group (DP attention, the slowest GPU sets the
//      pace; layerwise: the KV streams per layer over the CNIC, overlapped with compute, sharing
//      the CNIC with high-priority EP traffic; basic: the whole KV is loaded into HBM first)
//   -> KV to the DE buffer, decode-start H2D over the DE's CNIC, decode on the DE (processor
//      sharing: each iteration's time from the CostModel), persistence of the new full blocks
//      over the DE node's storage NIC -> the agent's next turn.
// Single-threaded and deterministic: the same config and seed give the same result.

#include <functional>
#include <string>
#include <vector>

#include "sim/sim_config.h"
#include "workload/trajectory.h"

namespace dualpath::sim {

struct AgentPlan {
  double start_s = 0;                      // when the agent's first turn is sent
  std::vector<workload::TurnShape> turns;  // including the synthetic first round
  std::vector<double> think_s;             // delay before each turn (empty: none)
};

// Per-hop byte counts (PAPER.md §6 accounting); bytes of KV as stored.
struct HopBytes {
  double storage_read_pe = 0;  // storage -> PE node (PE path, and Basic)
  double storage_read_de = 0;  // storage -> DE node (DE path)
  double pe_h2d = 0;           // PE buffer -> PE HBM (PE path, per layer)
  double de_to_pe = 0;         // DE buffer -> PE HBM (DE path, per layer)
  double pd_transfer = 0;      // PE HBM -> DE buffer (hit+miss on the PE path, miss on DE path)
  double de_h2d = 0;           // DE buffer -> DE HBM at decode start
  double persist = 0;          // new full blocks -> storage
};

struct TimePoint {
  double t_s = 0;
  std::vector<double> snic_read_gbps;  // per node, over the bucket
  int running_agents = 0;
  double prompt_tokens_per_s = 0;
};

struct SimResult {
  std::string mode, model, pd, dataset;
  int agents = 0;
  int64_t turns = 0;
  double jct_s = 0;
  double prompt_tokens = 0;
  double prompt_tokens_per_s = 0;
  double ttft_p50_s = 0, ttft_p99_s = 0, ttft_mean_s = 0;
  double ttst_p50_s = 0;
  double tpot_p50_s = 0, tpot_p99_s = 0;
  // TTFT breakdown means (PAPER.md Fig. 12 left): scheduling, read (incl. its queue), prefill.
  double ttft_sched_mean_s = 0, ttft_read_mean_s = 0, ttft_prefill_mean_s = 0;
  // The part of the read that waited for DRAM-buffer space before the SNIC read began.
  double ttft_buffer_wait_mean_s = 0;
  double storage_read_bytes = 0;
  double storage_write_bytes = 0;
  HopBytes hops;
  int64_t pe_path_turns = 0, de_path_turns = 0;
  double snic_read_max_over_avg = 0;
  double hit_tokens = 0;
  double io_floor_s = 0;       // storage_read_bytes / usable storage bandwidth
  double compute_floor_s = 0;  // prefill work at the best batch efficiency / PE GPUs
  // The longest agent's serial chain: its turns back to back on an idle cluster (each prefill
  // alone, each decode alone, think times). A run near it is bound by its slowest agent, not by
  // the cluster's throughput: more agents would cost little more time.
  double chain_floor_s = 0;
  double pe_busy_fraction = 0;        // mean fraction of time PE groups spend in forward passes
  int64_t prefill_passes = 0;         // forward passes of PE groups
  double new_tokens_per_pass = 0;     // per EP group, mean
  int64_t transfer_bound_passes = 0;  // passes whose KV streaming outlasted the compute
  // Per PE engine (GPU) and pass it worked in, means: requests whose KV was ready in its FIFO,
  // requests it batched, and the fraction of its batches the compute quota cut (DualPath and
  // Oracle; 0 elsewhere). A low quota-bound fraction with few ready requests means the pass
  // started before more work arrived: the fixed pass cost is then poorly amortised.
  double ready_requests_per_engine_pass = 0;
  double batched_requests_per_engine_pass = 0;
  double quota_bound_fraction = 0;
  uint64_t sim_events = 0;
  double wall_s = 0;
  std::vector<TimePoint> timeseries;
};

struct SimOptions {
  // Called about every `progress_interval_s` of wall time with (sim time, turns done, turns total).
  std::function<void(double, int64_t, int64_t)> progress;
  double progress_interval_s = 2.0;
};

Result<SimResult> simulate(const SimConfig& cfg,
                           const std::vector<AgentPlan>& agents,
                           const SimOptions& options = {});

}  // namespace dualpath::sim
