#include "sim/plan.h"

#include <fmt/format.h>

namespace dualpath::sim {

Result<PlanRecommendation> recommend_pd(const SimConfig& base, int total_nodes, double pd_min,
                                        double pd_max,
                                        const std::function<void(const PlanCandidate&)>& on_candidate) {
  if (total_nodes < 2)
    return Status::invalid_argument(fmt::format(
        "--nodes {} is too few: a P/D split needs at least 2 nodes (one of each)", total_nodes));
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
    DP_ASSIGN_OR_RETURN(c.result, simulate(cfg, agents));
    if (on_candidate) on_candidate(c);
    rec.candidates.push_back(std::move(c));
    const auto& last = rec.candidates.back();
    if (rec.best < 0 || last.result.jct_s < rec.candidates[static_cast<size_t>(rec.best)].result.jct_s)
      rec.best = static_cast<int>(rec.candidates.size() - 1);
  }
  return rec;
}

}  // namespace dualpath::sim
