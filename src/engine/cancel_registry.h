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
#include <mutex>
#include <set>

#include "dualpath/units.h"

namespace dualpath::engine {

class CancelRegistry {
 public:
  explicit CancelRegistry(Duration remember_for = std::chrono::minutes(2))
      : remember_for_(remember_for) {}

  // The request starts (prepare or prefill); cancelled() answers for it until end().
  void begin(uint64_t request_id);
  void end(uint64_t request_id);
  void cancel(uint64_t request_id);
  // Ends a running request's decode early (ignored for a request that is not running).
  void stop(uint64_t request_id);
  bool stop_requested(uint64_t request_id) const;
  // Every running request (the scheduler connection was lost: nobody waits for their answers).
  void cancel_all();
  bool cancelled(uint64_t request_id) const;
  // Requests between begin() and end().
  size_t running() const;

 private:
  using Clock = std::chrono::steady_clock;
  void prune(Clock::time_point now);  // requires mu_

  const Duration remember_for_;
  mutable std::mutex mu_;
  std::map<uint64_t, bool> running_;             // guarded by mu_: id -> cancelled
  std::map<uint64_t, Clock::time_point> early_;  // guarded by mu_: cancels before begin()
  std::set<uint64_t> stops_;                     // guarded by mu_: running requests to end early
};

}  // namespace dualpath::engine
