#pragma once
// ReportPacer: when a node sends its load report (docs/serve.md, Leases). Every report interval
// the node asks; the report goes when it differs from the last one sent, or when the last one
// sent is a heartbeat old, so that an idle node renews its lease without a message every
// interval. A heartbeat of 0 sends every interval (a scheduler older than the heartbeat field).
// One rule for the node process and `bench control`'s fake nodes. Thread-compatible.

#include "dualpath/units.h"

namespace dualpath::control {

class ReportPacer {
 public:
  explicit ReportPacer(Duration heartbeat) : heartbeat_(heartbeat) {}
  // Whether to send now; `changed`: the report differs from the last one sent.
  bool due(bool changed, Duration now) const {
    return !sent_ || changed || now - sent_at_ >= heartbeat_;
  }
  void sent(Duration now) {
    sent_ = true;
    sent_at_ = now;
  }

 private:
  Duration heartbeat_;
  bool sent_ = false;
  Duration sent_at_{0};
};

}  // namespace dualpath::control
