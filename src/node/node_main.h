#pragma once
// The node process, `dualpath node --scheduler HOST:PORT --role prefill|decode [--index N]
// [--cluster-key FILE] [--listen ADDR]`: one prefill or decode node of the live system, on any
// host (docs/serve.md).
//
//   1. Starts its Node service (control.proto) on the address that faces the scheduler (--listen
//      when it is an address, else the local address of the route to the scheduler), with mutual
//      TLS when it holds the cluster credential.
//   2. Registers with the scheduler (retrying until --connect-timeout, with a clear error naming
//      the address when nothing answers, and exit status 2 with the scheduler's reason when it
//      refuses), receives its setup, builds its runtime and engines.
//   3. Opens its session: its hello, then a load report every report interval, its lease. The
//      reports come from their own thread, whatever the calls are doing, and stop when the data
//      plane is stuck (the UCX progress thread does not answer a ping), so a node that cannot
//      move KV loses its lease.
//   4. Serves the scheduler's calls on a bounded pool (a call beyond it is refused as busy).
//   5. When the session ends (the scheduler went away, or a partition), it cancels what runs
//      (nobody waits for those answers) and registers again, keeping its runtime, for up to
//      --reconnect-timeout; a restarted scheduler gets it back under the same index.
//   It exits 0 on the scheduler's Quit or SIGTERM/SIGINT, 2 when the scheduler refuses it (a
//   duplicate index, more nodes than the config has, another protocol, no credential), 1 on other
//   errors.
//
// Threads: the main thread (registration, the session's reads); the report thread; the Node
// service's handler pool and its cancel watcher (node_service.h); the UCX worker's progress
// thread; the store's I/O thread; on a DE, the push thread (engine/decode_engine.h).

#include <cstdint>
#include <string>

#include "dualpath/result.h"
#include "dualpath/units.h"

namespace dualpath::node {

struct NodeArgs {
  std::string role;
  int index = -1;         // -1: the scheduler assigns one
  std::string scheduler;  // HOST:PORT of `dualpath serve`
  // The address (or interface name) this node's UCX endpoints and Node service bind; empty: the
  // setup's UCX devices (loopback by default), and for the Node service the local address of the
  // route to the scheduler.
  std::string listen;
  std::string cluster_key;  // the cluster credential file; empty: plain TCP, loopback only
  int control_port = 0;     // the Node service's port; 0: any free one
  Duration connect_timeout = std::chrono::seconds(30);
  Duration reconnect_timeout = std::chrono::minutes(10);
};

// Returns the process exit code.
int run_node(const NodeArgs& args);

// "host:port" -> (host, port); errors name the text and the expected form.
struct HostPort {
  std::string host;
  uint16_t port = 0;
};
Result<HostPort> parse_host_port(const std::string& text);

}  // namespace dualpath::node
