#include "sim/capacity.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>

#include "common/percentiles.h"
#include "sim/experiment.h"

namespace dualpath::sim {
namespace {

CapacityProbe probe_of(const SimResult& r, double wall_s) {
  CapacityProbe p;
  p.aps = r.aps;
  p.slo_met = r.slo_met;
  p.stop_reason = r.stop_reason;
  p.stopped_at_s = r.jct_s;
  p.ttft = r.ttft;
  p.tpot = r.tpot;
  p.wall_s = wall_s;
  return p;
}

}  // namespace

Result<double> estimate_capacity_aps(const SimConfig& cfg) {
  // The mean agent, from an offline replay of the same workload (one agent per trajectory on
  // average; the draw is the seed's).
  SimConfig offline = cfg;
  offline.online = OnlineConfig{};
  offline.agents = 500;
  DP_ASSIGN_OR_RETURN(auto plans, build_agents(offline));
  model::CostModel cost(cfg.model, cfg.hw, cfg.eff);
  double work_s = 0, read_bytes = 0;
  for (const AgentPlan& p : plans) {
    for (const workload::TurnShape& t : p.turns) {
      const int64_t hit =
          std::min(t.context_tokens, t.prompt_tokens) / cfg.block_tokens * cfg.block_tokens;
      work_s += cost.attention_s({hit, t.prompt_tokens - hit}) +
                cost.linear_s(static_cast<double>(t.prompt_tokens - hit));
      read_bytes +=
          static_cast<double>(hit) * static_cast<double>(cfg.model.stored_bytes_per_token());
    }
  }
  const auto n = static_cast<double>(plans.size());
  const double pe_gpus = static_cast<double>(cfg.prefill_nodes) * cfg.hw.gpus_per_node;
  double bound = work_s > 0 ? pe_gpus * n / work_s : std::numeric_limits<double>::infinity();
  if (cfg.scheduler.mode != Mode::kOracle && read_bytes > 0) {
    const double readers =
        reads_on_both_sides(cfg.scheduler.mode) ? cfg.prefill_nodes + cfg.decode_nodes : cfg.prefill_nodes;
    bound =
        std::min(bound, readers * model::usable_snic_bytes_per_s(cfg.hw, cfg.eff) * n / read_bytes);
  }
  if (!std::isfinite(bound) || bound <= 0)
    return Status::invalid_argument("the workload has no prefill work to bound the arrival rate");
  return bound;
}

Result<CapacityResult> find_capacity(const SimConfig& cfg_in, const CapacityOptions& opt) {
  DP_RETURN_IF_ERROR(cfg_in.validate());
  if (is_timestamped_trace(cfg_in.dataset)) {
    return Status::invalid_argument(fmt::format(
        "capacity searches the arrival rate, but '{}' replays at its own timestamps; use dualpath "
        "sim (online.time_scale scales its timestamps), or a dataset of agents (32k, 48k, 64k, "
        "weka:PATH)",
        cfg_in.dataset));
  }
  auto wall0 = std::chrono::steady_clock::now();
  CapacityResult out;
  DP_ASSIGN_OR_RETURN(out.estimate_aps, estimate_capacity_aps(cfg_in));
  // The compute bound ignores each pass's fixed cost (about half the time at the paper's batch
  // sizes) and the SLO's queueing margin: start below it.
  double aps = opt.start_aps > 0 ? opt.start_aps : 0.5 * out.estimate_aps;

  SimResult best;
  double lo = 0, hi = 0;  // lo met the SLO, hi missed it (0: not found yet)
  auto run = [&](double a) -> Result<bool> {
    if (static_cast<int>(out.probes.size()) >= opt.max_probes) {
      return Status::failed_precondition(fmt::format(
          "capacity search stopped after {} probes without converging (bracket {:.4g} .. {:.4g} "
          "APS)",
          out.probes.size(), lo, hi));
    }
    SimConfig c = cfg_in;
    c.online.aps = a;
    auto t0 = std::chrono::steady_clock::now();
    DP_ASSIGN_OR_RETURN(SimResult r, run_experiment(c));
    const double wall =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    out.probes.push_back(probe_of(r, wall));
    if (opt.on_probe) opt.on_probe(out.probes.back());
    if (r.slo_met && a > lo) {
      lo = a;
      best = std::move(r);
    } else if (!r.slo_met && (hi == 0 || a < hi)) {
      hi = a;
    }
    return out.probes.back().slo_met;
  };

  // Bracket.
  DP_ASSIGN_OR_RETURN(bool met, run(aps));
  while (met && hi == 0) {
    aps *= opt.step;
    DP_ASSIGN_OR_RETURN(met, run(aps));
  }
  while (!met && lo == 0) {
    aps /= opt.step;
    if (aps < opt.min_aps) {
      const CapacityProbe& last = out.probes.back();
      return Status::failed_precondition(fmt::format(
          "no arrival rate meets the SLO: even at {:.4g} agents/s the {} TTFT is {:.3g} s and TPOT "
          "{:.3g} ms (SLO {:.3g} s, {:.3g} ms); the cluster cannot serve one agent within it. "
          "Relax online.slo_ttft_s / online.slo_tpot_ms, or give the model more prefill or decode "
          "nodes (cluster.prefill_nodes, cluster.decode_nodes)",
          last.aps, cfg_in.online.slo_statistic, last.ttft.get(cfg_in.online.slo_statistic),
          last.tpot.get(cfg_in.online.slo_statistic) * 1e3, cfg_in.online.slo_ttft_s,
          cfg_in.online.slo_tpot_s * 1e3));
    }
    DP_ASSIGN_OR_RETURN(met, run(aps));
  }
  // Bisect (geometrically: the bracket spans a ratio, and the tolerance is relative).
  while (hi / lo - 1 > opt.tolerance) {
    DP_RETURN_IF_ERROR(run(std::sqrt(lo * hi)).status());
  }
  out.aps_capacity = lo;
  out.aps_first_missed = hi;
  out.at_capacity = std::move(best);
  out.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
  return out;
}

CapacityOverSeeds summarize_seeds(std::vector<SeedCapacity> seeds) {
  CapacityOverSeeds out;
  out.seeds = std::move(seeds);
  if (out.seeds.empty()) return out;
  std::vector<double> caps;
  std::vector<size_t> order(out.seeds.size());
  for (size_t i = 0; i < out.seeds.size(); ++i) {
    caps.push_back(out.seeds[i].result.aps_capacity);
    order[i] = i;
    out.wall_s += out.seeds[i].result.wall_s;
  }
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return caps[a] < caps[b]; });
  out.median_aps = median(caps);
  out.min_aps = caps[order.front()];
  out.max_aps = caps[order.back()];
  out.median_seed = order[(order.size() - 1) / 2];
  return out;
}

}  // namespace dualpath::sim
