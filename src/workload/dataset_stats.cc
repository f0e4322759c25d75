#include "workload/dataset_stats.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "workload/shape.h"

namespace dualpath::workload {

DatasetStats stats(const Dataset& ds) {
  DatasetStats st;
  double sum_append = 0, sum_gen = 0, sum_prompt = 0, sum_context = 0, sum_think = 0;
  double sum_traj_append = 0, sum_traj_gen = 0, sum_total = 0;
  std::vector<int64_t> turns;
  turns.reserve(ds.trajectories.size());
  for (const Trajectory& tr : ds.trajectories) {
    if (tr.turns.empty()) continue;
    ++st.trajectories;
    const auto shapes = shape(tr);
    double t_append = 0, t_gen = 0;
    for (size_t i = 0; i < shapes.size(); ++i) {
      const TurnShape& s = shapes[i];
      // The appended tokens under the replay: prompt minus the reusable context (a trace's
      // keep_tokens can make this differ from the recorded append only if it exceeds the context).
      const double append = static_cast<double>(s.prompt_tokens - s.context_tokens);
      t_append += append;
      t_gen += static_cast<double>(s.gen_tokens);
      sum_prompt += static_cast<double>(s.prompt_tokens);
      sum_context += static_cast<double>(s.context_tokens);
      sum_think += tr.turns[i].think_time_s;
      st.max_prompt_tokens = std::max(st.max_prompt_tokens, s.prompt_tokens);
    }
    const auto n = static_cast<double>(shapes.size());
    st.turns_total += static_cast<int64_t>(shapes.size());
    turns.push_back(static_cast<int64_t>(shapes.size()));
    sum_append += t_append;
    sum_gen += t_gen;
    sum_traj_append += t_append / n;
    sum_traj_gen += t_gen / n;
    const int64_t total = shapes.back().prompt_tokens + shapes.back().gen_tokens;
    sum_total += static_cast<double>(total);
    st.max_total_tokens = std::max(st.max_total_tokens, total);
  }
  if (st.trajectories == 0) return st;
  const auto nt = static_cast<double>(st.trajectories);
  const auto nturns = static_cast<double>(st.turns_total);
  st.turns_mean = nturns / nt;
  st.append_mean = sum_traj_append / nt;
  st.gen_mean = sum_traj_gen / nt;
  st.total_mean = sum_total / nt;
  st.context_mean = sum_context / nturns;
  st.append_per_turn_mean = sum_append / nturns;
  st.gen_per_turn_mean = sum_gen / nturns;
  st.prompt_per_turn_mean = sum_prompt / nturns;
  st.hit_rate = sum_prompt > 0 ? 1.0 - sum_append / sum_prompt : 0.0;
  st.think_time_mean_s = sum_think / nturns;
  std::sort(turns.begin(), turns.end());
  // Nearest-rank percentiles.
  auto rank = [&](double q) {
    const auto k = static_cast<size_t>(std::ceil(q * static_cast<double>(turns.size())));
    return turns[std::clamp<size_t>(k, 1, turns.size()) - 1];
  };
  st.turns_p50 = rank(0.5);
  st.turns_p90 = rank(0.9);
  st.max_turns = turns.back();
  return st;
}

}  // namespace dualpath::workload
