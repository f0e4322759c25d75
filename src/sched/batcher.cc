#include "sched/batcher.h"

namespace dualpath::sched {

std::vector<BatchItem> plan_quota_batch(std::span<const model::PrefillWork> fifo,
                                        const model::CostModel& cost, double quota_s) {
  std::vector<BatchItem> batch;
  double used = 0;
  for (size_t i = 0; i < fifo.size(); ++i) {
    const model::PrefillWork& w = fifo[i];
    double t = cost.attention_s(w);
    if (used + t <= quota_s) {
      batch.push_back({i, w.cached_tokens, w.new_tokens});
      used += t;
      continue;
    }
    // Largest b' < bsz with T(batch + (cached, b')) <= quota: attention time is monotone in b'.
    int64_t lo = 0, hi = w.new_tokens - 1;
    while (lo < hi) {
      int64_t mid = lo + (hi - lo + 1) / 2;
      if (used + cost.attention_s({w.cached_tokens, mid}) <= quota_s) {
        lo = mid;
      } else {
        hi = mid - 1;
      }
    }
    if (lo == 0 && batch.empty()) lo = 1;  // always make progress
    if (lo >= 1) batch.push_back({i, w.cached_tokens, lo});
    break;
  }
  return batch;
}

std::vector<BatchItem> plan_capacity_batch(std::span<const model::PrefillWork> fifo,
                                           double kv_bytes_per_token, double kv_budget_bytes,
                                           size_t max_requests) {
  std::vector<BatchItem> batch;
  double used = 0;
  for (size_t i = 0; i < fifo.size() && batch.size() < max_requests; ++i) {
    const model::PrefillWork& w = fifo[i];
    double kv = static_cast<double>(w.cached_tokens + w.new_tokens) * kv_bytes_per_token;
    if (!batch.empty() && used + kv > kv_budget_bytes) break;
    batch.push_back({i, w.cached_tokens, w.new_tokens});
    used += kv;
  }
  return batch;
}

}  // namespace dualpath::sched
