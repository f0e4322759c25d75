#pragma once
// Cluster: the scheduler service and, by default, the config's nodes started on this machine:
// the live system in one object, for `dualpath serve`, `dualpath demo`, `dualpath bench live`
// and the tests. Destruction tells the nodes to quit, stops them and the service.
//
// Threads: start() and destruction on one thread (the nodes' parent-death signal follows it);
// run_turn() from any thread.

#include <memory>
#include <string>
#include <vector>

#include "serve/local_nodes.h"
#include "serve/scheduler_service.h"

namespace dualpath::serve {

struct ClusterOptions {
  ServeConfig config;
  // The node program and its leading arguments: the dualpath binary itself by default; tests
  // give dp_node_program and no arguments.
  std::string node_program = "/proc/self/exe";
  std::vector<std::string> node_args = {"node"};
  bool spawn_nodes = true;  // false: wait for nodes started by hand (--external-nodes)
  Duration ready_timeout = std::chrono::seconds(120);
};

class Cluster {
 public:
  // Starts the service, the nodes, and waits until every node has registered.
  static Result<std::unique_ptr<Cluster>> start(ClusterOptions options);
  ~Cluster();
  Cluster(const Cluster&) = delete;
  Cluster& operator=(const Cluster&) = delete;

  SchedulerService& service() { return *service_; }
  const ServeConfig& config() const { return service_->config(); }
  Result<TurnResult> run_turn(TurnRequest request) {
    return service_->run_turn(std::move(request));
  }
  // The local node processes (nullptr with external nodes).
  LocalNodes* local_nodes() { return nodes_.get(); }
  int prefill_nodes() const { return config().engine.prefill_nodes; }
  int decode_nodes() const { return config().engine.decode_nodes; }

 private:
  Cluster() = default;
  std::unique_ptr<SchedulerService> service_;
  std::unique_ptr<LocalNodes> nodes_;
};

}  // namespace dualpath::serve
