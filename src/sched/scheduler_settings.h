#pragma once
// The scheduler's settings and parameters, read and derived once for the simulator (sim/) and the
// live scheduler service (serve/): the modes and the one table that maps each to its engine and
// read-path policies, the shared keys of the config's [scheduler] section (one reader), and
// make_cluster_scheduler_params, the one place a ClusterScheduler's parameters are derived. The
// live system's numbers that must differ from the simulator's (the CPU model's measured prefill
// rate, an engine that runs several GPUs) are inputs here, never a second formula (issue 31).
//
// Pure; value types, thread-compatible.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/config.h"
#include "dualpath/result.h"
#include "model/cost_model.h"
#include "sched/cluster_scheduler.h"
#include "sched/pe_scheduler.h"
#include "sched/read_path.h"

namespace dualpath::sched {

// PAPER.md §9's baselines and §10.5's ablation; the live system runs those marked live.
enum class Mode {
  kBasic,      // PE-side reads only, no layerwise prefill, round-robin engines
  kLayerwise,  // + layerwise prefill (transfers overlap compute, HBM holds one layer)
  kDualPath,   // + the DE read path, sides alternating round-robin; round-robin engines
  kFull,       // + the scheduler: Algorithm 1, DE two-phase, read-queue path choice,
               //   compute-quota batching (DualPath)
  kOracle,     // full, with no storage reads, no H2D/D2H and no PD transfer (zero-I/O bound)
  kSplit,      // full, with split reads: one request's hit blocks read by both sides at once
               //   (PAPER.md §11 future work; sched::split_read)
};

// The one mode table: what each mode's scheduler does.
struct ModePolicy {
  EnginePolicy engines = EnginePolicy::kPaper;
  PathPolicy paths = PathPolicy::kShortestQueue;
  bool layerwise = true;  // the PE loads KV layer by layer (Basic holds the whole prompt's KV)
  bool live = true;       // the live system runs it (the others are simulator ablations)
};
ModePolicy mode_policy(Mode m);
// Modes placed by the paper's scheduler (Algorithm 1, DE two-phase; the others round robin).
bool uses_paper_scheduler(Mode m);
// Modes whose decode nodes read from storage too (their storage NICs count in the I/O bound).
bool reads_on_both_sides(Mode m);
// Modes under which [cache]'s DE DRAM tier and read-or-recompute apply (issue 35): the paper's
// scheduler choosing each turn's read path with layerwise prefill (full, split). The simulator
// refuses them under the others; the live system turns them off there.
bool cache_policies_apply(Mode m);

const std::vector<std::string>& mode_names();
// Every mode; with `live`, a simulator-only mode is an error saying so.
Result<Mode> parse_mode(std::string_view name, bool live = false);
std::string_view mode_name(Mode m);

// The [scheduler] keys the simulator and the live service share (PAPER.md §8.5).
struct SchedulerSettings {
  Mode mode = Mode::kFull;
  double quota_s = 0.3;           // scheduler.quota_ms: compute quota per PE pass
  double alpha_s = 3.0;           // scheduler.alpha_s: read-queue threshold, seconds of reading
  double beta_s = 5.0;            // scheduler.beta_s: compute threshold, seconds of prefill
  double z_factor = 1.05;         // scheduler.z_factor: DE two-phase slack
  double fetch_interval_s = 0.05; // scheduler.fetch_interval_ms: how often engine groups fetch
  PePolicy pe_policy = PePolicy::kPaper;  // scheduler.pe_policy: how Algorithm 1 ranks PEs
  int64_t split_min_tokens = 1024;        // scheduler.split_min_tokens (mode split)

  // Ranges; errors name the key, the value and the fix.
  Status validate() const;
};

// Reads the shared [scheduler] keys of `file` over `settings` (the one reader). With `live`, a
// simulator-only mode is refused naming the live ones. The callers' own keys of the section
// (the simulator's read_queue_depth, the service's host, port, leases...) are theirs to read.
Status read_scheduler_settings(Config& file, SchedulerSettings& settings, bool live = false);

// The workload's typical turn, at which beta is priced: its mean cached and new tokens. The
// default is PAPER.md Fig. 3's agent turn (30K cached, 300 new), for a service whose workload is
// not known in advance.
struct TypicalTurn {
  int64_t cached_tokens = 30000;
  int64_t new_tokens = 300;
  bool operator==(const TypicalTurn&) const = default;
};

// What the callers of make_cluster_scheduler_params know differently.
struct SchedulerInputs {
  // Prices prefill for beta (the simulator; the live modeled backend). Null: the live CPU model,
  // whose measured rate is prefill_tokens_per_s.
  const model::CostModel* cost = nullptr;
  double prefill_tokens_per_s = 0;  // per engine, without a cost model
  TypicalTurn typical;
  int pe_group_gpus = 1;       // GPUs of one PE EP group: beta's batch is priced on them
  double gpus_per_engine = 1;  // a live engine that computes on several GPUs at once
  // Alpha: the tokens a node's storage NIC reads in alpha_s, at this rate and KV size, both in
  // the cost model's units (emulated time and full-size KV for an emulated cluster). A rate of
  // 0 is unlimited: no read queue ever counts as long.
  double snic_bytes_per_s = 0;
  double kv_bytes_per_token = 1;
  double de_hbm_bytes = 0;                   // KV budget of one DE engine's HBM
  std::vector<double> de_group_hbm_bytes{};  // per DE group, when they differ
  int64_t block_tokens = 64;
  // Read or recompute ([cache] recompute = auto; issue 35): priced at snic_bytes_per_s.
  bool recompute_auto = false;
};

// The one derivation of a ClusterScheduler's parameters from the settings and the inputs.
ClusterSchedulerParams make_cluster_scheduler_params(const SchedulerSettings& settings,
                                                     const SchedulerInputs& inputs);

}  // namespace dualpath::sched
