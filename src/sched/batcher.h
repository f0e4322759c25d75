#pragma once
// Intra-engine batching with a compute quota (PAPER.md §8.4), for PEs. Pure.

#include <cstdint>
#include <span>
#include <vector>

#include "model/cost_model.h"

namespace dualpath::sched {

struct BatchItem {
  size_t index = 0;         // position in the engine's local FIFO
  int64_t cached_tokens = 0;
  int64_t new_tokens = 0;   // < the request's remaining new tokens when chunked
};

// Walks the local FIFO: a request joins whole while the batch's attention time stays within
// `quota_s`; the first one that does not fit joins with the largest chunk that fits (binary
// search on its new tokens), and the walk ends. The first request always joins (chunked to fit,
// at least one token), so a batch is never empty while work is queued.
std::vector<BatchItem> plan_quota_batch(std::span<const model::PrefillWork> fifo,
                                        const model::CostModel& cost, double quota_s);

// The baseline without a quota: whole requests in FIFO order while their summed KV fits in
// `kv_budget_bytes` (the HBM left for a non-layerwise batch) and at most `max_requests`.
// The first request always joins.
std::vector<BatchItem> plan_capacity_batch(std::span<const model::PrefillWork> fifo,
                                           double kv_bytes_per_token, double kv_budget_bytes,
                                           size_t max_requests);

}  // namespace dualpath::sched
