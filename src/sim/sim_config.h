#pragma once
// SimConfig: one cluster, one workload, one mode. Read from the TOML file that also drives the
// live system (configs/*.toml; one file describes one cluster for both), then overridden by flags.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/config.h"
#include "model/cost_model.h"
#include "sched/pd_controller.h"
#include "sched/pe_scheduler.h"
#include "sched/read_path.h"
#include "sched/scheduler_settings.h"

namespace dualpath::sim {

// The modes and their one policy table live in sched/scheduler_settings.h (shared with the live
// service).
using Mode = sched::Mode;
using sched::mode_name;
using sched::mode_names;
using sched::parse_mode;
using sched::reads_on_both_sides;
using sched::uses_paper_scheduler;

// The most agents one run takes: 48P96D runs 49,152 in ~0.5 GB, so 1 M needs ~10 GB.
inline constexpr int kMaxAgents = 1'000'000;

// Online serving (PAPER.md §9): agents arrive as a Poisson process and the run is judged by an
// SLO. The run stops when the TTFT over the last `window_s` exceeds the SLO, at steady state (that
// TTFT within `steady_tolerance` of its value `lookback_s` earlier), or at `duration_s`.
// Latencies are reported over the last window. A trace with its own timestamps (mooncake:PATH)
// replays at them instead, to its end, and reports over every request.
struct OnlineConfig {
  double aps = 0;              // agents per second; 0 = offline (SimConfig::agents at t = 0)
  double duration_s = 10800;   // the cap on simulated time (and on arrivals)
  double slo_ttft_s = 4.0;     // PAPER.md §9
  double slo_tpot_s = 0.050;
  // The statistic the SLO bounds and the stop rule watches: mean (the paper's), p50, p90, p99.
  std::string slo_statistic = "mean";
  double window_s = 150;       // PAPER.md §9: a 150 s sliding window...
  double lookback_s = 1800;    // ...within 5 % of its value 30 minutes earlier
  double steady_tolerance = 0.05;
  double check_interval_s = 10;  // how often the stop rule is evaluated (simulated seconds)
  double time_scale = 1.0;       // trace timestamps are multiplied by this (0.5 = twice the rate)
  // The turns the SLO and the stop rule judge (issue 35): "all", or "hit" (turns with a cached
  // prefix; a session's first turn, all prefill, is reported apart as ttft_first_s). WEKA's
  // first turns carry up to 900k uncached tokens: under "all" they alone can break a 4 s SLO
  // whatever the read path does.
  std::string slo_turns = "all";

  bool enabled() const { return aps > 0; }
};

// Adaptive P/D (sched/pd_controller.h): the run starts at prefill_nodes/decode_nodes and the
// controller moves between the static splits of the same nodes that can run. A node changes role
// once its work has drained; it then restarts its engine in the new role (switch_s: the weights
// stay in HBM when its EP size is unchanged) and, when its EP group's size changes, reloads its
// weight shard over its storage NIC first.
struct AdaptivePdConfig {
  bool enabled = false;
  double switch_s = 30;
  sched::PdControllerParams controller;
};

struct SimConfig {
  model::ModelSpec model;
  model::HardwareSpec hw;
  model::Efficiency eff;
  // The [scheduler] keys shared with the live service (mode, quota, alpha, beta, Z, fetch
  // interval, PE policy, split size; PAPER.md §8.5).
  sched::SchedulerSettings scheduler;

  int prefill_nodes = 2;
  int decode_nodes = 4;
  int pe_ep_nodes = 2;  // nodes per PE EP group (engines synchronise per forward pass)
  int de_ep_nodes = 4;  // nodes per DE EP group (the weights are spread over it)
  double pe_buffer_bytes = 80e9;  // DRAM buffer per PE node (PAPER.md §3: 80 GB, Qwen 320 GB)
  double de_buffer_bytes = 80e9;
  double hbm_reserved_bytes = 10e9;  // per GPU, for activations and workspace
  // HBM per PE GPU that a non-layerwise (Basic) prefill batch may fill with KV. Fitted, with
  // efficiency.storage_efficiency, to the ablation of PAPER.md Fig. 12 right (DS 660B 64K 2P4D,
  // 1,024 and 2,048 agents; least squares); docs/calibration.md.
  double basic_prefill_kv_bytes = 3.65e9;
  int block_tokens = 64;

