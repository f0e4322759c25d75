#pragma once
// SchedulerService: the central scheduler of the live system (PAPER.md §8; docs/serve.md). Nodes
// (`dualpath node`, on this host or others) connect to it, register and get their setup from its
// config; it keeps a lease per node (renewed by the node's load reports), places every turn with
// sched::ClusterScheduler over the engines of all prefill and decode nodes, and runs the turn's
// calls: DE prepare, PE prefill (layerwise, by the chosen read path), DE decode with its tokens
// streaming back.
//
// Failures (docs/serve.md "Failure handling"):
//   - a node whose socket closes is dead at once, one whose reports stop for scheduler.lease_ttl
//     is declared dead; its engines get no new work; the other side of each of its turns is told
//     to cancel, so no call waits out a timeout on a dead peer;
//   - a turn whose prefill or decode node died is tried again on live nodes; one whose decode
//     node died mid-decode is migrated: its prompt and the tokens generated so far go to another
//     decode engine, which loads the full blocks persisted so far instead of recomputing them;
//   - a hit block that vanished (evicted, corrupt) makes the turn recompute;
//   - a cancelled turn (TurnRequest::cancel) is cancelled on both nodes, whose buffers and HBM
//     slots are freed.
// A node that re-registers (it or the scheduler restarted) gets work again.
//
// Threads: start(); then every public method is thread-safe. Threads: the accept thread; one
// registration thread per connecting node (registrations are serialised); the fetch thread
// (every fetch interval while turns wait: ClusterScheduler::fetch); the lease thread; one reader
// thread per node link (engine/node_link.h). run_turn() blocks its caller (one thread per
// concurrent turn: a session thread, an HTTP worker).

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "compute/sampling.h"
#include "dualpath/result.h"
#include "engine/node_link.h"
#include "engine/node_protocol.h"
#include "engine/node_runtime.h"
#include "model/cost_model.h"
#include "sched/cluster_scheduler.h"
#include "serve/serve_config.h"
#include "store/file_store.h"
#include "transport/oob_channel.h"

namespace dualpath::serve {

using engine::Json;

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
  friend class SchedulerService;
  // The service's hooks for the turn's current attempt (they tell the nodes). A stop asked for
  // before the attempt's decode node is known runs as soon as its hook is set.
  void set_hook(std::function<void()> hook);
  void set_stop_hook(std::function<void()> hook);
  void run(std::function<void()> TurnCancel::*hook);  // calls the hook, if any, unlocked
  std::atomic<bool> cancelled_{false};  // release in cancel(), acquire in cancelled()
  std::atomic<bool> stopped_{false};    // release in stop(), acquire in stopped()
  std::mutex mu_;
  std::function<void()> hook_;       // guarded by mu_
  std::function<void()> stop_hook_;  // guarded by mu_
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
  // Gets the output tokens in order as they are generated (several at a time), on a link's
  // reader thread: it must not block. Across a migration the stream continues where it was.
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
  double queue_s = 0;      // waiting to be placed (the scheduler's queue)
  double ttft_s = 0;       // from run_turn() to the first token
  double tpot_s = 0;       // decode time per token after the first
  engine::NodeId pe{engine::NodeRole::kPrefill, 0};
  engine::NodeId de{engine::NodeRole::kDecode, 0};
  int pe_engine = 0, de_engine = 0;
  int attempts = 1;
  bool retried = false;             // an attempt failed and the turn ran again
  bool migrated = false;            // its decode moved to another node mid-way
  int64_t migrated_tokens = 0;      // tokens generated before the migration
  int64_t migrated_hit_tokens = 0;  // hit tokens the migrated attempt loaded from storage
  int64_t migrated_read_bytes = 0;  // the bytes it read
  std::vector<int>
      failed_nodes;  // decode or prefill nodes that died under the turn (scheduler ids)
  std::vector<std::pair<double, double>> layer_timeline;  // the prefill's (load wait, compute)
  double prefill_s = 0;  // the PE's time on the turn's prefill (its busy time)
  int64_t persist_skipped_blocks = 0;  // blocks the decode could not persist (cache degraded)
};

// One registered node, as the service sees it.
struct NodeStatus {
  engine::NodeId id;
  bool alive = false;
  std::string host;
  int64_t pid = 0;
  engine::LoadReport report;
  int64_t registrations = 0;  // how often it has registered (re-registrations after restarts)
  double last_report_age_s = 0;
};

