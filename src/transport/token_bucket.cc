#include "transport/token_bucket.h"

#include <algorithm>

namespace dualpath::transport {

TokenBucket::TokenBucket(double rate_bytes_per_s, uint64_t burst_bytes, Duration now)
    : rate_bytes_per_s_(rate_bytes_per_s),
      burst_bytes_(static_cast<double>(burst_bytes)),
      tokens_(static_cast<double>(burst_bytes)),
      last_(now) {}

void TokenBucket::refill(Duration now) {
  if (now <= last_) return;
  tokens_ = std::min(burst_bytes_, tokens_ + to_seconds(now - last_) * rate_bytes_per_s_);
  last_ = now;
}

bool TokenBucket::ready(Duration now) {
  refill(now);
  return tokens_ > 0;
}

void TokenBucket::consume(uint64_t bytes, Duration now) {
  refill(now);
  tokens_ -= static_cast<double>(bytes);
}

Duration TokenBucket::ready_at(Duration now) {
  refill(now);
  if (tokens_ > 0) return now;
  // One nanosecond past the point where the debt is paid, so that tokens_ > 0 then.
  return now + from_seconds(-tokens_ / rate_bytes_per_s_) + Duration(1);
}

}  // namespace dualpath::transport