  int read_queue_depth = 8;        // scheduler.read_queue_depth: reads in flight per storage NIC
  int max_batch_requests = 256;    // per GPU and pass without a quota
  // CNIC sharing: model traffic (EP dispatch/combine) is high priority; KV keeps this floor.
  double kv_class_floor = 0.01;
  double model_traffic_bytes_per_token = 0;  // 0: derived from the model (hidden x experts)

  // Workload.
  std::string dataset = "64k";
  int agents = 1024;  // 1 .. kMaxAgents
  uint64_t seed = 1;
  double append_scale = 1.0;
  double gen_scale = 1.0;
  bool think_time = false;
  double think_time_scale = 1.0;  // the recorded think times are multiplied by this (0: none)
  int first_round_tokens = 64;  // the synthetic first round (PAPER.md §9)
  OnlineConfig online;
  AdaptivePdConfig adaptive;
  // Beyond the paper, for agents (issue 35; docs/sched.md). Off by default: the paper's runs
  // are unchanged.
  //   de_dram_bytes: a DRAM tier per decode node. After a turn's decode its node keeps the
  //   session's KV (prompt and reply, whole blocks) for de_dram_ttl_s, least recently stored
  //   evicted first; the next turn placed there gets its hit from that DRAM, pushed to the PE
  //   layer by layer, with no storage read (ClusterScheduler prefers that node within
  //   DeParams::affinity_factor of its balanced load).
  //   recompute: "never" reads every hit (the paper); "auto" recomputes a hit when the cost model
  //   says that is sooner than reading it behind the chosen node's read queue
  //   (ClusterSchedulerParams::recompute_auto); "always" recomputes every hit (the sweep's
  //   baseline).
  double de_dram_bytes = 0;
  double de_dram_ttl_s = 480;  // vLLM's NIXL connector keeps decode blocks 480 s for the same reuse
  std::string recompute = "never";
  bool recompute_auto() const { return recompute == "auto"; }
  //   store_capacity_bytes: the KV store holds at most this much (0: unbounded, the paper's).
  //   Sessions are evicted whole (every block of a session is touched at each of its turns, so a
  //   block LRU evicts a session's blocks together), by `evict`: "lru", the least recently used
  //   session, ended or not; "session", first sessions that ended (their last turn is done),
  //   then those idle beyond twice their own mean think time so far (the mean of all sessions'
  //   before their first think), then the least recently used. A session in a turn is never
  //   evicted. A turn whose session was evicted recomputes its whole prompt.
  double store_capacity_bytes = 0;
  std::string evict = "lru";
  //   prefetch (with the DRAM tier): when a session between turns loses its tier copy (expired
  //   or evicted for space), "never" leaves it to its next turn's storage read; "always" stages
  //   it again at once into the decode node with the most free tier space; "predict" stages it
  //   so that it lands by the session's expected return (its last turn's end + its mean think so
  //   far, all sessions' before its first). A prefetch is a storage read of the lowest priority:
  //   it runs on a node's storage NIC only while no demand read does, and only into free tier
  //   space (it never evicts).
  std::string prefetch = "never";

  // Outputs.
  double timeseries_bucket_s = 10.0;

  std::string pd_label() const;
  Status validate() const;
  // EP groups never span more nodes than their role has: clamps pe_ep_nodes and de_ep_nodes to
  // the node counts (call after setting them).
  void fit_ep_groups();
};

// True for a dataset spec that replays requests at their own timestamps (mooncake:PATH).
bool is_timestamped_trace(std::string_view dataset);

// "2P4D" -> (2, 4).
Result<std::pair<int, int>> parse_pd(std::string_view text);

// Defaults per model (PAPER.md §9): ds660b 2P4D, qwen32b 1P2D (320 GB buffers, no EP), ds27b 1P1D.
Result<SimConfig> default_sim_config(std::string_view model_name);

// Applies a config file's sections ([model], [hardware], [cluster], [workload], [scheduler],
// [efficiency]) over `cfg`. Sections for the live system only ([store], [live], [transport],
// [emulation]) are left to it (engine::apply_engine_config), so that a file both read has each
// key checked by its reader. Errors name the key, the value and the fix.
Status apply_config(Config& file, SimConfig& cfg);

// For a reader of the simulator's sections alone (dualpath sim): the live system's sections are
// not checked for unknown keys.
void ignore_live_sections(Config& file);

}  // namespace dualpath::sim
