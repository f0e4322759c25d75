#pragma once
// SchedulerService: the central scheduler of the live system (PAPER.md §8; docs/serve.md), a
// gRPC service (control.proto's Scheduler) that nodes register with, and the request interface
// the HTTP API and the benchmarks run turns through. Its parts:
//
//   NodeRegistry (node_registry.h)   slots, registrations, sessions, leases, load reports
//   Placer (placement.h)             sched::ClusterScheduler, the fetch loop, claims
//   TurnRunner (turn_runner.h)       a turn's plan executed on its nodes: retry, migrate, cancel
//   the endpoint (this file)         Register and Session over gRPC, mutual TLS
//   the lease thread                 expires silent nodes, ends idle decodes
//
// Security (control/credential.h): with a cluster credential (scheduler.cluster_key, `serve
// --cluster-key`, or an ephemeral one made for the local nodes) the port speaks mutual TLS only;
// without one it speaks plain TCP and refuses to listen on anything but loopback.
//
// Threads: start(); then every public method is thread-safe. run_turn() blocks its caller.

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "common/clock.h"
#include "common/mutex.h"
#include "control/credential.h"
#include "dualpath/result.h"
#include "model/cost_model.h"
#include "sched/cluster_scheduler.h"
#include "engine/node_runtime.h"
#include "serve/node_status.h"
#include "serve/serve_config.h"
#include "serve/turn.h"
#include "store/file_store.h"

// The parts live behind pointers: this header (included by the HTTP API, the benchmarks and the
// tests) stays free of gRPC's headers, whose absl clashes with libsentencepiece's.
namespace grpc {
class Server;
}

namespace dualpath::serve {

// The central scheduler the service runs for a config: its engines (every engine of every node)
// and its parameters (sched::make_cluster_scheduler_params: alpha from the emulated storage NIC,
// beta from the cost model or, for the CPU model, its measured rate; docs/serve.md).
Result<sched::ClusterShape> scheduler_shape(const ServeConfig& config);
Result<sched::ClusterSchedulerParams> scheduler_params(const ServeConfig& config);

class SchedulerEndpoint;
class NodeRegistry;
class Placer;
class TurnRunner;

class SchedulerService {
 public:
  // Listens on scheduler.host:port and starts the threads. Nodes may connect at once.
  static Result<std::unique_ptr<SchedulerService>> start(const ServeConfig& config);
  // Asks every node to quit and stops.
  ~SchedulerService();
  SchedulerService(const SchedulerService&) = delete;
  SchedulerService& operator=(const SchedulerService&) = delete;

  const ServeConfig& config() const { return config_; }
  uint16_t port() const { return port_; }
  std::string address() const;
  // The credential file the nodes need (`dualpath node --cluster-key`); empty when the control
  // plane is plain TCP on loopback.
  const std::string& cluster_key_path() const { return cluster_key_path_; }
  // Waits until every node the config declares has registered and connected to its peers;
  // kTimedOut naming the missing nodes.
  Status wait_ready(Duration timeout);
  bool ready() const;
  // Every node of the config, by role and index.
  std::vector<NodeStatus> nodes() const;

  // Runs one turn to the end (retries and migration included) or to an error.
  Result<TurnResult> run_turn(TurnRequest request);

  // Sends Quit to every node (they exit) and stops serving. Without `quit_nodes` the nodes only
  // see their sessions end, as if the scheduler had crashed: they register again with the next
  // one (tests of a scheduler restart).
  void shutdown(bool quit_nodes = true);

  // Runs `f` on the central scheduler under its lock (tests: recording its decisions).
  void with_scheduler_for_test(const std::function<void(sched::ClusterScheduler&)>& f);

 private:
  explicit SchedulerService(const ServeConfig& config);
  void lease_loop();
  void on_dead(int node, const Status& why, const std::string& session);
  engine::NodeSetup setup_for(const engine::NodeId& id) const;

  const ServeConfig config_;
  const Clock& clock_ = real_clock();
  std::string temp_dir_;           // made (and removed) when no data path was given
  std::string cluster_key_path_;   // see cluster_key_path()
  control::Security security_;
  std::unique_ptr<store::FileStore> store_;  // prefix matches on the shared data paths
  store::BlockLayout layout_;
  std::optional<model::CostModel> cost_;     // modeled compute: prices the tail policy's work
  std::unique_ptr<Placer> placer_;
  std::unique_ptr<NodeRegistry> registry_;
  std::unique_ptr<TurnRunner> runner_;
  std::unique_ptr<SchedulerEndpoint> endpoint_;
  std::unique_ptr<grpc::Server> server_;
  uint16_t port_ = 0;

  Mutex mu_;
  CondVar cv_;
  bool stopping_ DP_GUARDED_BY(mu_) = false;
  std::thread lease_thread_;
};

}  // namespace dualpath::serve
