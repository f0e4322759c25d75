#pragma once
// SLO capacity (PAPER.md §10.4, Fig. 11): the largest arrival rate (agents per second) whose
// online run meets the SLO. A bracket (the rate times or over `step` until one probe meets the
// SLO and one misses it), then bisection until the bracket is within `tolerance`. Every probe is
// one online simulation (sim/sim_config.h OnlineConfig), so the search is as deterministic as
// the simulator: the same config and seed give the same probes.

#include <functional>
#include <string>
#include <vector>

#include "sim/cluster_sim.h"

namespace dualpath::sim {

struct CapacityProbe {
  double aps = 0;
  bool slo_met = false;
  std::string stop_reason;
  double stopped_at_s = 0;  // simulated time the run stopped
  LatencyStats ttft, tpot;
  double wall_s = 0;
};

struct CapacityOptions {
  double tolerance = 0.02;  // stop when hi / lo - 1 <= tolerance
  double step = 1.5;        // bracket growth factor
  double start_aps = 0;     // 0: estimated from the cost model (estimate_capacity_aps)
  double min_aps = 1e-4;    // below this the search gives up
  int max_probes = 40;
  std::function<void(const CapacityProbe&)> on_probe;  // called after each probe
};

struct CapacityResult {
  double aps_capacity = 0;            // the largest probed APS that met the SLO
  double aps_first_missed = 0;        // the smallest probed APS above it that missed
  double estimate_aps = 0;            // where the search started
  std::vector<CapacityProbe> probes;  // in the order run
  SimResult at_capacity;              // the run at aps_capacity
  double wall_s = 0;
};

// A throughput bound on the APS from the cost model alone: the rate at which every PE GPU is busy
// with prefill at the best batching, or every storage NIC allowed to read is busy reading, for the
// mean agent of the workload. No run can meet an SLO above it for long; the search starts below.
Result<double> estimate_capacity_aps(const SimConfig& cfg);

// Errors: an invalid config; no probe down to min_aps meets the SLO (failed_precondition, naming
// the lowest probe's latencies and what to change); a probe's simulation error.
Result<CapacityResult> find_capacity(const SimConfig& cfg, const CapacityOptions& options = {});

// The capacity is a property of the workload's distribution, not of one draw of it: a seed fixes
// the agents' trajectories and their Poisson arrivals, and the search's answer moves with it
// (DS 660B 2P4D, 20 seeds: DualPath/Basic 2.40-2.79, docs/calibration.md). CapacityOverSeeds
// summarises the searches of several seeds (`dualpath capacity --seeds`, `dualpath paper`).
struct SeedCapacity {
  uint64_t seed = 0;
  CapacityResult result;
};
struct CapacityOverSeeds {
  std::vector<SeedCapacity> seeds;  // in seed order
  double median_aps = 0;            // median of the seeds' aps_capacity
  double min_aps = 0, max_aps = 0;
  size_t median_seed = 0;  // index into `seeds` of the (lower) middle capacity: its run is shown
  double wall_s = 0;
};

// Summarises per-seed capacities (at least one); the seeds' results must be filled in.
CapacityOverSeeds summarize_seeds(std::vector<SeedCapacity> seeds);

}  // namespace dualpath::sim
