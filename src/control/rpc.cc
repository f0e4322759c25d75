#include "control/rpc.h"

#include <absl/synchronization/mutex.h>
#include <fmt/format.h>

#include <charconv>
#include <mutex>

namespace dualpath::control {

namespace {

int ms(Duration d) {
  return static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(d).count());
}

grpc::StatusCode grpc_code(StatusCode code) {
  switch (code) {
    case StatusCode::kOk:
      return grpc::StatusCode::OK;
    case StatusCode::kInvalidArgument:
      return grpc::StatusCode::INVALID_ARGUMENT;
    case StatusCode::kNotFound:
      return grpc::StatusCode::NOT_FOUND;
    case StatusCode::kAlreadyExists:
      return grpc::StatusCode::ALREADY_EXISTS;
    case StatusCode::kOutOfRange:
      return grpc::StatusCode::OUT_OF_RANGE;
    case StatusCode::kFailedPrecondition:
      return grpc::StatusCode::FAILED_PRECONDITION;
    case StatusCode::kResourceExhausted:
      return grpc::StatusCode::RESOURCE_EXHAUSTED;
    case StatusCode::kCorruption:
      return grpc::StatusCode::DATA_LOSS;
    case StatusCode::kUnavailable:
      return grpc::StatusCode::UNAVAILABLE;
    case StatusCode::kTimedOut:
      return grpc::StatusCode::DEADLINE_EXCEEDED;
    case StatusCode::kAborted:
      return grpc::StatusCode::ABORTED;
    case StatusCode::kUnimplemented:
      return grpc::StatusCode::UNIMPLEMENTED;
    case StatusCode::kIoError:
    case StatusCode::kInProgress:
    case StatusCode::kInternal:
      break;
  }
  return grpc::StatusCode::INTERNAL;
}

StatusCode from_grpc_code(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::OK:
      return StatusCode::kOk;
    case grpc::StatusCode::INVALID_ARGUMENT:
      return StatusCode::kInvalidArgument;
    case grpc::StatusCode::NOT_FOUND:
      return StatusCode::kNotFound;
    case grpc::StatusCode::ALREADY_EXISTS:
      return StatusCode::kAlreadyExists;
    case grpc::StatusCode::OUT_OF_RANGE:
      return StatusCode::kOutOfRange;
    case grpc::StatusCode::FAILED_PRECONDITION:
    case grpc::StatusCode::UNAUTHENTICATED:
    case grpc::StatusCode::PERMISSION_DENIED:
      return StatusCode::kFailedPrecondition;
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
      return StatusCode::kResourceExhausted;
    case grpc::StatusCode::DATA_LOSS:
      return StatusCode::kCorruption;
    case grpc::StatusCode::UNAVAILABLE:
      return StatusCode::kUnavailable;
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return StatusCode::kTimedOut;
    case grpc::StatusCode::CANCELLED:
    case grpc::StatusCode::ABORTED:
      return StatusCode::kAborted;
    case grpc::StatusCode::UNIMPLEMENTED:
      return StatusCode::kUnimplemented;
    default:
      return StatusCode::kInternal;
  }
}

constexpr std::string_view kDetailsPrefix = "dualpath-status:";

// Debian builds Abseil without NDEBUG, which leaves absl::Mutex's deadlock detection on: every
// lock gRPC takes then records an edge, and a stack trace, in a process-wide graph guarded by one
// global lock. That was ~3 % of the scheduler's samples under load (`perf`: GraphCycles::GetId,
// UpdateStackTrace, InsertEdge) and a point where its threads wait on each other. gRPC's locking
// is tested by gRPC; ours does not use absl::Mutex (clang's -Wthread-safety and TSan check it).
void no_abseil_deadlock_graph() {
  static std::once_flag once;
  std::call_once(once, [] { absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore); });
}

}  // namespace