// The central scheduler the service runs for a config: its engines (every engine of every node)
// and its policy and parameters (alpha from the emulated storage NIC, beta from the cost model or,
// for the CPU model, its measured rate; docs/serve.md). The simulator builds its own from a
// SimConfig; both run sched::ClusterScheduler.
Result<sched::ClusterShape> scheduler_shape(const ServeConfig& config);
Result<sched::ClusterSchedulerParams> scheduler_params(const ServeConfig& config);

class SchedulerService {
 public:
  // Listens on scheduler.host:port and starts the threads. Nodes may connect at once.
  static Result<std::unique_ptr<SchedulerService>> start(const ServeConfig& config);
  // Asks every node to quit and stops the threads.
  ~SchedulerService();
  SchedulerService(const SchedulerService&) = delete;
  SchedulerService& operator=(const SchedulerService&) = delete;

  const ServeConfig& config() const { return config_; }
  uint16_t port() const { return listener_->port(); }
  std::string address() const;
  // Waits until every node the config declares has registered and connected to its peers;
  // kTimedOut naming the missing nodes.
  Status wait_ready(Duration timeout);
  bool ready() const;
  // Every node that registered, by role and index.
  std::vector<NodeStatus> nodes() const;

  // Runs one turn to the end (retries and migration included) or to an error. Thread-safe.
  Result<TurnResult> run_turn(TurnRequest request);

  // Sends "quit" to every node (they exit) and stops accepting. Without `quit_nodes` the nodes
  // only see their connections close, as if the scheduler had crashed: they reconnect (tests of
  // a scheduler restart).
  void shutdown(bool quit_nodes = true);

  // The underlying scheduler's decisions, for tests (the snapshot-replay check).
  sched::ClusterScheduler& scheduler_for_test() { return *sched_; }

 private:
  struct Node;
  struct Waiter;
  struct Attempt;
  explicit SchedulerService(const ServeConfig& config);

  void accept_loop();
  void handle_registration(std::unique_ptr<transport::OobChannel> channel);
  void fetch_loop();
  void lease_loop();
  void on_node_message(int sched_node, const Json& msg);
  // Marks the node dead (once) and tells the other side of each of its turns. `generation`
  // (non-zero from a link's close handler) ignores the close of a link already replaced.
  void mark_dead(int sched_node, const Status& why, uint64_t generation = 0);
  int sched_node_of(const engine::NodeId& id) const;
  std::shared_ptr<Node> node(int sched_node) const;
  // A node's current link (null before it registers). Node::link is guarded by mu_: a
  // re-registration swaps it and the destructor drops it while link threads read it.
  std::shared_ptr<engine::NodeLink> link_of(const Node& n) const;
  engine::NodeSetup setup_for(const engine::NodeId& id) const;

  // One attempt of a turn: place, prepare, prefill, decode. The outcome says what to do next.
  Status run_attempt(const TurnRequest& req, const std::shared_ptr<Attempt>& a, TurnResult& out);
  Result<sched::Placement> place(const sched::SchedRequest& request, const TurnRequest& req);

  const ServeConfig config_;
  std::unique_ptr<transport::OobListener> listener_;
  std::unique_ptr<store::FileStore> store_;  // prefix matches on the shared data paths
  store::BlockLayout layout_;
  int64_t kv_bytes_per_token_ = 0;
  // Modeled compute: the cost model that prices each turn's prefill work (pe_policy "tail").
  std::optional<model::CostModel> cost_;
  std::string temp_dir_;  // made (and removed) when no data path was given

  mutable std::mutex mu_;  // the nodes table, the scheduler, the waiters
  std::condition_variable cv_;
  std::vector<std::shared_ptr<Node>> nodes_;        // guarded by mu_: by scheduler node id (P + D)
  std::unique_ptr<sched::ClusterScheduler> sched_;  // guarded by mu_
  std::map<int64_t, std::shared_ptr<Waiter>> waiters_;     // guarded by mu_: queued turns by id
  std::map<uint64_t, std::shared_ptr<Attempt>> attempts_;  // guarded by mu_: running, by id
  bool stopping_ = false;                                  // guarded by mu_
  std::mutex registration_mu_;  // serialises the peer exchanges of registrations
  std::atomic<uint64_t> next_request_id_{1};  // relaxed: only hands out distinct ids

  std::thread accept_thread_, fetch_thread_, lease_thread_;
  std::vector<std::thread> registration_threads_;  // guarded by mu_
};

}  // namespace dualpath::serve
