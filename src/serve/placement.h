#pragma once
// Placer: the live service's central scheduler (sched::ClusterScheduler, the simulator's) behind
// one lock, the fetch loop that places queued turns, and Claim, the move-only handle that gives a
// placed turn's counts back to the scheduler exactly once (issue 31: it replaces four
// finishing lambdas).
//
// The engine groups fetch every scheduler.fetch_interval while turns wait (PAPER.md §8's group
// fetch: a batching window under load). While the engines keep up (the last fetch placed every
// queued turn), a turn that arrives is fetched at once: the window batches a loaded cluster's
// arrivals and is not a floor on an idle or lightly loaded one's latency (issue 33; at 150
// turns/s on 44P88D every turn used to wait for the next fetch). The simulator models the fixed
// interval.
//
// Threads: thread-safe; place() blocks its caller (a turn's thread) until placed, its deadline,
// its cancel or shutdown. While the engines keep up, the arriving turn's own thread runs the fetch
// (no handoff to the fetch thread and back: two context switches per turn, measured in
// docs/serve.md); the fetch thread runs the interval's fetches once turns wait, and wakes only
// the waiters it placed.

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "common/clock.h"
#include "common/mutex.h"
#include "dualpath/result.h"
#include "sched/cluster_scheduler.h"

namespace dualpath::serve {

class Placer;

// A placed turn's claim on the scheduler's counts: each side's storage read in the read-queue
// ledger, its prefill in its PE's load, its decode in its DE's load and HBM. Each is given back
// once, by the call that says it is over or by the destructor (a failed attempt). Move-only.
class Claim {
 public:
  Claim() = default;
  Claim(Claim&& other) noexcept { *this = std::move(other); }
  Claim& operator=(Claim&& other) noexcept;
  Claim(const Claim&) = delete;
  Claim& operator=(const Claim&) = delete;
  ~Claim() { finish_all(); }

  const sched::Placement& placement() const { return placement_; }
  const sched::SchedRequest& request() const { return request_; }
  // The PE side's read (over when the PE node says it is in) or the DE side's (over with the
  // prepare).
  void pe_read_finished();
  void de_read_finished();
  void prefill_finished();
  void turn_finished();
  void finish_all();

 private:
  friend class Placer;
  Placer* placer_ = nullptr;
  sched::Placement placement_;
  sched::SchedRequest request_;
  bool pe_read_ = false, de_read_ = false, prefill_ = false, turn_ = false;  // still to give back
};

class Placer {
 public:
  Placer(const sched::ClusterShape& shape,
         const sched::ClusterSchedulerParams& params,
         Duration fetch_interval,
         const Clock& clock = real_clock());
  // Shuts down and joins the fetch thread. Claims must be gone first.
  ~Placer();
  Placer(const Placer&) = delete;
  Placer& operator=(const Placer&) = delete;

  // Places `request`: kAborted when `cancelled()` turns true (looked at every few milliseconds)
  // or at shutdown; kUnavailable naming the live nodes when no engine took it by `deadline` (a
  // time on the clock).
  Result<Claim> place(const sched::SchedRequest& request,
                      Duration deadline,
                      const std::function<bool()>& cancelled);
  void set_node_alive(int node, bool alive);
  void set_reported_read_queue(int node, int64_t tokens);
  // Waiters fail with kAborted; later place() calls too.
  void shutdown();

  // The scheduler's engine numbering (immutable).
  int pe_node_of(int pe) const { return pe_node_[static_cast<size_t>(pe)]; }
  int de_node_of(int de) const { return de_node_[static_cast<size_t>(de)]; }
  int pe_local(int pe) const { return pe % shape_.pe_engines_per_node; }
  int de_local(int de) const { return de % shape_.de_engines_per_node; }
  const sched::ClusterSchedulerParams& params() const { return params_; }

  // Runs `f` on the scheduler under the lock (tests: the recorded decisions).
  void with_scheduler(const std::function<void(sched::ClusterScheduler&)>& f);

 private:
  friend class Claim;
  struct Waiter {
    CondVar cv;  // notified when placed (or at shutdown): a fetch wakes only the turns it placed
    std::optional<sched::Placement> placement;
  };
  void fetch_loop();
  // One group fetch: the placed turns' waiters get their placements and are woken.
  void fetch_locked() DP_REQUIRES(mu_);

  const sched::ClusterShape shape_;
  const sched::ClusterSchedulerParams params_;
  const Duration fetch_interval_;
  const Clock& clock_;
  std::vector<int> pe_node_, de_node_;
  mutable Mutex mu_;
  CondVar cv_;
  std::unique_ptr<sched::ClusterScheduler> sched_ DP_PT_GUARDED_BY(mu_);
  std::map<int64_t, Waiter*> waiters_ DP_GUARDED_BY(mu_);
  bool stopping_ DP_GUARDED_BY(mu_) = false;
  // Whether the last fetch placed every queued turn (then a turn that arrives is fetched at once,
  // on its own thread), and when it ran.
  bool kept_up_ DP_GUARDED_BY(mu_) = true;
  Duration last_fetch_ DP_GUARDED_BY(mu_){};
  std::thread fetch_thread_;
};

}  // namespace dualpath::serve
