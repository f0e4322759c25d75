#pragma once
// NodeRuntime: the parts one node process gives its engine (DESIGN.md `engine/`): the UCX context
// and worker, the engine's traffic manager, the node's DRAM buffer pool (PE buffer or DE buffer,
// in Full Block slots), the "HBM" arena (registered host memory: there is no GPU here; slots of
// one Layer Block), the node's storage NIC (rate limiter, read-queue gauge) and block store, the
// model, and the connections to the peer nodes of the other role.
//
// A node hosts `setup.engines` engines (g; one per GPU in production). The node's parts are
// shared by its engines: the UCX worker, the DRAM buffer pool, the storage NIC and the store.
// Each engine has its own HBM arena and traffic manager (with its loopback endpoint and the
// node's DRAM pool imported for it), named by its index 0..g-1. The peers' DRAM buffers and
// every HBM arena of theirs are imported once at setup, so every data-path hop is a put into a
// region known in advance.
//
// Threads: created and connected by the node's main thread; afterwards every member is
// thread-safe to use (the transport, pool and store objects are), and the peer table is
// immutable. Destruction order is the reverse of the member order below: imported regions
// before endpoints, the traffic manager before the worker, registered memory before the worker.

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/mutex.h"
#include "engine/backend_factory.h"
#include "engine/cancel_registry.h"
#include "engine/engine_types.h"
#include "engine/slot_pool.h"
#include "store/dram_tier.h"
#include "store/file_store.h"
#include "transport/context.h"
#include "transport/traffic_manager.h"
#include "transport/worker.h"

namespace dualpath::engine {

// What the scheduler tells a node when it registers (its setup): the parts of EngineConfig a
// node needs.
struct NodeSetup {
  NodeRole role = NodeRole::kPrefill;
  int index = 0;
  BackendSpec backend;
  int64_t block_tokens = 64;
  std::vector<std::string> data_paths;
  int64_t store_capacity_bytes = 0;
  double store_fault_rate = 0;  // EngineConfig::store_fault_rate
  uint64_t dram_buffer_bytes = 0;
  uint64_t hbm_bytes = 0;
  int pipeline_depth = 3;
  int engines = 1;  // engines (GPUs) on the node
  // Prefills that compute at once on each PE engine; 0 = no limit (the CPU model, which
  // computes on the CPU).
  int compute_slots = 0;
  Duration timeout = std::chrono::seconds(30);
  // How often the node sends its load report (its lease renewal) to the scheduler.
  Duration report_interval = std::chrono::milliseconds(100);
  // A report equal to the last one sent goes only this often: an idle node renews its lease
  // without costing the scheduler a message every interval (0: every report_interval).
  Duration heartbeat{0};
  // A prepared DE buffer whose decode never comes is freed after this (0: 2 x timeout).
  Duration buffer_ttl{0};
  // A decode node's DRAM tier (issue 35; store/dram_tier.h): its capacity (0: none) and how long
  // it keeps a session's KV after its turn, on this node's (real-time) clock.
  uint64_t dram_tier_bytes = 0;
  Duration dram_tier_ttl = std::chrono::seconds(480);
  std::string transports = "sm,self";
  std::string net_devices;
  int64_t poll_us = 0;             // [transport] poll_us
  int64_t poll_in_flight_us = -1;  // [transport] poll_in_flight_us
  double snic_gbps = 0;

  bool operator==(const NodeSetup&) const;
};

// The store's model fingerprint: the backend, the model, its weights and KV scale, so KV of
// another model or other weights never hits.
store::ModelFingerprint kv_fingerprint(const BackendSpec& backend);

// A peer node of the other role: our endpoint to it and its regions, imported for that endpoint.
// Members are destroyed bottom up: the imported regions before the endpoint they came through.
struct PeerNode {
  // What it was connected from: its role and index, its UCX worker address (a restarted peer
  // has a new one), its registration's epoch; a failed connection is remade from it.
  NodeHello hello;
  // After a failed attempt to remake it, the node's clock time before which no other is made
  // (a peer that is really gone costs one attempt per interval, not one per request).
  std::atomic<int64_t> retry_at_ns{0};
  std::unique_ptr<transport::Endpoint> endpoint;
  std::unique_ptr<transport::RemoteRegion> dram;               // its DRAM buffer pool
  std::vector<std::unique_ptr<transport::RemoteRegion>> hbm;  // its engines' HBM arenas
};

class NodeRuntime {
 public:
  static Result<std::unique_ptr<NodeRuntime>> create(const NodeSetup& setup);
  ~NodeRuntime();
  NodeRuntime(const NodeRuntime&) = delete;
  NodeRuntime& operator=(const NodeRuntime&) = delete;

