#pragma once
// CancelRegistry: which requests a node must stop working on. The scheduler sends "cancel" for a
// request whose client went away or whose turn failed elsewhere; the engines check between
// layers (prefill) and between steps (decode) and stop with kAborted, releasing their buffers
// and HBM slots as they unwind. A cancel that arrives before its request starts (the calls cross
// on the wire) is remembered for `remember_for`, so the request stops as soon as it begins.
//
// Thread-safe.

#include <chrono>
#include <cstdint>
#include <map>
#include <set>

#include "common/clock.h"
#include "common/mutex.h"
#include "dualpath/units.h"

namespace dualpath::engine {

class CancelRegistry {
 public:
  explicit CancelRegistry(Duration remember_for = std::chrono::minutes(2),
                          const Clock& clock = real_clock())
      : remember_for_(remember_for), clock_(clock) {}

  // The request starts (prepare, prefill or decode); cancelled() answers for it until end().
  void begin(uint64_t request_id);
  void end(uint64_t request_id);
  void cancel(uint64_t request_id);
  // Ends a running request's decode early (ignored for a request that is not running).
  void stop(uint64_t request_id);
  bool stop_requested(uint64_t request_id) const;
  // Every running request (the scheduler connection was lost: nobody waits for their answers),
  // a prepare waiting for buffer space included.
  void cancel_all();
  bool cancelled(uint64_t request_id) const;
  // Requests between begin() and end().
  size_t running() const;

 private:
  void prune(Duration now) DP_REQUIRES(mu_);

  const Duration remember_for_;
  const Clock& clock_;
  mutable Mutex mu_;
  std::map<uint64_t, bool> running_ DP_GUARDED_BY(mu_);     // id -> cancelled
  std::map<uint64_t, Duration> early_ DP_GUARDED_BY(mu_);   // cancels before begin(), and when
  std::set<uint64_t> stops_ DP_GUARDED_BY(mu_);             // running requests to end early
};

}  // namespace dualpath::engine
