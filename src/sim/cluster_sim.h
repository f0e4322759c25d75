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

#include "common/percentiles.h"
#include "sched/cluster_scheduler.h"
#include "sched/scheduler_settings.h"
#include "sched/turn_plan.h"
#include "sim/sim_config.h"
#include "workload/trajectory.h"

namespace dualpath::sim {

struct AgentPlan {
  double start_s = 0;                      // when the agent's first turn is sent
  std::vector<workload::TurnShape> turns;  // including the synthetic first round
  std::vector<double> think_s;             // delay before each turn (empty: none)
  // A request of a content-addressed trace (mooncake:PATH; one turn): its prompt's prefix-block
  // ids, one per `prefix_block_tokens`. Its hit is decided when it arrives, as the leading blocks
  // that earlier requests have stored, and it stores its own full blocks when it finishes. Empty
  // for agents, whose hit is their own context (TurnShape::context_tokens).
  std::vector<uint32_t> prefix_blocks;
  int64_t prefix_block_tokens = 0;
};

// The workload's typical turn (its mean cached and new tokens over every turn of every agent),
// at which the scheduler's beta is priced; `bench live` gives the same to the live service.
sched::TypicalTurn typical_turn(const std::vector<AgentPlan>& agents);

// Where a TTFT went (PAPER.md Fig. 12 left), in seconds, as means over the reported requests.
// The four parts add up to the TTFT:
//   schedule  waiting to be scheduled: for the scheduler to assign a PE (scheduler_queue), for a
//             read slot on the reading node's storage NIC behind other reads (read_queue), and,
//             with the KV in place, in the PE's queue for its first forward pass (engine_queue).
//             Basic assigns at once, so its queueing shows in the last two;
//   allocate  waiting for space: DE HBM (the DE scheduler holds a request until it fits) and the
//             reading node's DRAM buffer;
//   read      the storage read of the hit KV while it is served (shared with the reads in flight);
//   prefill   from the start of its first forward pass to the first token (every chunk's pass,
//             and the waits between chunks).
struct TtftBreakdown {
  double schedule = 0, allocate = 0, read = 0, prefill = 0;
  // schedule = scheduler_queue + read_queue + engine_queue
  double scheduler_queue = 0, read_queue = 0, engine_queue = 0;
  double hbm_wait = 0, buffer_wait = 0;        // allocate = hbm_wait + buffer_wait
  double total() const { return schedule + allocate + read + prefill; }
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

// Adaptive P/D (AdaptivePdConfig): one node's change, effective at t_s, when its engine runs in
// its new group. drain_s: from the controller's decision to the node's last work done; switch_s:
// from then to t_s (the engine restart, plus the weight reload when the EP size changed).
struct RoleChange {
  double t_s = 0;
  int node = 0;  // physical node
  std::string from, to;  // "prefill" | "decode"
  double drain_s = 0, switch_s = 0;
  int ep_gpus_from = 0, ep_gpus_to = 0;
};

// The physical nodes in each role from t_s on; switching: drained and not yet running again.
struct PdPoint {
  double t_s = 0;
  int prefill_nodes = 0, decode_nodes = 0, switching_nodes = 0;
};

// Where the turns' hits came from (issue 35), in tokens: a DE node's DRAM tier, storage read by
// the PE node or the DE node, or recomputed (the scheduler found that sooner than reading).
struct HitSources {
  double de_dram = 0, pe_storage = 0, de_storage = 0, recompute = 0;
};

// The DE DRAM tier (SimConfig::de_dram_bytes): its use over the run, all decode nodes together.
struct DramTierStats {
  bool enabled = false;
  double bytes_per_node = 0, ttl_s = 0;
  double peak_bytes = 0, mean_bytes = 0;  // mean: over simulated time
  // Turns served from it; turns whose session it held but that were placed on another node
  // (read from storage); sessions that expired or were evicted for space; sessions stored.
  int64_t hits = 0, misplaced = 0, expired = 0, evicted = 0, stored = 0;
  // Prefetch (SimConfig::prefetch): its policy, the prefetches started, those skipped (no free
  // tier space), and the bytes of prefetched sessions that served a turn.
  std::string prefetch = "never";
  int64_t prefetches = 0, prefetch_skipped = 0;
  double prefetch_used_bytes = 0;
};

// The bounded store (SimConfig::store_capacity_bytes).
struct StoreStats {
  bool bounded = false;
  double capacity_bytes = 0;
  std::string evict;
  double evicted_bytes = 0, peak_bytes = 0;
  int64_t evicted_sessions = 0;
  int64_t evicted_running_sessions = 0;  // of them, sessions not ended (their next turn misses)
  int64_t rejected_sessions = 0;  // not kept: every other session was in a turn
};

struct SimResult {
  std::string mode, model, pd, dataset;
  int agents = 0;
  int64_t turns = 0;
  double jct_s = 0;
  double prompt_tokens = 0;
  double prompt_tokens_per_s = 0;
  double ttft_p50_s = 0, ttft_p99_s = 0, ttft_mean_s = 0;
  double ttst_p50_s = 0;  // TTST: from the first token to the second (PAPER.md Table 3)
  double tpot_p50_s = 0, tpot_p99_s = 0;
  // Over the reported requests: every turn offline, the last window online (OnlineConfig).
  LatencyStats ttft, ttst, tpot;
  // The TTFT of the turns with a cached prefix and of those without (first turns), apart.
  LatencyStats ttft_hit, ttft_first;
  std::string slo_turns = "all";  // the turns the SLO judged (OnlineConfig::slo_turns)
  HitSources hit_source_tokens;
  int64_t recompute_turns = 0;
  DramTierStats dram_tier;
  // Bytes read from storage by prefetches (not in storage_read_bytes), and of them those whose
  // session came back before it landed, ended, or whose copy left the tier unused.
  double prefetch_bytes = 0, prefetch_wasted_bytes = 0;
  StoreStats store;
  TtftBreakdown ttft_breakdown;
  // The same over the tail: the requests whose TTFT is at or above the p99 (where the tail of
  // PAPER.md §11's open problem comes from).
  TtftBreakdown ttft_tail_breakdown;

