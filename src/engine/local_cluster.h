#pragma once
// LocalCluster: the local driver. It starts one prefill node process and 1..n decode node
// processes on this machine (posix_spawn of a node program, normally the dualpath binary itself
// through /proc/self/exe with `node`), hands each its setup over a control socket, passes every
// node the others' UCX addresses and region descriptors, and then runs turns:
//
//   hit tokens:  the longest cached prefix in the store (the driver opens the same data paths),
//                at most the prompt less one token (prefill needs a new token for its logits);
//   path:        pe, de, recompute, or auto = sched::choose_read_path on the PE node's and the
//                DE node's read queues (each node's gauge, or the hit tokens of the turns sent to
//                it whose reads have not finished, whichever is larger);
//   engines:     the decode engine the request names; the prefill engine with the fewest
//                prefills in flight (PE selection proper, Algorithm 1, is the scheduler's);
//   DE prepare (buffer; on the DE path, the storage read), PE prefill (layerwise), DE decode.
//
// Failure: every control call has the config's request_timeout; a node that died closes its
// socket, which is kUnavailable at once, and a UCX transfer to a dead process fails by its
// deadline (docs/transport.md: shared memory cannot detect a dead peer sooner). A failed turn
// releases its DE buffer and returns the error; nothing hangs.
//
// Threads: run_turn is thread-safe (sessions may run concurrently; each node serves several
// requests at once); start and destruction are not. Destruction asks every node to quit and
// reaps it (SIGKILL after a deadline).

#include <sys/types.h>

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/subprocess.h"
#include "engine/control_channel.h"
#include "engine/engine_config.h"
#include "engine/node_link.h"
#include "engine/node_runtime.h"
#include "engine/request_fields.h"
#include "sched/read_path.h"
#include "store/file_store.h"
#include "transport/oob_channel.h"

namespace dualpath::engine {

struct ClusterOptions {
  EngineConfig config;
  std::string node_program = "/proc/self/exe";
  // Arguments before the node's own (--role, --index, --driver-port): {"node"} for dualpath.
  std::vector<std::string> node_args = {"node"};
};


struct TurnRequest {
  std::vector<int32_t> tokens;  // the whole prompt
  int64_t gen_tokens = 16;
  sched::PathRequest path = sched::PathRequest();
  int de_index = 0;
  int de_engine = 0;  // the engine of that decode node (its HBM and traffic manager)
  // kOracle: the hit tokens (rounded down to whole blocks), since the oracle persists nothing
  // for the store to match; the replay's context (hits only within an agent's session).
  int64_t oracle_hit_tokens = 0;
  // Fault injection for tests: runs after the DE has prepared the request's buffer and before
  // the PE starts the prefill (e.g. to SIGKILL the decode node mid-request).
  std::function<void()> after_prepare;
};

struct TurnResult {
  int64_t prompt_tokens = 0;
  int64_t hit_tokens = 0;
  sched::ReadPath path = sched::ReadPath::kRecompute;
  std::vector<int32_t> output_tokens;
  std::vector<float> first_logits;  // the prefill's logits (the first output token's)
  HopBytes bytes;
  double ttft_s = 0;
  double tpot_s = 0;
  Json layer_timeline;
  int de_index = 0;           // the decode node that served the turn
  int de_engine = 0;          // and its engine
  int pe_engine = 0;          // the prefill node's engine that prefilled it
  int failed_over_from = -1;  // the decode node that died during the turn, or -1
};

class LocalCluster {
 public:
  static Result<std::unique_ptr<LocalCluster>> start(ClusterOptions options);
  ~LocalCluster();
  LocalCluster(const LocalCluster&) = delete;
  LocalCluster& operator=(const LocalCluster&) = delete;

  // Runs one turn. When a hit block is gone by the time it is read (kNotFound: evicted or
  // corrupt), the turn is recomputed. When the turn's decode node has died (its process exited),
  // the turn is retried once on the next live decode node by the PE read path (PAPER.md: a failed
  // DE read path falls back to the PE's own SNIC); with no live decode node left it fails with
  // kUnavailable naming the dead ones.
  Result<TurnResult> run_turn(const TurnRequest& request);
  bool decode_node_alive(int index);
  // Where session (or agent) `session` decodes, so its later turns hit what its decode node
  // persisted: node s mod D, engine (s / D) mod g. Sets request.de_index and de_engine.
  void place_session(int64_t session, TurnRequest& request) const;

  int decode_nodes() const { return static_cast<int>(nodes_.size()) - 1; }
  int engines_per_node() const { return config_.engines_per_node; }
  const EngineConfig& config() const { return config_; }
  pid_t decode_pid(int index) const { return nodes_.at(1 + index).process.pid(); }
  const std::vector<std::string>& data_paths() const { return config_.data_paths; }
  const store::BlockLayout& layout() const { return store_->layout(); }

 private:
  struct NodeProcess {
    std::string role;
    int index = 0;
    Subprocess process;                              // guarded by pids_mu_ once the cluster runs
    std::unique_ptr<transport::OobChannel> channel;  // setup; then owned by `link`
    std::unique_ptr<NodeLink> link;
  };
  LocalCluster() = default;
  Status spawn(NodeProcess& node, const NodeSetup& setup, const ClusterOptions& options);
  Result<int64_t> read_queue_tokens(NodeProcess& node);
  Duration call_timeout() const;
  Result<TurnResult> run_turn_on(const TurnRequest& request, int de_index, bool force_pe_path);

  EngineConfig config_;
  std::string temp_dir_;  // made (and removed) when no data path was given
  std::unique_ptr<transport::OobListener> listener_;
  std::vector<NodeProcess> nodes_;  // [0]: the prefill node; then decode nodes by index
  std::unique_ptr<store::FileStore> store_;
  std::mutex pids_mu_;
  // Serialises auto path decisions, so each sees the reads the previous ones sent.
  std::mutex path_mu_;
  std::vector<int64_t> pending_read_tokens_;  // guarded by path_mu_; per node, as nodes_
  std::vector<int> pe_engine_prefills_;       // guarded by path_mu_; in flight per PE engine
  std::atomic<uint64_t> next_request_id_{1};  // relaxed: only hands out distinct ids
};

}  // namespace dualpath::engine
