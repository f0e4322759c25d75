#pragma once
// PE scheduling, PAPER.md §8.1 Algorithm 1 (arXiv v2). Pure; thread-compatible.

#include <deque>
#include <span>
#include <vector>

#include "model/cost_model.h"
#include "sched/scheduler_types.h"

namespace dualpath::sched {

struct PeParams {
  // alpha: a node's read queue counts as short when it holds at most this many tokens
  // (PAPER.md §8.5: the tokens the node can read in 3 s).
  int64_t alpha_tokens = 0;
  // beta: an engine with more unfinished tokens than this is overloaded and gets nothing
  // (the tokens one GPU processes in 5 s).
  int64_t beta_tokens = 0;
};

// alpha and beta as PAPER.md §8.5 defines them, from the cost model instead of a profile (the
// simulator and the live scheduler derive them alike): alpha = the tokens a node's storage NICs
// read in `alpha_s` (`snic_bytes_per_s`, KV `kv_bytes_per_token`); beta = the prompt tokens one
// GPU of a `group_gpus`-GPU EP group prefills in `beta_s`, for requests of the workload's mean
// shape (`mean_cached`, `mean_new` tokens) batched by the compute quota.
PeParams derive_pe_params(const model::CostModel& cost, int64_t mean_cached, int64_t mean_new,
                          double quota_s, int group_gpus, double snic_bytes_per_s,
                          double kv_bytes_per_token, double alpha_s, double beta_s);

// One fetch of a PE group: pops requests from the front of the global FIFO `queue` while some
// engine of `engines` is not overloaded; engines on nodes with a short read queue come first,
// then the one with the fewest tokens. `read_q_tokens` is indexed by PeEngineLoad::node.
// Updates `engines` (tok, seq) after each assignment, so categories are re-evaluated per request
// (PAPER.md §12 item 4). read_q is not changed here: the path is not chosen yet.
std::vector<Assignment> schedule_pe(std::deque<RequestInfo>& queue,
                                    std::vector<PeEngineLoad>& engines,
                                    std::span<const int64_t> read_q_tokens,
                                    const PeParams& params);

}  // namespace dualpath::sched
