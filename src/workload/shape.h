#pragma once
// shape(): PAPER.md §9 replay semantics for one trajectory (rules in trajectory.h):
//   context_1 = 0; context_i = seen_{i-1}, cut to keep_tokens_i when that is >= 0;
//   prompt_i = context_i + append_i; seen_i = prompt_i + gen_i.

#include <vector>

#include "workload/trajectory.h"

namespace dualpath::workload {

std::vector<TurnShape> shape(const Trajectory& trajectory);

// Final length of a trajectory: last prompt + last gen (0 for an empty trajectory).
int64_t final_length(const Trajectory& trajectory);

}  // namespace dualpath::workload
