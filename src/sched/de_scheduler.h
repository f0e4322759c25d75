#pragma once
// DE scheduling, PAPER.md §8.2: two phases, not globally FIFO. Pure; thread-compatible.

#include <deque>
#include <span>
#include <vector>

#include "sched/scheduler_types.h"

namespace dualpath::sched {

// Phase 1: the DE group (index into `group_tok_sums`, the sum of tok_e over each group's
// engines) that should receive the next request from the global queue: the least loaded.
// Ties go to the lowest index. Returns -1 for no groups.
int pick_de_group(std::span<const int64_t> group_tok_sums);

struct DeParams {
  // Z = z_factor * (sum of len_r over the admitted prefix + sum of tok_e) / |E|. The paper gives
  // 1.05 without a reason; we read it as slack for fragmentation and estimation error.
  double z_factor = 1.05;
};

// Phase 2: one fetch of a DE group. Pops from the front of the group's private `queue` while an
// engine has HBM for the head request; among engines with room, those that stay under Z get the
// request by fewest unfinished requests (seq), else the one with fewest tokens. Updates
// `engines` (tok, seq, free HBM) after each assignment.
std::vector<Assignment> schedule_de(std::deque<RequestInfo>& queue,
                                    std::vector<DeEngineLoad>& engines, const DeParams& params);

}  // namespace dualpath::sched
