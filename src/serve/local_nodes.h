#pragma once
// LocalNodes: the config's node processes started on this machine (what `dualpath serve` does
// by default; `--external-nodes` starts none). Each is `<program> [args] --scheduler ADDR --role R
// --index I [--cluster-key FILE]`, normally the dualpath binary itself (`/proc/self/exe node ...`), with the parent-
// death signal set, so a killed `serve` leaves no orphans. Destruction stops them (SIGTERM, then
// SIGKILL after a grace) and reaps them.
//
// Threads: thread-compatible; call from the thread that lives as long as the nodes (the parent-
// death signal follows the spawning thread, common/subprocess.h).

#include <string>
#include <vector>

#include "common/subprocess.h"
#include "engine/engine_types.h"

namespace dualpath::serve {

struct LocalNodesOptions {
  std::string program = "/proc/self/exe";
  std::vector<std::string> args = {"node"};  // before the node's own flags
  std::string scheduler;                     // HOST:PORT
  std::string cluster_key;  // the credential the scheduler requires (empty: none)
  int prefill_nodes = 1;
  int decode_nodes = 1;
};

class LocalNodes {
 public:
  static Result<std::unique_ptr<LocalNodes>> start(const LocalNodesOptions& options);
  ~LocalNodes();
  LocalNodes(const LocalNodes&) = delete;
  LocalNodes& operator=(const LocalNodes&) = delete;

  // The node's process id, or -1 when it is not running.
  pid_t pid(const engine::NodeId& id);
  // Sends a signal to one node (SIGKILL for the failure tests).
  Status signal(const engine::NodeId& id, int sig);
  // Waits for a node to exit (after a kill); kTimedOut otherwise.
  Status wait_exit(const engine::NodeId& id, Duration timeout);
  // Starts a node again (after it died), with the same role and index.
  Status restart(const engine::NodeId& id);
  // Nodes that have exited, with how ("exit 1", "killed by signal 9").
  std::vector<std::pair<engine::NodeId, std::string>> exited();
  // Stops every node: SIGTERM, then SIGKILL after `grace`.
  void stop(Duration grace);

 private:
  explicit LocalNodes(LocalNodesOptions o) : options_(std::move(o)) {}
  Status spawn(const engine::NodeId& id);
  Subprocess& process(const engine::NodeId& id);

  LocalNodesOptions options_;
  std::vector<Subprocess> prefill_, decode_;
};

}  // namespace dualpath::serve
