#pragma once
// The Table-2 generator: synthetic agentic-coding datasets "32k", "48k", "64k" whose statistics
// (dataset_stats.h definitions) match PAPER.md §9 Table 2 within 5 %, every trajectory within
// MaxLen. The output is a pure function of (name, seed, trajectories): the module's own PRNG and
// inverse-CDF samplers, and a deterministic calibration loop that fits five named parameters to
// the five Table-2 columns on the very random draws used for the output (common random numbers).
// docs/workload.md describes the distributions and the fitted values.

#include <cstdint>
#include <span>
#include <string_view>

#include "dualpath/result.h"
#include "workload/dataset_stats.h"
#include "workload/trajectory.h"

namespace dualpath::workload {

// One row of PAPER.md Table 2 (paper means) and its MaxLen.
struct Table2Target {
  std::string_view name;  // "32k", "48k", "64k"
  int64_t max_len_tokens = 0;
  double turns = 0, append = 0, gen = 0, total = 0, context = 0;
};

std::span<const Table2Target> table2_targets();
// nullptr for an unknown name.
const Table2Target* find_table2_target(std::string_view name);

// The generative model of one trajectory (all lognormal; sigma = sd of the log):
//   n      = desired turn count ~ LN(median turns_median, sigma kTurnsSigma), >= 1
//   d      = the trajectory's per-turn growth (append + gen) ~ LN(step_median_tokens, step_sigma)
//   A_1    = first append (system prompt + task) ~ LN(first_append_median_tokens, kFirstSigma)
//   g_i    = d * gen_share * LN-noise(mean 1, kGenNoiseSigma), >= 1
//   A_i    = d * (1 - gen_share) * LN-noise(mean 1, kAppendNoiseSigma), >= 1, i >= 2
// Turns are emitted until n is reached or the next turn would pass MaxLen (that turn and the
// rest are dropped), so long-running trajectories end near MaxLen as in the paper's datasets.
struct Table2Params {
  double turns_median = 0;
  double step_median_tokens = 0;
  double step_sigma = 0;
  double first_append_median_tokens = 0;
  double gen_share = 0;
};
inline constexpr double kTurnsSigma = 1.0;
inline constexpr double kFirstSigma = 0.4;
inline constexpr double kGenNoiseSigma = 0.5;
inline constexpr double kAppendNoiseSigma = 0.8;

// The dataset for explicit parameters (no calibration).
Dataset generate_with_params(const Table2Target& target,
                             const Table2Params& params,
                             uint64_t seed,
                             int trajectories);

struct Table2Fit {
  Table2Params params;
  DatasetStats stats;        // of the dataset generate_with_params(params) gives
  double max_rel_error = 0;  // max over the five columns of |measured / target - 1|
  int iterations = 0;
};

// Fits Table2Params to `target` (damped Newton on the log-residuals, finite-difference Jacobian).
Table2Fit calibrate_table2(const Table2Target& target, uint64_t seed, int trajectories);

// name: "32k" | "48k" | "64k" (case-insensitive). Errors: an unknown name; trajectories < 1; a fit
// that misses Table 2 by more than 5 % (names the column; try another seed or more trajectories).
Result<Dataset> generate_table2(std::string_view name, uint64_t seed, int trajectories = 500);

}  // namespace dualpath::workload
