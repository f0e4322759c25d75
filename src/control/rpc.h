#pragma once
// The control plane's use of gRPC, in one place (issue 31): how a channel and a server are set
// up (mutual TLS or, on loopback only, plain TCP; keepalive that finds a half-open peer;
// message-size limits enforced before a message is allocated), how a dualpath Status crosses the
// wire and back exactly, and deadlines.
//
// Why gRPC (docs/serve.md "Why gRPC"): every call carries a deadline and can be cancelled, and
// both reach the callee; server streaming carries a decode's tokens on the call that asked for
// them; keepalive pings detect a partitioned peer that a TCP socket would wait minutes for;
// message sizes are checked before allocation; mutual TLS is built in. It replaced our own
// length-prefixed JSON framing (engine/control_channel, engine/node_link, transport/OobChannel),
// whose partial writes, unread oversized frames and 64 MiB allocations per connection were bugs.
//
// Functions are thread-safe.

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "control/credential.h"
#include "dualpath/result.h"
#include "dualpath/units.h"

namespace dualpath::control {

// The largest message a node's service takes (a 1M-token prompt as varints is ~5 MB).
inline constexpr int kNodeMaxMessageBytes = 64 << 20;
// The largest message the scheduler's public port takes (registrations, hellos, reports).
inline constexpr int kSchedulerMaxMessageBytes = 1 << 20;
// Metadata key of a node's session token (RegisterReply::session).
inline constexpr const char* kSessionMetadata = "dp-session";

// How fast a dead or partitioned peer is noticed on an idle connection: a ping every
// keepalive_time, the peer dead when its answer takes longer than keepalive_timeout.
struct Keepalive {
  Duration time = std::chrono::milliseconds(1000);
  Duration timeout = std::chrono::milliseconds(2000);
};

// A channel to `target` (HOST:PORT) with the cluster's security, keepalive, a reconnect backoff
// of at most one second (a peer back from a partition is reached again at once) and the
// receive limit.
std::shared_ptr<grpc::Channel> make_channel(const std::string& target,
                                            const Security& security,
                                            const Keepalive& keepalive,
                                            int max_receive_bytes);

// Configures `builder` to listen on `address` (HOST:PORT; port 0: any free one, written to
// `*bound_port` by BuildAndStart) with the cluster's security (TLS servers require and verify
// the client's certificate), keepalive, the receive limit, and at most `max_threads` handler
// threads (a call beyond them is answered RESOURCE_EXHAUSTED at once: backpressure, not a
// queue).
void configure_server(grpc::ServerBuilder& builder,
                      const std::string& address,
                      const Security& security,
                      const Keepalive& keepalive,
                      int max_receive_bytes,
                      int max_threads,
                      int* bound_port);

// Sets `context`'s deadline `timeout` from now.
void set_timeout(grpc::ClientContext& context, Duration timeout);

// A dualpath Status on the wire: the nearest gRPC code, the message, and our exact code in the
// details (so kIoError or kCorruption survive the trip).
grpc::Status to_grpc(const Status& status);
// And back. A status without our details (a transport error, a deadline) maps from its gRPC
// code: UNAVAILABLE -> kUnavailable, DEADLINE_EXCEEDED -> kTimedOut, CANCELLED -> kAborted,
// RESOURCE_EXHAUSTED -> kUnavailable (a peer whose handler pool is full: busy, try elsewhere),
// UNAUTHENTICATED -> kFailedPrecondition.
// `what` ("prefill on prefill node 0") prefixes the message.
Status from_grpc(const grpc::Status& status, std::string_view what);

}  // namespace dualpath::control
