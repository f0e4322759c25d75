#pragma once
// TurnRunner: runs one turn of the live system to its end (issue 31; docs/serve.md "A turn
// through the service"): the scheduler's inputs and the turn plan come from sched/ (the
// simulator's functions), the Placer places it, and the plan is executed on the two nodes'
// Node services: DE prepare, PE prefill, DE decode with its tokens streaming back on the decode
// call itself (so they can only come from the node that holds the request). A failure is
// retried on live nodes; a decode whose node died mid-way is migrated with the tokens it had
// streamed; a hit block that vanished makes the turn recompute.
//
// Liveness: every call has a deadline; a node declared dead fails its calls at that moment
// (control::NodeClient::close) and node_dead() cancels the calls of its turns on their other
// node; a cancelled turn (TurnCancel) cancels its calls at once, which cancels them on the nodes.
// No lock is held across a call.
//
// The DE DRAM tier (issue 35; [cache] de_dram_gb): the runner mirrors each decode node's tier
// (store/dram_tier.h, the node's own policy without the bytes) from the turns it decoded there,
// gives the scheduler the node and length of a turn's resident prefix, and forgets a node's
// tier when it dies. A node that lost a block since reads it from storage (decode_engine.h).
//
// Threads: thread-safe; run_turn() blocks its caller (one thread per concurrent turn: a session
// thread, an HTTP worker); node_dead() from the registry's listener.

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/mutex.h"
#include "compute/sampling.h"
#include "control/node_client.h"
#include "engine/engine_types.h"
#include "model/cost_model.h"
#include "sched/read_path.h"
#include "sched/turn_plan.h"
#include "serve/node_registry.h"
#include "serve/placement.h"
#include "serve/serve_config.h"
#include "serve/turn.h"
#include "serve/turn_planner.h"
#include "store/dram_tier.h"
#include "store/file_store.h"

namespace dualpath::serve {

class TurnRunner {
 public:
  struct Parts {
    const ServeConfig* config = nullptr;
    NodeRegistry* registry = nullptr;
    Placer* placer = nullptr;
    store::FileStore* store = nullptr;  // prefix matches on the shared data paths
    store::BlockLayout layout;
    TurnPlanner planner;
    const Clock* clock = nullptr;
  };
  explicit TurnRunner(Parts parts);

  // Runs one turn to the end (retries and migration included) or to an error.
  Result<TurnResult> run_turn(TurnRequest request);
  // A node died: the calls of its turns on their other node are cancelled (its own calls
  // already fail: its client is closed).
  void node_dead(int node, const Status& why);
  // Turns still running fail with kAborted; new ones too.
  void shutdown();

 private:
  struct Attempt {
    uint64_t id = 0;
    int pe_node = -1, de_node = -1;
    control::CallGroup calls;
    std::atomic<bool> prefilled{false};  // release/acquire: read by node_dead
  };
  Status run_attempt(const TurnRequest& req,
                     Attempt& a,
                     std::vector<int32_t> prompt,
                     int64_t gen,
                     const sched::PathRequest& path,
                     int64_t oracle_hit,
                     int64_t base,
                     Duration turn_start,
                     TurnResult& out,
                     std::vector<int32_t>& streamed,
                     int64_t& hit);

  // The DE DRAM tier (issue 35): the decode node whose tier holds the longest leading part of
  // `keys` (the prompt's whole blocks), and its length in blocks; {-1, 0} when none does.
  std::pair<int, int64_t> resident(std::span<const store::BlockKey> keys) const;

  Parts parts_;
  // Per node (null for prefill nodes, or with the tier off): the scheduler's mirror of each
  // decode node's DRAM tier (store/dram_tier.h, bookkeeping only), fed by the turns it decoded.
  std::vector<std::unique_ptr<store::DramTier>> tiers_;
  store::ModelFingerprint kv_model_;  // the nodes' block key chain (engine::kv_fingerprint)
  std::atomic<uint64_t> next_request_id_{1};  // relaxed: only hands out distinct ids
  Mutex mu_;
  std::map<uint64_t, Attempt*> attempts_ DP_GUARDED_BY(mu_);  // running, by id
  bool stopping_ DP_GUARDED_BY(mu_) = false;
  // A retry waiting for the registry's verdict on a node that failed it wakes here (node_dead,
  // shutdown); the condition is the registry's, so nothing is guarded.
  Mutex verdict_mu_;
  CondVar verdict_cv_;
};

}  // namespace dualpath::serve
