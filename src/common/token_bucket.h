#pragma once
// TokenBucket: a byte-rate limiter (GCRA form: a virtual clock that runs ahead of real time by
// the bytes granted and not yet drained). One implementation for every emulated link: the
// storage NIC of a node (store/storage_nic.h) and an engine's compute NIC (transport's traffic
// manager). Time is passed in, so any Clock (real, dilated, manual) drives it.
// Thread-safe.

#include <cstdint>

#include "common/mutex.h"
#include "dualpath/units.h"

namespace dualpath {

class TokenBucket {
 public:
  // rate_bytes_per_s <= 0: unlimited. burst_bytes is how much may go at once after idling;
  // the bucket starts full.
  TokenBucket(double rate_bytes_per_s, int64_t burst_bytes);

  bool unlimited() const { return rate_bytes_per_s_ <= 0; }
  double rate_bytes_per_s() const { return rate_bytes_per_s_; }

  // Reserves `bytes` for a transfer that starts when the bucket has room for all of it, and
  // returns that time (<= now: at once). A transfer larger than the burst waits for an empty
  // bucket, then goes, leaving a debt that delays the next.
  Duration reserve(int64_t bytes, Duration now);

  // Sender-driven use: a send may start once the bucket is not in debt (ready), is charged
  // afterwards (consume; it may overdraw, a piece is never split for the limiter), and the
  // debt delays the next one, so the average rate holds.
  bool ready(Duration now) { return ready_at(now) <= now; }
  Duration ready_at(Duration now);
  void consume(int64_t bytes, Duration now);

 private:
  Duration cost(int64_t bytes) const;

  const double rate_bytes_per_s_;
  const Duration burst_;  // burst_bytes at the rate, as time credit
  Mutex mu_;
  Duration theoretical_arrival_ DP_GUARDED_BY(mu_){0};  // when the bucket is next empty
};

}  // namespace dualpath
