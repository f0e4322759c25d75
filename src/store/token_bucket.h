#pragma once
// TokenBucket: the storage-NIC rate limiter (DESIGN.md "storage / compute NIC speeds"). Every
// byte a node moves to or from storage reserves its time here first, so a node's reads and
// writes together never exceed the emulated SNIC speed.
//
// It is a reservation (GCRA) bucket: reserve(bytes) never blocks; it answers when the transfer
// may start, and callers hold the transfer back until then. Reservations are granted in call
// order, so a large block cannot be starved by small ones, and a transfer larger than the burst
// is allowed (it just starts later). Thread-safe.

#include <cstdint>
#include <mutex>

#include "common/clock.h"
#include "dualpath/units.h"

namespace dualpath::store {

class TokenBucket {
 public:
  // rate_gbps <= 0 means unlimited (the default: the hardware is the limit). burst_bytes is how
  // much may go at once after an idle period. `clock` must outlive the bucket.
  TokenBucket(double rate_gbps, int64_t burst_bytes, Clock& clock);

  bool unlimited() const { return rate_bytes_per_s_ <= 0; }
  double rate_gbps() const { return bytes_per_s_to_gbps(rate_bytes_per_s_); }

  // Reserves `bytes` and returns the clock time at which the transfer may start (<= now() when
  // it may start at once).
  Duration reserve(int64_t bytes);

  Clock& clock() const { return clock_; }

 private:
  const double rate_bytes_per_s_;
  const Duration burst_;  // burst_bytes at the rate, as time credit
  Clock& clock_;
  std::mutex mu_;
  Duration theoretical_arrival_{0};  // guarded by mu_: when the bucket is next empty
};

}  // namespace dualpath::store
