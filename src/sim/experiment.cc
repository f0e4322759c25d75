#include "sim/experiment.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "workload/dataset_spec.h"
#include "workload/replay.h"
#include "workload/scale.h"

namespace dualpath::sim {

Result<std::vector<AgentPlan>> build_agents(const SimConfig& cfg) {
  DP_ASSIGN_OR_RETURN(workload::Dataset ds, workload::load_dataset(cfg.dataset, cfg.seed));
  if (cfg.append_scale != 1.0 || cfg.gen_scale != 1.0) {
    DP_ASSIGN_OR_RETURN(ds, workload::scale(ds, cfg.append_scale, cfg.gen_scale));
  }
  workload::ReplayOptions opt;
  opt.synthetic_first_round_tokens = cfg.first_round_tokens;
  opt.honour_think_time = cfg.think_time;
  DP_ASSIGN_OR_RETURN(auto agents, workload::make_offline_agents(ds, cfg.agents, cfg.seed, opt));
  std::vector<AgentPlan> plans;
  plans.reserve(agents.size());
  for (const auto& ag : agents) {
    AgentPlan p;
    p.start_s = ag.start_time_s;
    p.turns = workload::agent_shape(ds, ag);
    if (cfg.think_time) {
      int n = workload::agent_turn_count(ds, ag);
      for (int i = 0; i < n; ++i) p.think_s.push_back(workload::agent_turn(ds, ag, i).think_time_s);
    }
    plans.push_back(std::move(p));
  }
  return plans;
}

Result<SimResult> run_experiment(const SimConfig& cfg, const SimOptions& options) {
  DP_RETURN_IF_ERROR(cfg.validate());
  DP_ASSIGN_OR_RETURN(auto plans, build_agents(cfg));
  return simulate(cfg, plans, options);
}

nlohmann::json result_to_json(const SimResult& r, bool with_timeseries) {
  nlohmann::json j = {
      {"mode", r.mode},
      {"model", r.model},
      {"pd", r.pd},
      {"dataset", r.dataset},
      {"agents", r.agents},
      {"turns", r.turns},
      {"jct_s", r.jct_s},
      {"prompt_tokens", r.prompt_tokens},
      {"prompt_tokens_per_s", r.prompt_tokens_per_s},
      {"hit_tokens", r.hit_tokens},
      {"ttft_p50_s", r.ttft_p50_s},
      {"ttft_p99_s", r.ttft_p99_s},
      {"ttft_mean_s", r.ttft_mean_s},
      {"ttst_p50_s", r.ttst_p50_s},
      {"tpot_p50_s", r.tpot_p50_s},
      {"tpot_p99_s", r.tpot_p99_s},
      {"ttft_breakdown_mean_s",
       {{"schedule", r.ttft_sched_mean_s},
        {"read", r.ttft_read_mean_s},
        {"read_buffer_wait", r.ttft_buffer_wait_mean_s},
        {"prefill", r.ttft_prefill_mean_s}}},
      {"storage_read_bytes", r.storage_read_bytes},
      {"storage_write_bytes", r.storage_write_bytes},
      {"bytes",
       {{"storage_read_pe", r.hops.storage_read_pe},
        {"storage_read_de", r.hops.storage_read_de},
        {"pe_h2d", r.hops.pe_h2d},
        {"de_to_pe", r.hops.de_to_pe},
        {"pd_transfer", r.hops.pd_transfer},
        {"de_h2d", r.hops.de_h2d},
        {"persist", r.hops.persist}}},
      {"pe_path_turns", r.pe_path_turns},
      {"de_path_turns", r.de_path_turns},
      {"snic_read_max_over_avg", r.snic_read_max_over_avg},
      {"io_floor_s", r.io_floor_s},
      {"compute_floor_s", r.compute_floor_s},
      {"chain_floor_s", r.chain_floor_s},
      {"pe_busy_fraction", r.pe_busy_fraction},
      {"prefill_passes", r.prefill_passes},
      {"new_tokens_per_pass", r.new_tokens_per_pass},
      {"transfer_bound_passes", r.transfer_bound_passes},
      {"ready_requests_per_engine_pass", r.ready_requests_per_engine_pass},
      {"batched_requests_per_engine_pass", r.batched_requests_per_engine_pass},
      {"quota_bound_fraction", r.quota_bound_fraction},
      {"sim_events", r.sim_events},
      {"wall_s", r.wall_s},
  };
  if (with_timeseries) {
    nlohmann::json ts = nlohmann::json::array();
    for (const auto& p : r.timeseries) {
      ts.push_back({{"t_s", p.t_s},
                    {"snic_read_gbps", p.snic_read_gbps},
                    {"running_agents", p.running_agents},
                    {"prompt_tokens_per_s", p.prompt_tokens_per_s}});
    }
    j["timeseries"] = ts;
  }
  return j;
}

std::string timeseries_csv(const SimResult& r, int prefill_nodes) {
  std::string out = "t_s,running_agents,prompt_tokens_per_s";
  size_t nodes = r.timeseries.empty() ? 0 : r.timeseries.front().snic_read_gbps.size();
  for (size_t n = 0; n < nodes; ++n) {
    bool pe = static_cast<int>(n) < prefill_nodes;
    out += fmt::format(",snic_read_gbps_{}{}", pe ? "p" : "d",
                       pe ? n : n - static_cast<size_t>(prefill_nodes));
  }
  out += "\n";
  for (const auto& p : r.timeseries) {
    out += fmt::format("{:.1f},{},{:.0f}", p.t_s, p.running_agents, p.prompt_tokens_per_s);
    for (double g : p.snic_read_gbps) out += fmt::format(",{:.2f}", g);
    out += "\n";
  }
  return out;
}

std::string result_table(const SimResult& r) {
  std::string s;
  auto row = [&](std::string_view k, const std::string& v) {
    s += fmt::format("  {:<26} {}\n", k, v);
  };
  s += fmt::format("dualpath sim: {} {} {} dataset={} agents={}\n", r.model, r.pd, r.mode,
                   r.dataset, r.agents);
  row("JCT", fmt::format("{:.1f} s", r.jct_s));
  row("turns", fmt::format("{} ({:.1f} turns/s)", r.turns, r.jct_s > 0 ? r.turns / r.jct_s : 0));
  row("prompt throughput", fmt::format("{:.0f} tokens/s", r.prompt_tokens_per_s));
  row("TTFT p50 / p99", fmt::format("{:.2f} s / {:.2f} s", r.ttft_p50_s, r.ttft_p99_s));
  row("TTFT = sched+read+prefill",
      fmt::format("{:.2f} + {:.2f} + {:.2f} s (means; the read waited {:.2f} s for buffer space)",
                  r.ttft_sched_mean_s, r.ttft_read_mean_s, r.ttft_prefill_mean_s,
                  r.ttft_buffer_wait_mean_s));
  row("TTST p50", fmt::format("{:.3f} s", r.ttst_p50_s));
  row("TPOT p50 / p99",
      fmt::format("{:.1f} ms / {:.1f} ms", r.tpot_p50_s * 1e3, r.tpot_p99_s * 1e3));
  row("storage read",
      fmt::format("{:.1f} GB (PE side {:.1f}, DE side {:.1f})", r.storage_read_bytes / 1e9,
                  r.hops.storage_read_pe / 1e9, r.hops.storage_read_de / 1e9));
  row("read paths", fmt::format("PE {} turns, DE {} turns", r.pe_path_turns, r.de_path_turns));
  row("SNIC read max/avg", fmt::format("{:.3f}", r.snic_read_max_over_avg));
  row("floors (I/O, compute)", fmt::format("{:.1f} s, {:.1f} s", r.io_floor_s, r.compute_floor_s));
  const double chain_share = r.jct_s > 0 ? r.chain_floor_s / r.jct_s : 0;
  row("longest agent alone",
      fmt::format("{:.1f} s ({:.0f} % of the JCT{})", r.chain_floor_s, 100 * chain_share,
                  chain_share >= 0.5 ? "; the job waits on its slowest agent, so more agents "
                                       "would add little time"
                                     : ""));
  row("PE busy", fmt::format("{:.0f} %, {} passes of {:.0f} new tokens per EP group",
                             100 * r.pe_busy_fraction, r.prefill_passes, r.new_tokens_per_pass));
  row("PE batch per GPU",
      fmt::format("{:.1f} of {:.1f} ready requests; {:.0f} % cut by the quota",
                  r.batched_requests_per_engine_pass, r.ready_requests_per_engine_pass,
                  100 * r.quota_bound_fraction));
  row("simulated events", fmt::format("{} in {:.2f} s wall", r.sim_events, r.wall_s));
  return s;
}

}  // namespace dualpath::sim
