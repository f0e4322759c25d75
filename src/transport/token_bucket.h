#pragma once
// TokenBucket: the optional per-engine CNIC rate limiter of the traffic manager (issue 4), for
// emulating a target cluster's NIC speed on a machine whose loopback is faster.
// Time is passed in, so the bucket is deterministic under test. Thread-compatible (the traffic
// manager uses it on its progress thread).

#include <cstdint>

#include "dualpath/units.h"

namespace dualpath::transport {

class TokenBucket {
 public:
  // rate_bytes_per_s > 0; burst_bytes is the most that may be sent at once after an idle spell.
  TokenBucket(double rate_bytes_per_s, uint64_t burst_bytes, Duration now);

  // Whether a send may start now. A send may overdraw the bucket (a piece is never split for
  // the limiter); the debt delays the next one, so the average rate holds.
  bool ready(Duration now);
  void consume(uint64_t bytes, Duration now);
  // When ready() will next be true (now if it already is).
  Duration ready_at(Duration now);
  double rate_bytes_per_s() const { return rate_bytes_per_s_; }

 private:
  void refill(Duration now);

  double rate_bytes_per_s_;
  double burst_bytes_;
  double tokens_;  // may go negative (debt)
  Duration last_;
};

}  // namespace dualpath::transport
