#include "store/token_bucket.h"

#include <algorithm>

namespace dualpath::store {

TokenBucket::TokenBucket(double rate_gbps, int64_t burst_bytes, Clock& clock)
    : rate_bytes_per_s_(rate_gbps > 0 ? gbps_to_bytes_per_s(rate_gbps) : 0.0),
      burst_(rate_gbps > 0 ? from_seconds(static_cast<double>(burst_bytes) / rate_bytes_per_s_)
                           : Duration{0}),
      clock_(clock) {}

Duration TokenBucket::reserve(int64_t bytes) {
  const Duration now = clock_.now();
  if (unlimited()) return now;
  const Duration cost = from_seconds(static_cast<double>(bytes) / rate_bytes_per_s_);
  std::lock_guard lock(mu_);
  // GCRA: the bucket is a virtual clock (theoretical_arrival_) that runs ahead of real time by
  // the bytes granted and not yet drained at the rate. A request may start once the bucket has
  // room for it: once that lead is at most the burst less the request's own size. A request
  // larger than the burst waits for an empty bucket and then goes, leaving a debt.
  const Duration tat = std::max(theoretical_arrival_, now);
  const Duration start = std::max(now, tat - std::max(Duration{0}, burst_ - cost));
  theoretical_arrival_ = tat + cost;
  return start;
}

}  // namespace dualpath::store
