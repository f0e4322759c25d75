#pragma once
// P/D recommendation: simulate every split of a fixed node count and rank them (PAPER.md §11
// item 2: the authors name a simulator as the tool for choosing P/D).

#include <functional>
#include <string>
#include <vector>

#include "sim/experiment.h"

namespace dualpath::sim {

struct PlanCandidate {
  int prefill_nodes = 0, decode_nodes = 0;
  bool in_bottleneck_free_range = false;
  std::string infeasible;  // why this split cannot run (then `result` is empty), e.g. HBM
  SimResult result;
};

// An adaptive P/D run (AdaptivePdConfig) from one feasible split as its start.
struct AdaptiveCandidate {
  int start_prefill_nodes = 0, start_decode_nodes = 0;
  SimResult result;
};

struct PlanRecommendation {
  std::vector<PlanCandidate> candidates;  // every split, P ascending, infeasible ones included
  int best = -1;                          // index of the lowest JCT among the feasible
  // With `adaptive`: an adaptive run from each feasible split, and the fastest of them. The
  // controller only moves toward prefill when the move pays off (sched/pd_controller.h), so a
  // run that starts prefill-heavy and hands nodes to decode is often the one that wins.
  std::vector<AdaptiveCandidate> adaptive;
  int best_adaptive = -1;
};

// Simulates P = 1 .. total_nodes-1 (D = total - P) with `base` otherwise unchanged. A split the
// configuration cannot run (e.g. too few prefill GPUs to hold the weights) is kept with its
// reason and skipped; an error only when no split can run. `on_candidate` (optional) is called
// after each candidate, for progress.
Result<PlanRecommendation> recommend_pd(const SimConfig& base, int total_nodes, double pd_min,
                                        double pd_max,
                                        const std::function<void(const PlanCandidate&)>& on_candidate = {},
                                        bool adaptive = false);

}  // namespace dualpath::sim
