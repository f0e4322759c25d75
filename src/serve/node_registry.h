#pragma once
// NodeRegistry: the scheduler's table of nodes (issue 31): one slot per (role, index) of the
// config, registrations, sessions, leases and load reports. It decides who may hold a slot and
// when a node is alive or dead; the RPCs it needs (connecting a joining node and its peers) go
// through the nodes' clients outside its lock, each with its own deadline and all at once.
//
//   reserve()  a registration: a free slot of the role (or the one asked for), or a refusal that
//              names the problem and the fix; a session token binds the node to the slot
//   join()     the node's hello: its client, its peers connected both ways (concurrently), alive
//   report()   a load report: renews the lease
//   expire()   nodes whose lease ran out (on the injected clock) are declared dead
//   session_ended()  a node's session stream broke: dead at once
// A dead node's client is closed, which fails every call in flight to it at that moment
// (control/node_client.h); the listener hears of it (on_dead) to stop placing work there and to
// retry or migrate its turns.
//
// Threads: thread-safe. Listener callbacks run outside the registry's lock, on the thread that
// caused them (a session's handler, the lease thread).

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/mutex.h"
#include "control/convert.h"
#include "control/node_client.h"
#include "engine/engine_types.h"
#include "serve/node_status.h"

namespace dualpath::serve {

struct RegistryOptions {
  int prefill_nodes = 1;
  int decode_nodes = 1;
  Duration lease_ttl = std::chrono::milliseconds(1000);
  // From a registration to its hello: the node builds its runtime (weights, UCX, buffers).
  Duration join_timeout = std::chrono::seconds(120);
  // A `peers` call: the node connects its UCX endpoints.
  Duration peers_timeout = std::chrono::seconds(30);
  std::string origin = "<defaults>";  // the config, for refusals
};

// What the registry tells its owner, outside its lock.
struct RegistryListener {
  std::function<void(int node, bool alive)> on_alive;  // joined (true) or dead (false)
  // Dead: its calls are failing now; `session` is the registration's that died.
  std::function<void(int node, const Status& why, const std::string& session)> on_dead;
  std::function<void(int node, const engine::LoadReport& report)> on_report;
};

// Makes the client of a node's Node service at its control address (the owner's security).
using ClientFactory = std::function<std::shared_ptr<control::NodeClient>(
    const std::string& address, const std::string& name, const std::string& session)>;

class NodeRegistry {
 public:
  NodeRegistry(RegistryOptions options,
               ClientFactory make_client,
               RegistryListener listener,
               const Clock& clock = real_clock());

  // Scheduler node ids: prefill nodes 0..P-1, decode nodes P..P+D-1 (sched::ClusterScheduler's).
  int node_id(const engine::NodeId& id) const;
  int nodes() const { return options_.prefill_nodes + options_.decode_nodes; }

  struct Reservation {
    int index = 0;
    int node = 0;
    std::string session;
  };
  // A registration (already authenticated by the transport). Refusals: kFailedPrecondition (an
  // index beyond the config, a full role, another protocol, a registration without a control
  // address), kAlreadyExists (the index is held by a live or joining node).
  Result<Reservation> reserve(const control::pb::RegisterRequest& request);
  // The node of a session token, or -1.
  int node_of_session(const std::string& session) const;
  // The node's hello on its session: connects it to every live node of the other role and them
  // to it (concurrently, each call with its own deadline), then marks it alive. The slot's
  // registration must be `session`'s and still joining. Returns the node id.
  Result<int> join(const std::string& session, const engine::NodeHello& hello);
  // The node could not start (its StartFailed): the slot is free again.
  void start_failed(const std::string& session, const Status& why);
  // A load report on the node's session: renews its lease. False when the session is not the
  // slot's current one (a late report of a replaced registration).
  bool report(const std::string& session, const engine::LoadReport& report);
  // The session's stream ended: its node is dead (if it still is this registration).
  void session_ended(const std::string& session, const Status& why);
  // Declares dead every live node silent for longer than the lease TTL, and frees joining slots
  // older than the join timeout. Returns the nodes declared dead.
  std::vector<int> expire();
  // Marks dead (once per registration); the client closes and the listener hears of it.
  void mark_dead(int node, const Status& why);

  // A live node's client (null when it is not alive): the turn runner's calls.
  std::shared_ptr<control::NodeClient> client(int node) const;
  // Every live client (for idle-deadline sweeps and shutdown).
  std::vector<std::shared_ptr<control::NodeClient>> clients() const;
  engine::NodeId id_of(int node) const;
  bool alive(int node) const;
  bool all_alive() const;
  std::vector<NodeStatus> status() const;
  // Names of the nodes not alive ("decode node 1").
  std::vector<std::string> missing() const;

 private:
  struct Slot {
    engine::NodeId id;
    bool alive = false;
    bool joining = false;  // reserved by a registration whose hello has not come
    Duration joining_since{0};
    std::string session;
    uint64_t generation = 0;  // bumped by every reservation
    std::string host;
    int64_t pid = 0;
    std::string control_address;
    std::shared_ptr<control::NodeClient> client;
    engine::NodeHello hello;
    engine::LoadReport report;
    Duration last_report{0};
    int64_t registrations = 0;
  };
  int slot_of_session(const std::string& session) const DP_REQUIRES(mu_);
  std::string new_session() const;

  const RegistryOptions options_;
  const ClientFactory make_client_;
  const RegistryListener listener_;
  const Clock& clock_;
  mutable Mutex mu_;
  std::vector<Slot> slots_ DP_GUARDED_BY(mu_);
};

}  // namespace dualpath::serve