  // What the peers need to reach this node: its UCX address and its regions' descriptors.
  NodeHello hello() const;
  // Connects to every node of the other role in `peers` and imports their regions. Incremental:
  // a peer already connected at the same address and epoch is kept; one at a new address (it
  // restarted) or epoch (it registered again, e.g. after a partition that may have broken its
  // connections) is replaced, its old connection living on only while requests still hold it.
  // With `reset`, every existing connection is dropped first (this node is rejoining). A peer
  // whose connection has failed is never kept. Thread-safe.
  Status connect_peers(std::span<const NodeHello> peers, bool reset = false);

  const NodeSetup& setup() const { return setup_; }
  const store::BlockLayout& layout() const { return layout_; }
  transport::Worker& worker() { return *worker_; }
  int engines() const { return static_cast<int>(engines_.size()); }
  // kInvalidArgument when the node has no such engine.
  Status check_engine(int engine) const;
  transport::TrafficManager& traffic(int engine) { return *engines_.at(engine).traffic; }
  SlotPool& dram() { return *dram_; }
  SlotPool& hbm(int engine) { return *engines_.at(engine).hbm; }
  store::FileStore& store() { return *store_; }
  // A decode node's DRAM tier (setup.dram_tier_bytes > 0), else null.
  store::DramTier* dram_tier() { return dram_tier_.get(); }
  store::StorageNic& storage_nic() { return *nic_; }
  CancelRegistry& cancels() { return cancels_; }
  // The node's clock: every deadline and timeout of its engines is a time on it.
  const Clock& clock() const { return clock_; }
  // Makes the backend of one request (thread-safe).
  const BackendFactory& backends() const { return *backends_; }
  // An engine's HBM arena and the node's DRAM pool as seen through the engine's loopback
  // endpoint: the targets of its local host<->"HBM" copies.
  const transport::RemoteRegion& local_hbm(int engine) const {
    return *engines_.at(engine).local_hbm;
  }
  const transport::RemoteRegion& local_dram(int engine) const {
    return *engines_.at(engine).local_dram;
  }
  // kNotFound naming the index when there is no such peer. The caller holds the peer for as
  // long as it uses it (a reconnection replaces the table's entry, not this one).
  Result<std::shared_ptr<PeerNode>> peer(NodeRole role, int index);

 private:
  // Connects to one peer and imports its regions (no lock held: UCX calls).
  Result<std::shared_ptr<PeerNode>> connect_peer(const NodeHello& p);
  explicit NodeRuntime(NodeSetup setup) : setup_(std::move(setup)) {}

  NodeSetup setup_;
  store::BlockLayout layout_;
  SteadyClock clock_;
  CancelRegistry cancels_{std::chrono::minutes(2), clock_};
  std::unique_ptr<BackendFactory> backends_;
  std::unique_ptr<store::StorageNic> nic_;
  std::unique_ptr<store::FileStore> store_;
  std::unique_ptr<store::DramTier> dram_tier_;
  std::unique_ptr<transport::Context> context_;
  std::unique_ptr<transport::Worker> worker_;
  struct EngineParts {
    std::unique_ptr<SlotPool> hbm;
    std::unique_ptr<transport::TrafficManager> traffic;
    std::unique_ptr<transport::RemoteRegion> local_hbm;
    std::unique_ptr<transport::RemoteRegion> local_dram;
  };
  std::unique_ptr<SlotPool> dram_;
  std::vector<EngineParts> engines_;
  mutable Mutex peers_mu_;
  // Co-owned by requests in flight on them (shared_ptr), so a replaced peer outlives its users.
  std::vector<std::shared_ptr<PeerNode>> peers_ DP_GUARDED_BY(peers_mu_);
};

}  // namespace dualpath::engine
