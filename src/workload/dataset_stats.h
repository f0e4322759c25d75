#pragma once
// DatasetStats: the statistics a dataset is judged by, with the definitions that make PAPER.md
// Table 2's five columns mutually consistent (docs/workload.md "Statistics"). Table 2 is not
// multiplicatively consistent (157 x (429 + 176) ~ 95K > 64K), so Append and Gen are
// per-trajectory means of per-turn means, and Context is turn-weighted.

#include <cstdint>

#include "workload/trajectory.h"

namespace dualpath::workload {

struct DatasetStats {
  int64_t trajectories = 0;
  int64_t turns_total = 0;
  // Table 2's five columns.
  double turns_mean = 0;    // mean turn count per trajectory
  double append_mean = 0;   // mean over trajectories of that trajectory's mean append per turn
  double gen_mean = 0;      // mean over trajectories of that trajectory's mean gen per turn
  double total_mean = 0;    // mean final length (last prompt + last gen) per trajectory
  double context_mean = 0;  // mean over all turns (turn-weighted) of the context before the append
  // Token-weighted views and extremes.
  double append_per_turn_mean = 0;  // sum(append) / turns_total
  double gen_per_turn_mean = 0;     // sum(gen) / turns_total
  double prompt_per_turn_mean = 0;  // sum(prompt) / turns_total
  double hit_rate = 0;              // 1 - sum(append) / sum(prompt): within-trajectory prefix hits
  double think_time_mean_s = 0;     // mean recorded think time per turn
  int64_t max_total_tokens = 0;     // longest final length
  int64_t max_prompt_tokens = 0;    // longest prompt
  // Turn counts per trajectory: an agent's turns run one after another, so the longest chain
  // bounds an offline run's JCT from below (turns x (TTFT + gen x TPOT)).
  int64_t turns_p50 = 0;
  int64_t turns_p90 = 0;
  int64_t max_turns = 0;
};

// Statistics of `ds` under the replay semantics of shape() (keep_tokens honoured).
DatasetStats stats(const Dataset& ds);

}  // namespace dualpath::workload
