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
  // A request whose hit sits in one node's DRAM (RequestInfo::affinity_node) goes to an engine of
  // that node when one has HBM for it and would hold at most affinity_factor x what the mean
  // engine would with the request (mean tok_e + len_r); otherwise by the rule above, and its hit
  // is read from storage. 1.25: a hot node takes at most a quarter more than an average one.
  // (Measured against the mean before the request, so that an idle cluster keeps the affinity.)
  double affinity_factor = 1.25;
};

// Phase 2: one fetch of a DE group. Pops from the front of the group's private `queue` while an
// engine has HBM for the head request; among engines with room, those that stay under Z get the
// request by fewest unfinished requests (seq), else the one with fewest tokens. Updates
// `engines` (tok, seq, free HBM) after each assignment. `engine_nodes[i]`, where given, is engine
// i's node (for RequestInfo::affinity_node); empty: no request has an affinity.
std::vector<Assignment> schedule_de(std::deque<RequestInfo>& queue,
                                    std::vector<DeEngineLoad>& engines, const DeParams& params,
                                    std::span<const int> engine_nodes = {});

// Phase 1 with an affinity: the group holding the request's DRAM node when its token sum with the
// request stays within `affinity_factor` x (the live groups' mean + the request), else the least
// loaded (pick_de_group). `affinity_group` -1: pick_de_group. Sums >= `dead_sum` are dead groups.
int pick_de_group_with_affinity(std::span<const int64_t> group_tok_sums, int affinity_group,
                                int64_t tokens, double affinity_factor, int64_t dead_sum);

}  // namespace dualpath::sched
