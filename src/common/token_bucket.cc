#include "common/token_bucket.h"

#include <algorithm>

namespace dualpath {

TokenBucket::TokenBucket(double rate_bytes_per_s, int64_t burst_bytes)
    : rate_bytes_per_s_(rate_bytes_per_s > 0 ? rate_bytes_per_s : 0.0),
      burst_(rate_bytes_per_s > 0
                 ? from_seconds(static_cast<double>(burst_bytes) / rate_bytes_per_s)
                 : Duration{0}) {}

Duration TokenBucket::cost(int64_t bytes) const {
  return from_seconds(static_cast<double>(bytes) / rate_bytes_per_s_);
}

Duration TokenBucket::reserve(int64_t bytes, Duration now) {
  if (unlimited()) return now;
  const Duration c = cost(bytes);
  MutexLock lock(mu_);
  // A request may start once the bucket's lead over real time is at most the burst less the
  // request's own size.
  const Duration tat = std::max(theoretical_arrival_, now);
  const Duration start = std::max(now, tat - std::max(Duration{0}, burst_ - c));
  theoretical_arrival_ = tat + c;
  return start;
}

Duration TokenBucket::ready_at(Duration now) {
  if (unlimited()) return now;
  MutexLock lock(mu_);
  // Not in debt while the lead is under the burst; one nanosecond past the point where it is.
  if (theoretical_arrival_ - now < burst_) return now;
  return theoretical_arrival_ - burst_ + Duration(1);
}

void TokenBucket::consume(int64_t bytes, Duration now) {
  if (unlimited()) return;
  const Duration c = cost(bytes);
  MutexLock lock(mu_);
  theoretical_arrival_ = std::max(theoretical_arrival_, now) + c;
}

}  // namespace dualpath
