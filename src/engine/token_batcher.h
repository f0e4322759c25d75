#pragma once
// TokenBatcher: when a running decode's tokens go to the scheduler. The first two go at once
// (TTFT and TTST are measured on them); then in batches of kBatch, or after kInterval, whichever
// comes first: each message costs a socket write, and each token's latency should stay near one
// decode step. The decode engine and `bench control`'s fake decode nodes stream by this one rule.
//
// Thread-compatible: one per decode.

#include <chrono>
#include <cstddef>

#include "common/clock.h"

namespace dualpath::engine {

class TokenBatcher {
 public:
  static constexpr size_t kBatch = 8;
  static constexpr Duration kInterval = std::chrono::milliseconds(20);

  explicit TokenBatcher(const Clock& clock) : clock_(clock), last_sent_(clock.now()) {}

  // Whether the tokens [sent(), produced) go now; `force`: they are the decode's last.
  bool due(size_t produced, bool force) const {
    if (produced <= sent_) return false;
    return force || sent_ < 2 || produced - sent_ >= kBatch ||
           clock_.now() - last_sent_ >= kInterval;
  }
  // The tokens up to `produced` went.
  void mark_sent(size_t produced) {
    sent_ = produced;
    last_sent_ = clock_.now();
  }
  size_t sent() const { return sent_; }

 private:
  const Clock& clock_;
  Duration last_sent_;
  size_t sent_ = 0;
};

}  // namespace dualpath::engine