std::shared_ptr<grpc::Channel> make_channel(const std::string& target,
                                            const Security& security,
                                            const Keepalive& keepalive,
                                            int max_receive_bytes) {
  no_abseil_deadlock_graph();
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, ms(keepalive.time));
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, ms(keepalive.timeout));
  args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  args.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  // A peer back from a partition or a restart is reached again within a second: retries 100 ms
  // apart at first, never more than a second. The minimum "backoff" is also gRPC's deadline
  // for one connection attempt (TCP and the TLS handshake): at 100 ms, a handshake over a slow
  // link or on a loaded host never finished, and the attempt was retried forever.
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 5000);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  args.SetMaxReceiveMessageSize(max_receive_bytes);
  args.SetMaxSendMessageSize(kNodeMaxMessageBytes);
  // Every channel is its own connection: a node's calls never queue behind another's.
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  std::shared_ptr<grpc::ChannelCredentials> creds;
  if (security.tls) {
    grpc::SslCredentialsOptions o;
    o.pem_root_certs = security.tls->root_cert_pem;
    o.pem_private_key = security.tls->private_key_pem;
    o.pem_cert_chain = security.tls->cert_chain_pem;
    creds = grpc::SslCredentials(o);
    // Members are checked against the cluster's name, not their host's (credential.h).
    args.SetSslTargetNameOverride(std::string(kClusterTlsName));
  } else {
    creds = grpc::InsecureChannelCredentials();
  }
  return grpc::CreateCustomChannel(target, creds, args);
}

void configure_server(grpc::ServerBuilder& builder,
                      const std::string& address,
                      const Security& security,
                      const Keepalive& keepalive,
                      int max_receive_bytes,
                      int max_threads,
                      int* bound_port) {
  no_abseil_deadlock_graph();
  std::shared_ptr<grpc::ServerCredentials> creds;
  if (security.tls) {
    grpc::SslServerCredentialsOptions o(
        GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
    o.pem_root_certs = security.tls->root_cert_pem;
    o.pem_key_cert_pairs.push_back({security.tls->private_key_pem, security.tls->cert_chain_pem});
    creds = grpc::SslServerCredentials(o);
  } else {
    creds = grpc::InsecureServerCredentials();
  }
  builder.AddListeningPort(address, creds, bound_port);
  // One port, one server: without this, gRPC binds with SO_REUSEPORT, and a second scheduler on
  // a held port would start and split the nodes between two clusters (issue 37).
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.SetMaxReceiveMessageSize(max_receive_bytes);
  builder.SetMaxSendMessageSize(kNodeMaxMessageBytes);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, ms(keepalive.time));
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, ms(keepalive.timeout));
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  // Our peers ping every keepalive_time: that is not abuse (gRPC's default answers pings more
  // often than every 5 minutes with GOAWAY).
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS,
                             ms(keepalive.time) / 2);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PING_STRIKES, 0);
  // A connection that never finishes its handshake (junk, a TLS client without the credential)
  // is dropped after this.
  builder.AddChannelArgument(GRPC_ARG_SERVER_HANDSHAKE_TIMEOUT_MS, 5000);
  grpc::ResourceQuota quota("dualpath-control");
  quota.SetMaxThreads(max_threads);
  builder.SetResourceQuota(quota);
}

void set_timeout(grpc::ClientContext& context, Duration timeout) {
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::duration_cast<std::chrono::system_clock::duration>(timeout));
}

grpc::Status to_grpc(const Status& status) {
  if (status.is_ok()) return grpc::Status::OK;
  return grpc::Status(grpc_code(status.code()), status.message(),
                      fmt::format("{}{}", kDetailsPrefix, static_cast<int>(status.code())));
}

Status from_grpc(const grpc::Status& status, std::string_view what) {
  if (status.ok()) return Status::ok();
  StatusCode code = from_grpc_code(status.error_code());
  const std::string& details = status.error_details();
  // gRPC's own RESOURCE_EXHAUSTED (no details of ours) is a peer whose handler pool is full: busy
  // now, the call may go elsewhere.
  if (status.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED &&
      !details.starts_with(kDetailsPrefix)) {
    code = StatusCode::kUnavailable;
  }
  if (details.starts_with(kDetailsPrefix)) {
    int value = 0;
    const char* begin = details.data() + kDetailsPrefix.size();
    const char* end = details.data() + details.size();
    const auto [ptr, ec] = std::from_chars(begin, end, value);
    if (ec == std::errc() && ptr == end && value > 0 &&
        value <= static_cast<int>(StatusCode::kInternal)) {
      code = static_cast<StatusCode>(value);
    }
  }
  std::string message = status.error_message();
  if (message.empty()) message = fmt::format("gRPC status {}", static_cast<int>(status.error_code()));
  return Status(code, what.empty() ? message : fmt::format("{}: {}", what, message));
}


}  // namespace dualpath::control
