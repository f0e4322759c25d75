#pragma once
// A turn as the live service's callers see it (the HTTP API, the benchmarks, the tests): what
// they ask for (TurnRequest), how they cancel or stop it (TurnCancel) and what they get
// (TurnResult). SchedulerService::run_turn runs it (turn_runner.h). No RPC types here: the
// callers' translation units stay free of gRPC's headers.

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "common/mutex.h"
#include "compute/sampling.h"
#include "engine/engine_types.h"
#include "sched/read_path.h"

namespace dualpath::serve {

// Cancels a turn from another thread (a client that went away, a deadline). Thread-safe.
// stop() instead ends the turn's decode early and successfully: run_turn() returns the tokens so
// far (an end token or a stop string was seen), and the decode persists its blocks as usual.
class TurnCancel {
 public:
  void cancel();
  bool cancelled() const { return cancelled_.load(std::memory_order_acquire); }
  void stop();
  bool stopped() const { return stopped_.load(std::memory_order_acquire); }

 private:
  friend class TurnRunner;
  // The runner's hooks for the turn's current attempt. A stop asked for before the attempt's
  // decode runs is sent as soon as its hook is set.
  void set_hooks(std::function<void()> cancel, std::function<void()> stop);
  std::atomic<bool> cancelled_{false};  // release in cancel(), acquire in cancelled()
  std::atomic<bool> stopped_{false};    // release in stop(), acquire in stopped()
  Mutex mu_;
  std::function<void()> cancel_hook_ DP_GUARDED_BY(mu_);
  std::function<void()> stop_hook_ DP_GUARDED_BY(mu_);
};

struct TurnRequest {
  std::vector<int32_t> tokens;  // the whole prompt
  int64_t gen_tokens = 16;
  // Greedy by default; a sample depends only on (seed, position), so retries, migrations and
  // either read path give the same tokens (compute/sampling.h).
  compute::SamplingParams sampling;
  sched::PathRequest path;  // a fixed read path, or nullopt: the scheduler's choice
  // kOracle: the hit tokens (the replay's context; the oracle persists nothing to match).
  int64_t oracle_hit_tokens = 0;
  // The block key chain's namespace (store/block_key.h): the turn hits only blocks stored under
  // the same one, and persists its own under it. Empty: the default, shared chain. The HTTP
  // layer sets it from the API key's cache_namespace and the request's cache_salt (issue 32).
  std::string cache_namespace;
  // Gets the output tokens in order as they are generated (several at a time), on the turn's
  // thread. Across a migration the stream continues where it was.
  std::function<void(std::span<const int32_t>)> on_tokens;
  std::shared_ptr<TurnCancel> cancel;
  // Tests: runs after the DE has prepared the turn's buffer and before the PE prefills
  // (attempt number, the turn's placement), e.g. to SIGKILL a node mid-turn.
  std::function<void(int attempt, engine::NodeId pe, engine::NodeId de)> after_prepare;
  // Tests: runs once the first `n` decode tokens have streamed (to kill a node mid-decode).
  int64_t fault_after_tokens = 0;
  std::function<void(engine::NodeId de)> on_fault_point;
};

struct TurnResult {
  int64_t prompt_tokens = 0;
  int64_t hit_tokens = 0;  // of the first attempt
  sched::ReadPath path = sched::ReadPath::kRecompute;
  std::vector<int32_t> output_tokens;
  std::vector<float> first_logits;
  engine::HopBytes bytes;  // every attempt's
  // Of bytes.storage_read, what the PE node and the DE node read (a split read: both).
  int64_t pe_read_bytes = 0, de_read_bytes = 0;
  // The DE DRAM tier (issue 35): the hit's leading tokens the plan took from the decode node's
  // tier (its last attempt's), and bytes.de_dram what the tier served of them (the rest was
  // read from storage: the node had lost it).
  int64_t dram_tokens = 0;
  double queue_s = 0;  // waiting to be placed (the scheduler's queue)
  // From the placement to the turn's storage reads done (its last side's: the DE node's prepare
  // returned, the PE node said read_done); 0 without a read. The first attempt's.
  double read_s = 0;
  double ttft_s = 0;   // from run_turn() to the first token
  double tpot_s = 0;   // decode time per token after the first
  engine::NodeId pe{engine::NodeRole::kPrefill, 0};
  engine::NodeId de{engine::NodeRole::kDecode, 0};
  int pe_engine = 0, de_engine = 0;
  int attempts = 1;
  bool retried = false;             // an attempt failed and the turn ran again
  bool migrated = false;            // its decode moved to another node mid-way
  int64_t migrated_tokens = 0;      // tokens generated before the migration
  int64_t migrated_hit_tokens = 0;  // hit tokens the migrated attempt loaded from storage
  int64_t migrated_read_bytes = 0;  // the bytes it read
  std::vector<int> failed_nodes;    // decode or prefill nodes that died under the turn
  std::vector<std::pair<double, double>> layer_timeline;  // the prefill's (load wait, compute)
  double prefill_s = 0;  // the PE's time on the turn's prefill (its busy time)
  int64_t persist_skipped_blocks = 0;  // blocks the decode could not persist (cache degraded)
};

}  // namespace dualpath::serve
