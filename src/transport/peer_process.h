#pragma once
// A UCX peer in another process, for tests and the benchmark: the child side (run_transport_peer)
// and the parent side (PeerProcess), speaking over an OobChannel.
//
// The child creates a Context/Worker with the parent's transport settings, registers one region,
// exchanges addresses and the region descriptor, connects back to the parent, and answers:
//   AM kEchoAm      -> replies kEchoReplyAm with the same header (latency probe)
//   AM kSinkAm      -> counts the bytes; when header byte 0 is 1, replies kEchoReplyAm (an ack)
//   OOB "checksum"  -> FNV-1a of its region (checks that puts landed)
//   OOB "fill <b>"  -> fills its region with byte b (a source for gets)
//   OOB "quit"      -> exits 0 (as does the parent closing the channel)

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "dualpath/result.h"
#include "transport/context.h"
#include "transport/oob_channel.h"
#include "transport/worker.h"

namespace dualpath::transport {

inline constexpr uint16_t kEchoAm = 1;
inline constexpr uint16_t kEchoReplyAm = 2;
inline constexpr uint16_t kSinkAm = 3;

struct PeerOptions {
  uint16_t oob_port = 0;
  std::string transports = "sm,self";
  std::string net_devices;
  uint64_t region_bytes = 64u << 20;
  std::string name = "peer";
};

// The child's main loop. Returns the process exit code.
int run_transport_peer(const PeerOptions& options);

// argv form of PeerOptions, for exec: --peer-port N --peer-tls T --peer-devices D
// --peer-region-bytes B --peer-name N.
std::vector<std::string> peer_arguments(const PeerOptions& options);

// Parent side: spawns `program` with `args` + peer_arguments(), then connects to it. Owns the
// child: destruction asks it to quit and reaps it (SIGKILL after a deadline). Thread-compatible.
class PeerProcess {
 public:
  // `worker` is the parent's; the endpoint and remote region are made on it.
  static Result<std::unique_ptr<PeerProcess>> spawn(Worker& worker,
                                                    const std::string& program,
                                                    const std::vector<std::string>& args,
                                                    PeerOptions options,
                                                    Duration timeout);
  ~PeerProcess();

  Endpoint& endpoint() { return *endpoint_; }
  const RemoteRegion& region() const { return *region_; }
  pid_t pid() const { return pid_; }
  // FNV-1a over the child's whole region.
  Result<uint64_t> region_checksum(Duration timeout);
  Status fill_region(uint8_t value, Duration timeout);
  // SIGKILLs the child now and reaps it.
  void kill_now();
  // Drops the remote region and endpoint (before the worker goes).
  void disconnect();

 private:
  PeerProcess() = default;
  Result<std::string> command(const std::string& text, Duration timeout);

  pid_t pid_ = -1;
  std::unique_ptr<OobChannel> channel_;
  std::unique_ptr<Endpoint> endpoint_;
  std::unique_ptr<RemoteRegion> region_;
};

}  // namespace dualpath::transport
