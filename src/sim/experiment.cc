#include "sim/experiment.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "workload/dataset_spec.h"
#include "workload/mooncake_reader.h"
#include "workload/replay.h"
#include "workload/scale.h"

namespace dualpath::sim {

namespace {

constexpr std::string_view kMooncakePrefix = "mooncake:";

// A timestamped trace: one single-turn agent per request, at its own (scaled) arrival time.
// *static_hit_ratio gets the trace's own prefix hit ratio (workload::static_prefix_hit_ratio).
Result<std::vector<AgentPlan>> build_trace_agents(const SimConfig& cfg, double* static_hit_ratio) {
  const std::string path(cfg.dataset.substr(kMooncakePrefix.size()));
  if (path.empty()) {
    return Status::invalid_argument(
        "dataset 'mooncake:' names no file; use mooncake:PATH, e.g. "
        "mooncake:../shared/traces/mooncake_fast25/conversation_trace.jsonl");
  }
  DP_ASSIGN_OR_RETURN(workload::RequestTrace trace, workload::read_mooncake(path));
  if (static_hit_ratio != nullptr) *static_hit_ratio = workload::static_prefix_hit_ratio(trace);
  std::vector<AgentPlan> plans;
  plans.reserve(trace.requests.size());
  for (workload::TraceRequest& r : trace.requests) {
    AgentPlan p;
    p.start_s = r.arrival_s * cfg.online.time_scale;
    // workload.append_scale scales a request's prompt and its prefix blocks alike (the hits
    // stay whole blocks), gen_scale its output, as they scale an agent's turns.
    auto scaled = [](int64_t n, double f) {
      return std::max<int64_t>(1, static_cast<int64_t>(std::llround(static_cast<double>(n) * f)));
    };
    p.turns.push_back({0, scaled(r.input_tokens, cfg.append_scale),
                       scaled(std::max<int64_t>(1, r.output_tokens), cfg.gen_scale)});
    p.prefix_blocks = std::move(r.block_ids);
    p.prefix_block_tokens = scaled(trace.block_tokens, cfg.append_scale);
    plans.push_back(std::move(p));
  }
  return plans;
}

}  // namespace

Result<std::vector<AgentPlan>> build_agents(const SimConfig& cfg) {
  if (is_timestamped_trace(cfg.dataset)) return build_trace_agents(cfg, nullptr);
  DP_ASSIGN_OR_RETURN(workload::Dataset ds, workload::load_dataset(cfg.dataset, cfg.seed));
  if (cfg.append_scale != 1.0 || cfg.gen_scale != 1.0) {
    DP_ASSIGN_OR_RETURN(ds, workload::scale(ds, cfg.append_scale, cfg.gen_scale));
  }
  workload::ReplayOptions opt;
  opt.synthetic_first_round_tokens = cfg.first_round_tokens;
  opt.honour_think_time = cfg.think_time;
  std::vector<workload::Agent> agents;
  if (cfg.online.enabled()) {
    // Arrivals until the cap; the run usually stops earlier, by the stop rule.
    DP_ASSIGN_OR_RETURN(agents, workload::make_online_agents(ds, cfg.online.aps,
                                                             cfg.online.duration_s, cfg.seed, opt));
    if (agents.empty()) {
      return Status::invalid_argument(fmt::format(
          "online.aps = {} with online.duration_s = {} gives no arrival; raise either",
          cfg.online.aps, cfg.online.duration_s));
    }
  } else {
    DP_ASSIGN_OR_RETURN(agents, workload::make_offline_agents(ds, cfg.agents, cfg.seed, opt));
  }
  std::vector<AgentPlan> plans;
  plans.reserve(agents.size());
  // An agent's shape depends only on its trajectory (the options are the same for all): each
  // trajectory's is computed once (49,152 agents over 500 trajectories at 48P96D).
  std::vector<std::vector<workload::TurnShape>> shapes(ds.trajectories.size());
  for (const auto& ag : agents) {
    AgentPlan p;
    p.start_s = ag.start_time_s;
    auto& shape = shapes[static_cast<size_t>(ag.trajectory)];
    if (shape.empty()) shape = workload::agent_shape(ds, ag);
    p.turns = shape;
    if (cfg.think_time) {
      int n = workload::agent_turn_count(ds, ag);
      for (int i = 0; i < n; ++i) {
        p.think_s.push_back(workload::agent_turn(ds, ag, i).think_time_s * cfg.think_time_scale);
      }
    }
    plans.push_back(std::move(p));
  }
  return plans;
}

Result<SimResult> run_experiment(const SimConfig& cfg, const SimOptions& options) {
  DP_RETURN_IF_ERROR(cfg.validate());
  if (is_timestamped_trace(cfg.dataset)) {
    double static_hit = 0;
    DP_ASSIGN_OR_RETURN(auto plans, build_trace_agents(cfg, &static_hit));
    DP_ASSIGN_OR_RETURN(SimResult res, simulate(cfg, plans, options));
    res.trace_static_hit_ratio = static_hit;
    const double span = plans.back().start_s - plans.front().start_s;
    res.aps = span > 0 ? static_cast<double>(plans.size()) / span : 0;
    return res;
  }
  DP_ASSIGN_OR_RETURN(auto plans, build_agents(cfg));
  return simulate(cfg, plans, options);
}

nlohmann::json latency_json(const LatencyStats& s) {
  return {{"mean", s.mean}, {"p50", s.p50}, {"p90", s.p90},
          {"p99", s.p99},   {"max", s.max}, {"count", s.count}};
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
      // The breakdown as earlier versions reported it (schedule: until the PE and DE were
      // assigned; read: from then to the read's end, buffer wait included).
      {"ttft_breakdown_mean_s",
       {{"schedule", r.ttft_breakdown.scheduler_queue + r.ttft_breakdown.hbm_wait},
        {"read", r.ttft_breakdown.buffer_wait + r.ttft_breakdown.read_queue + r.ttft_breakdown.read},
        {"read_buffer_wait", r.ttft_breakdown.buffer_wait},
        {"prefill", r.ttft_breakdown.engine_queue + r.ttft_breakdown.prefill}}},
      {"ttft_s", latency_json(r.ttft)},
      {"ttst_s", latency_json(r.ttst)},
      {"tpot_s", latency_json(r.tpot)},
      {"ttft_p99_over_p50", r.ttft.p50 > 0 ? r.ttft.p99 / r.ttft.p50 : 0.0},
      {"ttft_breakdown_s",
       {{"schedule", r.ttft_breakdown.schedule},
        {"allocate", r.ttft_breakdown.allocate},
        {"read", r.ttft_breakdown.read},
        {"prefill", r.ttft_breakdown.prefill},
        {"scheduler_queue", r.ttft_breakdown.scheduler_queue},
        {"read_queue", r.ttft_breakdown.read_queue},
        {"engine_queue", r.ttft_breakdown.engine_queue},
        {"hbm_wait", r.ttft_breakdown.hbm_wait},
        {"buffer_wait", r.ttft_breakdown.buffer_wait}}},
      {"ttft_tail_breakdown_s",
       {{"schedule", r.ttft_tail_breakdown.schedule},
        {"allocate", r.ttft_tail_breakdown.allocate},
        {"read", r.ttft_tail_breakdown.read},
        {"prefill", r.ttft_tail_breakdown.prefill},
        {"scheduler_queue", r.ttft_tail_breakdown.scheduler_queue},
        {"read_queue", r.ttft_tail_breakdown.read_queue},
        {"engine_queue", r.ttft_tail_breakdown.engine_queue},
        {"hbm_wait", r.ttft_tail_breakdown.hbm_wait},
        {"buffer_wait", r.ttft_tail_breakdown.buffer_wait}}},
      {"online", r.online},
      {"aps", r.aps},
      {"slo_met", r.slo_met},
      {"slo", {{"ttft_s", r.slo_ttft_s}, {"tpot_s", r.slo_tpot_s}, {"statistic", r.slo_statistic}}},
      {"stop_reason", r.stop_reason},
      {"report_window_s", {r.report_from_s, r.report_to_s}},
      {"agents_arrived", r.agents_arrived},
      {"agents_finished", r.agents_finished},
      {"working_set_bytes", r.working_set_bytes},
      {"working_set_formula_bytes", r.working_set_formula_bytes},
      {"running_agents_mean", r.running_agents_mean},
      {"agent_time_mean_s", r.agent_time_mean_s},
      {"finished_agent_time_mean_s", r.finished_agent_time_mean_s},
      {"agent_length_mean_tokens", r.agent_length_mean_tokens},
      {"hit_ratio", r.hit_ratio},
      {"ttft_hit_s", latency_json(r.ttft_hit)},
      {"ttft_first_s", latency_json(r.ttft_first)},
      {"slo_turns", r.slo_turns},
      {"hit_source_tokens",
       {{"de_dram", r.hit_source_tokens.de_dram},
        {"pe_storage", r.hit_source_tokens.pe_storage},
        {"de_storage", r.hit_source_tokens.de_storage},
        {"recompute", r.hit_source_tokens.recompute}}},
      {"recompute_turns", r.recompute_turns},
      {"store_evicted_bytes", r.store.evicted_bytes},
      {"store",
       {{"bounded", r.store.bounded},
        {"capacity_bytes", r.store.capacity_bytes},
        {"evict", r.store.evict},
        {"evicted_bytes", r.store.evicted_bytes},
        {"evicted_sessions", r.store.evicted_sessions},
        {"evicted_running_sessions", r.store.evicted_running_sessions},
        {"peak_bytes", r.store.peak_bytes},
        {"rejected_sessions", r.store.rejected_sessions}}},
      {"dram_tier",
       {{"enabled", r.dram_tier.enabled},
        {"bytes_per_node", r.dram_tier.bytes_per_node},
        {"ttl_s", r.dram_tier.ttl_s},
        {"peak_bytes", r.dram_tier.peak_bytes},
        {"mean_bytes", r.dram_tier.mean_bytes},
        {"hits", r.dram_tier.hits},
        {"misplaced", r.dram_tier.misplaced},
        {"expired", r.dram_tier.expired},
        {"evicted", r.dram_tier.evicted},
        {"stored", r.dram_tier.stored},
        {"prefetch", r.dram_tier.prefetch},
        {"prefetches", r.dram_tier.prefetches},
        {"prefetch_skipped", r.dram_tier.prefetch_skipped},
        {"prefetch_used_bytes", r.dram_tier.prefetch_used_bytes}}},
      {"prefetch_bytes", r.prefetch_bytes},
      {"prefetch_wasted_bytes", r.prefetch_wasted_bytes},
      {"stored_blocks", r.stored_blocks},
      {"trace_static_hit_ratio", r.trace_static_hit_ratio},
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
      {"split_requests", r.split_path_turns},
      {"split_read_bytes", {{"pe", r.split_read_bytes_pe}, {"de", r.split_read_bytes_de}}},
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
  if (r.adaptive_pd) {
    auto changes = [](const std::vector<RoleChange>& v) {
      nlohmann::json a = nlohmann::json::array();
      for (const RoleChange& c : v) {
        a.push_back({{"t_s", c.t_s},
                     {"time", c.t_s},  // the name for it; t_s as every other time here
                     {"node", c.node},
                     {"from", c.from},
                     {"to", c.to},
                     {"drain_s", c.drain_s},
                     {"switch_s", c.switch_s},
                     {"ep_gpus_from", c.ep_gpus_from},
                     {"ep_gpus_to", c.ep_gpus_to}});
      }
      return a;
    };
    j["adaptive_pd"] = true;
    j["role_changes"] = changes(r.role_changes);
    j["ep_regroups"] = changes(r.ep_regroups);
    nlohmann::json pd = nlohmann::json::array();
    for (const PdPoint& p : r.pd_over_time) {
      pd.push_back({{"t_s", p.t_s},
                    {"prefill_nodes", p.prefill_nodes},
                    {"decode_nodes", p.decode_nodes},
                    {"switching_nodes", p.switching_nodes}});
    }
    j["pd_over_time"] = pd;
  }
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
    s += fmt::format("  {:<30} {}\n", k, v);
  };
  auto lat = [](const LatencyStats& l, double unit, const char* u) {
    return fmt::format("{:.3f} / {:.3f} / {:.3f} / {:.3f} {} (n={})", l.mean * unit, l.p50 * unit,
                       l.p90 * unit, l.p99 * unit, u, l.count);
  };
  if (r.online) {
    s += fmt::format("dualpath sim: {} {} {} dataset={} online at {:.4g} {}/s\n", r.model, r.pd,
                     r.mode, r.dataset, r.aps, r.trace_static_hit_ratio >= 0 ? "requests" : "agents");
    row("stopped", fmt::format("{} at {:.0f} s simulated; {} arrived, {} finished", r.stop_reason,
                               r.jct_s, r.agents_arrived, r.agents_finished));
    row("reported window", fmt::format("{:.0f} .. {:.0f} s", r.report_from_s, r.report_to_s));
    row("SLO", fmt::format("{} ({} TTFT <= {:.3g} s and TPOT <= {:.3g} ms)",
                           r.slo_met ? "met" : "NOT met", r.slo_statistic, r.slo_ttft_s,
                           r.slo_tpot_s * 1e3));
  } else {
    s += fmt::format("dualpath sim: {} {} {} dataset={} agents={}\n", r.model, r.pd, r.mode,
                     r.dataset, r.agents);
    row("JCT", fmt::format("{:.1f} s", r.jct_s));
  }
  row("turns", fmt::format("{} ({:.1f} turns/s)", r.turns, r.jct_s > 0 ? r.turns / r.jct_s : 0));
  row("prompt throughput", fmt::format("{:.0f} tokens/s", r.prompt_tokens_per_s));
  row("TTFT mean/p50/p90/p99", lat(r.ttft, 1, "s"));
  row("TTFT p99 / p50", fmt::format("{:.2f}", r.ttft.p50 > 0 ? r.ttft.p99 / r.ttft.p50 : 0.0));
  const bool beyond = r.dram_tier.enabled || r.recompute_turns > 0;
  if (r.slo_turns == "hit" || beyond) {
    row("  turns with a hit", lat(r.ttft_hit, 1, "s") + (r.slo_turns == "hit" ? " (the SLO's)" : ""));
    row("  first turns (no hit)", lat(r.ttft_first, 1, "s"));
  }
  const TtftBreakdown& b = r.ttft_breakdown;
  const double tot = b.total() > 0 ? b.total() : 1;
  row("TTFT = sch + alloc + read + pf",
      fmt::format("{:.3f} + {:.3f} + {:.3f} + {:.3f} s ({:.0f} / {:.0f} / {:.0f} / {:.0f} %)",
                  b.schedule, b.allocate, b.read, b.prefill, 100 * b.schedule / tot,
                  100 * b.allocate / tot, 100 * b.read / tot, 100 * b.prefill / tot));
  row("  schedule", fmt::format("{:.3f} s scheduler + {:.3f} s storage read queue + {:.3f} s PE "
                                "queue",
                                b.scheduler_queue, b.read_queue, b.engine_queue));
  row("  allocate", fmt::format("{:.3f} s DE HBM + {:.3f} s DRAM buffer", b.hbm_wait,
                                b.buffer_wait));
  const TtftBreakdown& t = r.ttft_tail_breakdown;
  row("TTFT tail (>= p99) =", fmt::format("{:.3f} + {:.3f} + {:.3f} + {:.3f} s (of which PE queue "
                                          "{:.3f} s)",
                                          t.schedule, t.allocate, t.read, t.prefill,
                                          t.engine_queue));
  row("TTST mean/p50/p90/p99", lat(r.ttst, 1, "s"));
  row("TPOT mean/p50/p90/p99", lat(r.tpot, 1e3, "ms"));
  if (r.online && r.trace_static_hit_ratio < 0) {
    row("working set", fmt::format("{:.1f} GB measured; formula aps*T*len/2 = {:.1f} GB (T {:.0f} s, "
                                   "len {:.0f} tokens; {:.1f} agents running)",
                                   r.working_set_bytes / 1e9, r.working_set_formula_bytes / 1e9,
                                   r.agent_time_mean_s, r.agent_length_mean_tokens,
                                   r.running_agents_mean));
  }
  if (r.trace_static_hit_ratio >= 0) {
    row("hit ratio", fmt::format("{:.1f} % of prompt tokens replayed ({:.1f} % in the trace's own "
                                 "count: any earlier request's blocks, stored or not); {} blocks "
                                 "stored, {:.1f} GB",
                                 100 * r.hit_ratio, 100 * r.trace_static_hit_ratio,
                                 r.stored_blocks, r.working_set_bytes / 1e9));
  } else {
    row("hit ratio", fmt::format("{:.1f} % of prompt tokens", 100 * r.hit_ratio));
  }
  row("storage read",
      fmt::format("{:.1f} GB (PE side {:.1f}, DE side {:.1f})", r.storage_read_bytes / 1e9,
                  r.hops.storage_read_pe / 1e9, r.hops.storage_read_de / 1e9));
  if (beyond) {
    const HitSources& h = r.hit_source_tokens;
    const double all = std::max(1.0, h.de_dram + h.pe_storage + h.de_storage + h.recompute);
    row("hit from", fmt::format("DE DRAM {:.1f} % / PE storage {:.1f} % / DE storage {:.1f} % / "
                                "recomputed {:.1f} % ({} turns)",
                                100 * h.de_dram / all, 100 * h.pe_storage / all,
                                100 * h.de_storage / all, 100 * h.recompute / all,
                                r.recompute_turns));
  }
  if (r.store.bounded) {
    row("KV store", fmt::format("{:.0f} GB, evict {}: peak {:.0f} GB; {} sessions evicted ({:.0f} "
                                "GB), {} not kept",
                                r.store.capacity_bytes / 1e9, r.store.evict, r.store.peak_bytes / 1e9,
                                r.store.evicted_sessions, r.store.evicted_bytes / 1e9,
                                r.store.rejected_sessions));
  }
  if (r.dram_tier.enabled) {
    const DramTierStats& d = r.dram_tier;
    row("DE DRAM tier",
        fmt::format("{:.0f} GB per node, TTL {:.0f} s: mean {:.0f} GB, peak {:.0f} GB used (all "
                    "nodes); {} turns served, {} placed elsewhere, {} sessions expired, {} evicted",
                    d.bytes_per_node / 1e9, d.ttl_s, d.mean_bytes / 1e9, d.peak_bytes / 1e9,
                    d.hits, d.misplaced, d.expired, d.evicted));
    if (d.prefetch != "never")
      row("  prefetch", fmt::format("{}: {} started, {} without room; {:.1f} GB read, {:.1f} GB "
                                    "of it wasted, {:.1f} GB served a turn",
                                    d.prefetch, d.prefetches, d.prefetch_skipped,
                                    r.prefetch_bytes / 1e9, r.prefetch_wasted_bytes / 1e9,
                                    d.prefetch_used_bytes / 1e9));
  }
  row("read paths", r.split_path_turns > 0
                        ? fmt::format("PE {} turns, DE {} turns, split {} turns ({:.1f} GB by the "
                                      "PE side, {:.1f} GB by the DE side)",
                                      r.pe_path_turns, r.de_path_turns, r.split_path_turns,
                                      r.split_read_bytes_pe / 1e9, r.split_read_bytes_de / 1e9)
                        : fmt::format("PE {} turns, DE {} turns", r.pe_path_turns,
                                      r.de_path_turns));
  row("SNIC read max/avg", fmt::format("{:.3f}", r.snic_read_max_over_avg));
  row("floors (I/O, compute)", fmt::format("{:.1f} s, {:.1f} s", r.io_floor_s, r.compute_floor_s));
  const double chain_share = r.jct_s > 0 ? r.chain_floor_s / r.jct_s : 0;
  row("longest agent alone",
      r.online ? fmt::format("{:.1f} s (the longest agent's turns back to back)", r.chain_floor_s)
               : fmt::format("{:.1f} s ({:.0f} % of the JCT{})", r.chain_floor_s,
                             100 * chain_share,
                             chain_share >= 0.5 ? "; the job waits on its slowest agent, so more "
                                                  "agents would add little time"
                                                : ""));
  row("PE busy", fmt::format("{:.0f} %, {} passes of {:.0f} new tokens per EP group",
                             100 * r.pe_busy_fraction, r.prefill_passes, r.new_tokens_per_pass));
  row("PE batch per GPU",
      fmt::format("{:.1f} of {:.1f} ready requests; {:.0f} % cut by the quota",
                  r.batched_requests_per_engine_pass, r.ready_requests_per_engine_pass,
                  100 * r.quota_bound_fraction));
  if (r.adaptive_pd) {
    std::string pd;
    for (const PdPoint& p : r.pd_over_time) {
      pd += fmt::format("{}{:.0f}s {}P{}D{}", pd.empty() ? "" : ", ", p.t_s, p.prefill_nodes,
                        p.decode_nodes,
                        p.switching_nodes > 0 ? fmt::format("+{} switching", p.switching_nodes)
                                              : "");
    }
    row("adaptive P/D", fmt::format("{} role changes, {} EP regroups", r.role_changes.size(),
                                    r.ep_regroups.size()));
    row("  split over time", pd);
  }
  row("simulated events", fmt::format("{} in {:.2f} s wall", r.sim_events, r.wall_s));
  return s;
}

}  // namespace dualpath::sim
