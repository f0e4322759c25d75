#pragma once
// PE scheduling, PAPER.md §8.1 Algorithm 1 (arXiv v2). Pure; thread-compatible.

#include <deque>
#include <span>
#include <string_view>
#include <vector>

#include "dualpath/result.h"
#include "model/cost_model.h"
#include "sched/scheduler_types.h"

namespace dualpath::sched {

// How Algorithm 1 ranks the engines of a category (C2, C3).
enum class PePolicy {
  // The paper's: the fewest unfinished prompt tokens (tok_e).
  kPaper,
  // Ours, for tail TTFT (PAPER.md §11): the least unfinished prefill work (PeEngineLoad::work).
  // Prompt tokens are a poor measure of time when 99 % of them are cached: a request's prefill
  // time is set by its new tokens and by attention over its context, and two engines with equal
  // tok_e can be a pass apart. The request that lands behind the larger work waits that pass:
  // the p99 of TTFT is made of those waits (docs/simulator.md).
  kTail,
};

// "paper", "tail"; the inverse names the valid ones.
std::string_view pe_policy_name(PePolicy p);
Result<PePolicy> parse_pe_policy(std::string_view name);

struct PeParams {
  PePolicy policy = PePolicy::kPaper;
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

// A request's prefill work for PePolicy::kTail (SchedRequest::pe_work_s), in GPU seconds:
// attention over its whole context plus the linear layers of its `fresh` new tokens, at the best
// batching (no fixed pass cost). The simulator and the live service (modeled compute) both call it.
double prefill_work_s(const model::CostModel& cost, int64_t cached, int64_t fresh);

// Algorithm 1's choice for the next request among `engines` (C2 before C3, then the fewest
// tokens, kTail: the least work; ties to the lowest index), or -1 when every engine is
// overloaded (C1). `read_q_tokens` is indexed by PeEngineLoad::node. The request itself does not
// enter the choice: only the engines' loads do.
int pick_pe(std::span<const PeEngineLoad> engines, std::span<const int64_t> read_q_tokens,
            const PeParams& params);

// One fetch of a PE group: pops requests from the front of the global FIFO `queue` while some
// engine of `engines` is not overloaded; engines on nodes with a short read queue come first,
// then the one with the fewest tokens (kTail: the least work). `read_q_tokens` is indexed by PeEngineLoad::node.
// Updates `engines` (tok, seq) after each assignment, so categories are re-evaluated per request
// (PAPER.md §12 item 4). read_q is not changed here: the path is not chosen yet.
std::vector<Assignment> schedule_pe(std::deque<RequestInfo>& queue,
                                    std::vector<PeEngineLoad>& engines,
                                    std::span<const int64_t> read_q_tokens,
                                    const PeParams& params);

}  // namespace dualpath::sched
