#include "sim/plan.h"

#include <fmt/format.h>

namespace dualpath::sim {

Result<PlanRecommendation> recommend_pd(const SimConfig& base, int total_nodes, double pd_min,
                                        double pd_max,
                                        const std::function<void(const PlanCandidate&)>& on_candidate,
                                        bool adaptive) {
  if (total_nodes < 2)
    return Status::invalid_argument(fmt::format(
        "--nodes {} is too few: a P/D split needs at least 2 nodes (one of each)", total_nodes));
  if (total_nodes > 1000)
    return Status::invalid_argument(fmt::format(
        "--nodes {} is too many: every split is simulated; use at most 1000 nodes", total_nodes));
  DP_ASSIGN_OR_RETURN(auto agents, build_agents(base));
  PlanRecommendation rec;
  for (int p = 1; p < total_nodes; ++p) {
    SimConfig cfg = base;
    cfg.prefill_nodes = p;
    cfg.decode_nodes = total_nodes - p;
    cfg.fit_ep_groups();
    PlanCandidate c;
    c.prefill_nodes = p;
    c.decode_nodes = total_nodes - p;
    double ratio = static_cast<double>(p) / (total_nodes - p);
    c.in_bottleneck_free_range = ratio >= pd_min - 1e-9 && ratio <= pd_max + 1e-9;
    if (Status s = cfg.validate(); !s.is_ok()) {
      c.infeasible = s.message();
    } else {
      auto r = simulate(cfg, agents);
      if (!r.is_ok()) return r.status().with_context(cfg.pd_label());
      c.result = std::move(*r);
    }
    if (on_candidate) on_candidate(c);
    rec.candidates.push_back(std::move(c));
    const auto& last = rec.candidates.back();
    if (last.infeasible.empty() &&
        (rec.best < 0 ||
         last.result.jct_s < rec.candidates[static_cast<size_t>(rec.best)].result.jct_s))
      rec.best = static_cast<int>(rec.candidates.size() - 1);
  }
  if (rec.best < 0) {
    return Status::invalid_argument(fmt::format(
        "no split of {} nodes can run; 1P{}D: {}", total_nodes, total_nodes - 1,
        rec.candidates.front().infeasible));
  }
  if (!adaptive) return rec;
  for (const PlanCandidate& c : rec.candidates) {
    if (!c.infeasible.empty()) continue;
    SimConfig cfg = base;
    cfg.prefill_nodes = c.prefill_nodes;
    cfg.decode_nodes = c.decode_nodes;
    cfg.adaptive.enabled = true;
    auto r = simulate(cfg, agents);
    if (!r.is_ok()) return r.status().with_context(cfg.pd_label() + " adaptive");
    rec.adaptive.push_back({c.prefill_nodes, c.decode_nodes, std::move(*r)});
    const auto& last = rec.adaptive.back();
    if (rec.best_adaptive < 0 ||
        last.result.jct_s < rec.adaptive[static_cast<size_t>(rec.best_adaptive)].result.jct_s)
      rec.best_adaptive = static_cast<int>(rec.adaptive.size() - 1);
  }
  return rec;
}

}  // namespace dualpath::sim
