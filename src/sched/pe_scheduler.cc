#include "sched/pe_scheduler.h"

#include <fmt/format.h>

#include <algorithm>

namespace dualpath::sched {

std::string_view pe_policy_name(PePolicy p) { return p == PePolicy::kTail ? "tail" : "paper"; }

Result<PePolicy> parse_pe_policy(std::string_view name) {
  if (name == "paper") return PePolicy::kPaper;
  if (name == "tail") return PePolicy::kTail;
  return Status::invalid_argument(fmt::format(
      "scheduler.pe_policy = '{}': use \"paper\" (Algorithm 1: fewest prompt tokens) or \"tail\" "
      "(least prefill work, for TTFT p99)",
      name));
}

PeParams derive_pe_params(const model::CostModel& cost, int64_t mean_cached, int64_t mean_new,
                          double quota_s, int group_gpus, double snic_bytes_per_s,
                          double kv_bytes_per_token, double alpha_s, double beta_s) {
  const int64_t fresh = std::max<int64_t>(1, mean_new);
  const double per_request_attention = cost.attention_s({mean_cached, fresh});
  const int typical_batch =
      std::max(1, static_cast<int>(quota_s / std::max(per_request_attention, 1e-9)));
  const double tokens_per_s =
      cost.prefill_tokens_per_s(mean_cached, fresh, typical_batch, group_gpus);
  PeParams p;
  p.beta_tokens = static_cast<int64_t>(tokens_per_s * beta_s);
  p.alpha_tokens = static_cast<int64_t>(snic_bytes_per_s * alpha_s / kv_bytes_per_token);
  return p;
}

double prefill_work_s(const model::CostModel& cost, int64_t cached, int64_t fresh) {
  return cost.attention_s({cached, fresh}) + cost.linear_s(static_cast<double>(fresh));
}

int pick_pe(std::span<const PeEngineLoad> engines, std::span<const int64_t> read_q_tokens,
            const PeParams& params) {
  int best_short = -1;  // C2: short read queue, not overloaded
  int best_long = -1;   // C3: long read queue, not overloaded
  for (int e = 0; e < static_cast<int>(engines.size()); ++e) {
    const PeEngineLoad& load = engines[static_cast<size_t>(e)];
    if (load.tok > params.beta_tokens) continue;  // C1: overloaded
    auto node = static_cast<size_t>(load.node);
    int64_t rq = node < read_q_tokens.size() ? read_q_tokens[node] : 0;
    int& best = rq <= params.alpha_tokens ? best_short : best_long;
    const PeEngineLoad* b = best < 0 ? nullptr : &engines[static_cast<size_t>(best)];
    const bool lighter = params.policy == PePolicy::kTail ? b == nullptr || load.work < b->work
                                                          : b == nullptr || load.tok < b->tok;
    if (lighter) best = e;
  }
  return best_short >= 0 ? best_short : best_long;
}

std::vector<Assignment> schedule_pe(std::deque<RequestInfo>& queue,
                                    std::vector<PeEngineLoad>& engines,
                                    std::span<const int64_t> read_q_tokens,
                                    const PeParams& params) {
  std::vector<Assignment> assigned;
  while (!queue.empty()) {
    const int pe = pick_pe(engines, read_q_tokens, params);
    if (pe < 0) break;  // every engine overloaded: end the fetch
    RequestInfo r = queue.front();
    queue.pop_front();
    engines[static_cast<size_t>(pe)].tok += r.tokens;
    engines[static_cast<size_t>(pe)].work += r.work;
    engines[static_cast<size_t>(pe)].seq += 1;
    assigned.push_back({r.id, pe});
  }
  return assigned;
}

}  // namespace dualpath::sched
