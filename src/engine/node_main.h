#pragma once
// The node process, `dualpath node --scheduler HOST:PORT --role prefill|decode [--index N]`:
// one prefill or decode node of the live system, on any host.
//
//   1. Connects to the scheduler service (retrying until --connect-timeout: a clear error
//      naming the address when nothing answers), registers its role (and index, or lets the
//      scheduler pick the lowest free one), receives its NodeSetup, builds its NodeRuntime and
//      engine, and sends its hello (UCX address, DRAM and HBM regions).
//   2. Serves the scheduler's calls (node_protocol.h) on a pool of control workers, several at
//      once: prepare, prefill, decode (streaming TokenEvents), peers. The pool grows when a call
//      finds no idle worker, so blocked calls never starve the ones that would unblock them; the
//      calls that never block (release, cancel, stop, status) are answered by the reader itself.
//      Every message is parsed without exceptions; a malformed one gets an error reply and the
//      node goes on. A LoadReport goes out every report interval: it is the node's lease.
//   3. When the scheduler goes away it cancels what it was doing (nobody waits for those
//      answers; its workers are joined before it registers again) and reconnects, keeping its runtime (UCX worker, buffers, store): a restarted
//      scheduler gets it back without a restart, as long as its setup is the same. After
//      --reconnect-timeout without one it exits.
//   It exits 0 on the scheduler's "quit" or SIGTERM/SIGINT, 2 when the scheduler refuses it
//   (a duplicate index, more nodes than the config has), 1 on other errors.
//
// Threads: the main thread (reads the socket, reconnects); kControlWorkers or more control
// workers; the report thread; the UCX worker's progress thread; the store's I/O thread; on a DE,
// the push thread (decode_engine.h).

#include <cstdint>
#include <string>

#include "dualpath/result.h"
#include "dualpath/units.h"

namespace dualpath::engine {

struct NodeArgs {
  std::string role;
  int index = -1;         // -1: the scheduler assigns one
  std::string scheduler;  // HOST:PORT of `dualpath serve`
  // The address (or interface name) this node's UCX endpoints bind, for tcp transports; empty:
  // the setup's (loopback by default).
  std::string listen;
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

}  // namespace dualpath::engine
