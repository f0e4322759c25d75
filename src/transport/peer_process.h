#pragma once
// A UCX peer in another process, for tests and the benchmark: the child side (run_transport_peer)
// and the parent side (PeerProcess), speaking over an OobChannel.
//
// The child creates a Context with the parent's transport settings and two workers on it (one
// per traffic class: "model" answers messages, "kv" only receives puts), allocates one region,
// sends both addresses and the region descriptor, connects back to the parent, and answers:
//   AM kEchoAm      -> replies kEchoReplyAm with the same header (latency probe)
//   AM kSinkAm      -> counts the bytes; when header byte 0 is 1, replies kEchoReplyAm (an ack)
//                      with the same header; when it is 2, the ack's header has the data's
//                      FNV-1a (8 bytes) appended (tests check what arrived)
//   OOB "checksum"  -> FNV-1a of its region (checks that puts landed)
//   OOB "fill <b>"  -> fills its region with byte b (a source for gets)
//   OOB "quit"      -> exits 0 (as does the parent closing the channel)

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/subprocess.h"
#include "dualpath/result.h"
#include "transport/context.h"
#include "transport/oob_channel.h"
#include "transport/worker.h"

namespace dualpath::transport {

inline constexpr uint16_t kEchoAm = 1;
inline constexpr uint16_t kEchoReplyAm = 2;
inline constexpr uint16_t kSinkAm = 3;
// The KV lane's progress threads run at this nice value (WorkerOptions::nice).
inline constexpr int kKvWorkerNice = 19;

struct PeerOptions {
  uint16_t oob_port = 0;
  std::string transports = "sm,self";
  std::string net_devices;
  uint64_t region_bytes = 64u << 20;
  std::string name = "peer";
  uint64_t poll_us = 0;  // WorkerOptions::poll_before_sleep of the peer's workers
  // WorkerOptions::poll_while_in_flight of the peer's workers, µs; negative: the default.
  int64_t poll_in_flight_us = -1;
};

// The child's main loop. Returns the process exit code.
int run_transport_peer(const PeerOptions& options);

// argv form of PeerOptions, for exec: --peer-port N --peer-tls T --peer-devices D
// --peer-region-bytes B --peer-name N --peer-poll-us U --peer-busy-us F (poll_in_flight_us).
std::vector<std::string> peer_arguments(const PeerOptions& options);

// Parent side: spawns `program` with `args` + peer_arguments(), then connects to it. Owns the
// child: destruction asks it to quit and reaps it (SIGKILL after a deadline). Thread-compatible.
class PeerProcess {
 public:
  // `worker` is the parent's; the endpoint to the child's model worker and its remote region are
  // made on it. With `kv_worker`, a second endpoint (to the child's KV worker) and region import
  // are made on that one: the per-class lanes.
  static Result<std::unique_ptr<PeerProcess>> spawn(Worker& worker,
                                                    const std::string& program,
                                                    const std::vector<std::string>& args,
                                                    PeerOptions options,
                                                    Duration timeout,
                                                    Worker* kv_worker = nullptr);
  ~PeerProcess();

  Endpoint& endpoint() { return *endpoint_; }
  // The child's worker address and region descriptor, e.g. for a second endpoint per class.
  const std::vector<std::byte>& address() const { return address_; }
  const std::vector<std::byte>& region_descriptor() const { return descriptor_; }
  const RemoteRegion& region() const { return *region_; }
  // The KV lane (only when spawned with a kv_worker).
  Endpoint& kv_endpoint() { return *kv_endpoint_; }
  const RemoteRegion& kv_region() const { return *kv_region_; }
  pid_t pid() const { return process_.pid(); }
  // FNV-1a over the child's whole region.
  Result<uint64_t> region_checksum(Duration timeout);
  Status fill_region(uint8_t value, Duration timeout);
  // SIGSTOPs the child and returns once it is stopped (waitpid WUNTRACED): from then on it
  // makes no progress, so nothing that needs it can complete.
  Status stop();
  // SIGKILLs the child now and reaps it.
  void kill_now();
  // Drops the remote region and endpoint (before the worker goes).
  void disconnect();

 private:
  PeerProcess() = default;
  Result<std::string> command(const std::string& text, Duration timeout);

  Subprocess process_;
  std::unique_ptr<OobChannel> channel_;
  std::vector<std::byte> address_;
  std::vector<std::byte> descriptor_;
  std::unique_ptr<Endpoint> endpoint_;
  std::unique_ptr<RemoteRegion> region_;
  std::unique_ptr<Endpoint> kv_endpoint_;
  std::unique_ptr<RemoteRegion> kv_region_;
};

}  // namespace dualpath::transport