  // Online runs (OnlineConfig; aps 0 offline). The SLO is judged on the reported requests.
  double aps = 0;
  bool online = false;
  bool slo_met = false;
  std::string slo_statistic;
  double slo_ttft_s = 0, slo_tpot_s = 0;
  // "all_done" (every agent finished), "steady_state", "ttft_slo" (the TTFT window exceeded the
  // SLO), "duration" (the cap), "trace_end" (a timestamped trace replayed to its end).
  std::string stop_reason;
  double report_from_s = 0, report_to_s = 0;  // the window the latencies cover
  int64_t agents_arrived = 0, agents_finished = 0;
  // PAPER.md §10.8: the KV the running agents hold in the store (they read it again), as a time
  // mean over the reported window; next to the paper's formula aps * T * len / 2 with T the mean
  // agent lifetime by Little's law (running agents / aps) and len an agent's final length.
  double working_set_bytes = 0;
  double working_set_formula_bytes = 0;
  double running_agents_mean = 0;
  double agent_time_mean_s = 0;           // mean turns per agent x the window's mean turn time
  double finished_agent_time_mean_s = 0;  // over the agents that finished (short ones first)
  double agent_length_mean_tokens = 0;    // final context of an agent (prompt + gen, last turn)
  double hit_ratio = 0;                   // hit tokens / prompt tokens, all turns
  int64_t stored_blocks = 0;              // content-addressed traces: distinct blocks stored
  // A timestamped trace's own hit ratio (leading blocks any earlier request held), -1 otherwise:
  // the replay hits less, since a block is stored only when its request has finished.
  double trace_static_hit_ratio = -1;
  double storage_read_bytes = 0;
  double storage_write_bytes = 0;
  HopBytes hops;
  int64_t pe_path_turns = 0, de_path_turns = 0;
  // Split reads (Mode::kSplit): turns whose hit both sides read parts of, and those parts' bytes.
  int64_t split_path_turns = 0;
  double split_read_bytes_pe = 0, split_read_bytes_de = 0;
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
  std::vector<TimePoint> timeseries;  // snic_read_gbps per physical node
  // Adaptive P/D: the role changes, the nodes that stayed in their role but joined an EP group
  // of another size (ep_regroups), and the split over time (its first point is the start).
  bool adaptive_pd = false;
  std::vector<RoleChange> role_changes, ep_regroups;
  std::vector<PdPoint> pd_over_time;
};

struct SimOptions {
  // Called once the run's central scheduler exists (before any event): tests record its calls
  // (ClusterScheduler::record_to) to replay them through another call site.
  std::function<void(sched::ClusterScheduler&)> on_scheduler;
  // Called with every turn's plan as it is placed (sched/turn_plan.h): the plan-replay check.
  std::function<void(const sched::TurnPlan&)> on_plan;
  // Called about every `progress_interval_s` of wall time with (sim time, turns done, turns total).
  std::function<void(double, int64_t, int64_t)> progress;
  double progress_interval_s = 2.0;
};

Result<SimResult> simulate(const SimConfig& cfg,
                           const std::vector<AgentPlan>& agents,
                           const SimOptions& options = {});

}  // namespace dualpath::sim
