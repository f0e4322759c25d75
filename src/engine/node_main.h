#pragma once
// The node process (`dualpath node --role prefill|decode --driver-port P --index I`): connects to
// the local driver's control socket, receives its NodeSetup, builds the NodeRuntime and its
// engine, sends its hello (UCX address, DRAM and HBM region descriptors), connects to the peers
// the driver lists, then serves control requests until "quit" or until the driver goes away.
//
// Control requests (control_channel.h), read by the main thread and served by a pool of control
// workers, several at once; each reply echoes its request's call_id:
//   {"cmd": "prefill", ...}   PE: PrefillEngine::prefill
//   {"cmd": "prepare", ...}   DE: DecodeEngine::prepare
//   {"cmd": "decode", ...}    DE: DecodeEngine::decode
//   {"cmd": "release", "request_id"}   DE: drop a failed request's buffer
//   {"cmd": "status"}         read_queue_tokens and read_queue_bytes of the node's storage NIC
//   {"cmd": "quit"}
//
// Threads: the main thread (reads the control socket); kControlWorkers control workers (serve
// requests; one writer at a time on the socket); the UCX worker's progress thread; the store's
// I/O thread; on a DE, the push thread (decode_engine.h).

#include <cstdint>
#include <string>

namespace dualpath::engine {

struct NodeArgs {
  std::string role;  // checked against the driver's setup
  int index = 0;
  uint16_t driver_port = 0;
};

// Returns the process exit code (0 after "quit" or a closed control socket).
int run_node(const NodeArgs& args);

}  // namespace dualpath::engine
