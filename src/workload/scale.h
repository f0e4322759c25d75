#pragma once
// scale(): the Fig. 9 sweep (PAPER.md §10.3): every turn's append and gen multiplied by a factor,
// then each trajectory truncated at MaxLen.

#include "dualpath/result.h"
#include "workload/trajectory.h"

namespace dualpath::workload {

// append' = round(append * append_scale) (the first turn too), gen' = max(1, round(gen *
// gen_scale)). Truncation: the first turn whose prompt + gen would pass ds.max_len_tokens and
// every later turn are dropped (a turn is never cut in half, so its recorded shape stays whole);
// a trajectory whose first turn alone passes MaxLen keeps that turn with its append cut to fit.
// MaxLen 0 (unbounded) truncates nothing. keep_tokens cut points are scaled with the appends.
// Errors: a scale that is not a positive finite number.
Result<Dataset> scale(const Dataset& ds, double append_scale, double gen_scale);

}  // namespace dualpath::workload
