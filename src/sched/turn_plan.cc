#include "sched/turn_plan.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "sched/pe_scheduler.h"

namespace dualpath::sched {

int64_t plan_hit_tokens(int64_t cached_tokens, int64_t prompt_tokens, int64_t block_tokens) {
  if (block_tokens < 1 || prompt_tokens < 1) return 0;
  const int64_t cached = std::clamp<int64_t>(cached_tokens, 0, prompt_tokens);
  const int64_t whole = cached / block_tokens * block_tokens;
  const int64_t most = (prompt_tokens - 1) / block_tokens * block_tokens;
  return std::min(whole, most);
}

SchedRequest make_sched_request(const TurnInputs& t,
                                const TurnCosts& c,
                                const model::CostModel* cost) {
  SchedRequest r;
  r.id = t.id;
  r.prompt_tokens = t.prompt_tokens;
  r.gen_tokens = t.gen_tokens;
  r.hit_tokens = t.path == ReadPath::kRecompute
                     ? 0
                     : plan_hit_tokens(t.cached_tokens, t.prompt_tokens, c.block_tokens);
  // The DE buffer and its HBM copy hold whole blocks of prompt + generation.
  const int64_t bt = std::max<int64_t>(1, c.block_tokens);
  const int64_t blocks = (t.prompt_tokens + t.gen_tokens + bt - 1) / bt;
  const double need = static_cast<double>(blocks * bt) * c.kv_bytes_per_token;
  // A request larger than a whole DE engine's KV budget takes the whole engine (it still runs).
  r.hbm_need_bytes = c.de_hbm_budget_bytes > 0 ? std::min(need, c.de_hbm_budget_bytes) : need;
  r.path = t.path;
  r.pe_work_s = cost != nullptr ? prefill_work_s(*cost, r.hit_tokens, r.prompt_tokens - r.hit_tokens)
                                : t.pe_work_s;
  if (cost != nullptr && r.hit_tokens > 0)
    r.recompute_extra_s = prefill_work_s(*cost, 0, r.prompt_tokens) - r.pe_work_s;
  if (t.dram_node >= 0 && t.dram_tokens > 0 && r.hit_tokens > 0) {
    r.dram_node = t.dram_node;
    r.dram_tokens = std::min(t.dram_tokens, r.hit_tokens);
  }
  return r;
}

TurnPlan plan_turn(const SchedRequest& r, const Placement& p) {
  TurnPlan plan;
  plan.request_id = p.request_id;
  plan.pe = p.pe;
  plan.de = p.de;
  plan.path = p.path;
  plan.prompt_tokens = r.prompt_tokens;
  plan.gen_tokens = r.gen_tokens;
  plan.hbm_need_bytes = r.hbm_need_bytes;
  plan.no_io = p.path == ReadPath::kOracle;
  plan.hit_tokens = p.path == ReadPath::kRecompute ? 0 : r.hit_tokens;
  // The DE's DRAM holds the leading part, then the PE side reads, then the DE side
  // (ClusterScheduler::complete).
  const int64_t d = p.dram_tokens;
  if (d > 0) plan.de_dram = {0, d};
  plan.pe_read = {d, d + p.pe_read_tokens};
  if (plan.pe_read.empty()) plan.pe_read = {};
  plan.de_read = {d + p.pe_read_tokens, d + p.pe_read_tokens + p.de_read_tokens};
  if (plan.de_read.empty()) plan.de_read = {};
  plan.de_pushes_layers = !plan.de_read.empty() || d > 0;
  return plan;
}

std::string to_string(const TurnPlan& p) {
  return fmt::format(
      "request {} pe {} de {} path {} prompt {} gen {} hit {} pe_read [{}, {}) de_read [{}, {}) "
      "push {} no_io {} hbm {}",
      p.request_id, p.pe, p.de, read_path_name(p.path), p.prompt_tokens, p.gen_tokens,
      p.hit_tokens, p.pe_read.begin_tokens, p.pe_read.end_tokens, p.de_read.begin_tokens,
      p.de_read.end_tokens, p.de_pushes_layers, p.no_io, p.hbm_need_bytes) +
         (p.de_dram.empty() ? std::string()
                            : fmt::format(" de_dram [{}, {})", p.de_dram.begin_tokens,
                                          p.de_dram.end_tokens));
}

}  // namespace dualpath::sched
