#pragma once
// From a SimConfig to agents to a result: the workload side of a simulation run (dataset spec,
// scaling, offline replay with the synthetic first round) and the JSON/CSV/table renderings.

#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "sim/cluster_sim.h"

namespace dualpath::sim {

// Loads cfg.dataset (32k|48k|64k|weka:PATH), applies append/gen scaling and makes the agents with
// the paper's synthetic first round: cfg.agents offline (all at t = 0), or Poisson arrivals at
// cfg.online.aps until cfg.online.duration_s. A mooncake:PATH trace gives one single-turn agent
// per request at its (scaled) timestamp, carrying its prefix-block ids.
Result<std::vector<AgentPlan>> build_agents(const SimConfig& cfg);

// build_agents + simulate.
Result<SimResult> run_experiment(const SimConfig& cfg, const SimOptions& options = {});

nlohmann::json result_to_json(const SimResult& r, bool with_timeseries = false);
// {"mean", "p50", "p90", "p99", "max", "count"}: the form of every latency in the JSON outputs.
nlohmann::json latency_json(const LatencyStats& s);
// The per-node SNIC throughput and running agents, one row per bucket.
std::string timeseries_csv(const SimResult& r, int prefill_nodes);
// A terminal table of the headline metrics.
std::string result_table(const SimResult& r);

}  // namespace dualpath::sim
