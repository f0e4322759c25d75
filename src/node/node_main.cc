#include "node/node_main.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fmt/format.h>

#include <atomic>
#include <charconv>
#include <csignal>
#include <cstring>
#include <optional>
#include <thread>

#include "common/log.h"
#include "common/mutex.h"
#include "control/control.grpc.pb.h"
#include "control/convert.h"
#include "control/credential.h"
#include "control/report_pacer.h"
#include "control/rpc.h"
#include "engine/decode_engine.h"
#include "engine/node_runtime.h"
#include "engine/prefill_engine.h"
#include "node/node_service.h"

namespace dualpath::node {

namespace {

namespace pb = ::dualpath::control::v1;
using engine::NodeId;
using engine::NodeRole;

// How long the registration steps wait for the scheduler's answers.
constexpr Duration kSetupTimeout = std::chrono::seconds(60);
// Between registration attempts.
constexpr auto kRetryPause = std::chrono::milliseconds(200);
// The most calls the node's service runs at once; one more is refused as busy (the scheduler
// places its turn elsewhere) rather than queued behind calls that wait for buffer space. Far more
// than a node's buffers hold requests for, so a refusal means a scheduler bug or a flood.
constexpr int kControlThreads = 256;
// The data plane is stuck when the UCX progress thread has not answered a ping for this long (or
// five report intervals, if longer): the node then stops renewing its lease.
constexpr Duration kDataPlaneStall = std::chrono::seconds(1);

// SIGTERM / SIGINT: set by the handler (any thread), read by the report thread and the
// registration loop.
std::atomic<bool> g_stop{false};  // relaxed: a flag polled every report interval

extern "C" void on_stop_signal(int) { g_stop.store(true, std::memory_order_relaxed); }

void install_signal_handlers() {
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  ::sigaction(SIGTERM, &sa, nullptr);
  ::sigaction(SIGINT, &sa, nullptr);
  struct sigaction ign {};
  ign.sa_handler = SIG_IGN;
  ::sigaction(SIGPIPE, &ign, nullptr);
}

std::string host_name() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof(buf) - 1) != 0) return "unknown";
  return buf;
}

// The IPv4 address of interface `name` ("eth0"), or an error.
Result<std::string> interface_address(const std::string& name) {
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return Status::io_error("getifaddrs failed");
  std::string found;
  for (ifaddrs* a = list; a != nullptr; a = a->ifa_next) {
    if (a->ifa_addr == nullptr || a->ifa_addr->sa_family != AF_INET || name != a->ifa_name)
      continue;
    char text[INET_ADDRSTRLEN] = {};
    ::inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(a->ifa_addr)->sin_addr, text,
                sizeof(text));
    found = text;
    break;
  }
  ::freeifaddrs(list);
  if (found.empty()) {
    return Status::invalid_argument(fmt::format(
        "--listen '{}' is neither an IPv4 address nor an interface with one on this host; give "
        "the address (or interface) of the network the scheduler and the peers reach this node "
        "on (`ip -4 addr` lists them)",
        name));
  }
  return found;
}

// The interface that holds IPv4 address `ip` ("10.0.0.5" -> "eth0"), or an error.
Result<std::string> interface_of(const std::string& ip) {
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return Status::io_error("getifaddrs failed");
  std::string found;
  for (ifaddrs* a = list; a != nullptr; a = a->ifa_next) {
    if (a->ifa_addr == nullptr || a->ifa_addr->sa_family != AF_INET) continue;
    char text[INET_ADDRSTRLEN] = {};
    ::inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(a->ifa_addr)->sin_addr, text,
                sizeof(text));
    if (ip == text) {
      found = a->ifa_name;
      break;
    }
  }
  ::freeifaddrs(list);
  if (found.empty()) {
    return Status::invalid_argument(fmt::format(
        "--listen {}: no interface of this host has that address; give one of its addresses or "
        "interfaces (`ip -4 addr` lists them)",
        ip));
  }
  return found;
}

// The local address of the route to host:port (a UDP socket "connected" there sends nothing).
Result<std::string> address_towards(const HostPort& hp) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* res = nullptr;
  const std::string port = std::to_string(hp.port);
  if (::getaddrinfo(hp.host.c_str(), port.c_str(), &hints, &res) != 0 || res == nullptr) {
    return Status::invalid_argument(fmt::format(
        "--scheduler '{}:{}': cannot resolve the host; give its address", hp.host, hp.port));
  }
  const int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  Status st;
  std::string out;
  if (fd < 0 || ::connect(fd, res->ai_addr, res->ai_addrlen) != 0) {
    st = Status::unavailable(fmt::format("no route to the scheduler at {}:{}: {}", hp.host,
                                         hp.port, std::strerror(errno)));
  } else {
    sockaddr_in local{};
    socklen_t len = sizeof(local);
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len);
    char text[INET_ADDRSTRLEN] = {};
    ::inet_ntop(AF_INET, &local.sin_addr, text, sizeof(text));
    out = text;
  }
  if (fd >= 0) ::close(fd);
  ::freeaddrinfo(res);
  if (!st.is_ok()) return st;
  return out;
}

// Why a session with the scheduler ended.
enum class SessionEnd { kQuit, kLost, kSignal };

// Whether the node's data plane moves: a no-op posted to the UCX progress thread every report
// interval must have run by the next look, within kDataPlaneStall.
class DataPlaneProbe {
 public:
  explicit DataPlaneProbe(engine::NodeRuntime& rt) : rt_(rt) {}
  // Posts a ping; true while the last answered ping is recent enough.
  bool healthy(Duration stall) {
    const Duration now = rt_.clock().now();
    rt_.worker().post([this, now] { answered_ns_.store(now.count(), std::memory_order_relaxed); });
    if (first_ == Duration(0)) first_ = now;
    const Duration answered(answered_ns_.load(std::memory_order_relaxed));
    const Duration since = answered.count() > 0 ? answered : first_;
    return now - since <= stall;
  }

 private:
  engine::NodeRuntime& rt_;
  Duration first_{0};                  // the report thread's only
  std::atomic<int64_t> answered_ns_{0};  // relaxed: a timestamp, read one interval later
};

// One session with the scheduler, after registration: the hello, then reports (the lease) from
// the report thread while this thread reads the scheduler's messages, until Quit, a lost stream
// or a signal.
SessionEnd serve_session(pb::Scheduler::Stub& stub,
                         const std::string& session,
                         NodeService& service,
                         engine::NodeRuntime& rt,
                         const NodeId& self) {
  grpc::ClientContext ctx;
  ctx.AddMetadata(control::kSessionMetadata, session);
  auto stream = stub.Session(&ctx);
  pb::SessionMessage hello;
  *hello.mutable_hello() = control::to_proto(rt.hello());
  if (!stream->Write(hello)) {
    (void)stream->Finish();
    return SessionEnd::kLost;
  }
  // Joined comes once the peers know this node; a scheduler that never says it is cut off.
  std::atomic<bool> joined{false};  // release by this thread, acquire by the reporter
  Mutex mu;
  CondVar cv;
  bool done = false;  // guarded by mu (a plain local: the analysis cannot name it)
  std::thread reporter([&] {
    DataPlaneProbe probe(rt);
    const Duration interval = rt.setup().report_interval;
    const Duration stall = std::max(kDataPlaneStall, 5 * interval);
    const Duration join_deadline = rt.clock().now() + kSetupTimeout;
    bool stuck = false;
    // The last report sent: an unchanged one waits for the heartbeat.
    engine::LoadReport sent;
    control::ReportPacer pacer(rt.setup().heartbeat);
    MutexLock lock(mu);
    for (;;) {
      (void)rt.clock().wait_until(cv, lock, rt.clock().now() + interval);
      if (done) return;
      if (g_stop.load(std::memory_order_relaxed)) {
        ctx.TryCancel();  // ends the read below
        return;
      }
      if (!joined.load(std::memory_order_acquire)) {
        if (rt.clock().now() > join_deadline) {
          DP_LOG_WARN("{}: the scheduler did not admit this node within {:.0f} s", self.name(),
                      to_seconds(kSetupTimeout));
          ctx.TryCancel();
          return;
        }
        continue;
      }
      lock.unlock();
      service.tick();
      const bool healthy = probe.healthy(stall);
      if (healthy != !stuck) {
        stuck = !healthy;
        if (stuck) {
          DP_LOG_ERROR("{}: the UCX progress thread has not answered for over {:.1f} s; the "
                       "node stops renewing its lease",
                       self.name(), to_seconds(stall));
        } else {
          DP_LOG_INFO("{}: the data plane answers again", self.name());
        }
      }
      bool ok = true;
      if (healthy) {
        engine::LoadReport report = service.report();
        const Duration now = rt.clock().now();
        if (pacer.due(!(report == sent), now)) {
          pb::SessionMessage m;
          *m.mutable_report() = control::to_proto(report);
          ok = stream->Write(m);
          sent = std::move(report);
          pacer.sent(now);
        }
      }
      lock.lock();
      if (!ok) return;  // the read below sees the stream end too
    }
  });
  SessionEnd end = SessionEnd::kLost;
  pb::SchedulerMessage m;
  while (stream->Read(&m)) {
    if (m.has_joined()) {
      joined.store(true, std::memory_order_release);
      DP_LOG_INFO("{}: joined; serving", self.name());
    } else if (m.has_quit()) {
      end = SessionEnd::kQuit;
      break;
    }
  }
  if (g_stop.load(std::memory_order_relaxed)) end = SessionEnd::kSignal;
  {
    MutexLock lock(mu);
    done = true;
  }
  cv.notify_all();
  reporter.join();
  ctx.TryCancel();
  (void)stream->Finish();
  return end;
}

// A registration's outcome: the setup and session, or why not. kFailedPrecondition /
// kAlreadyExists / kInvalidArgument: the scheduler refused (exit 2); others: try again.
struct Registered {
  engine::NodeSetup setup;
  std::string session;
};

Result<Registered> register_node(pb::Scheduler::Stub& stub,
                                 const pb::RegisterRequest& req,
                                 Duration timeout) {
  grpc::ClientContext ctx;
  control::set_timeout(ctx, timeout);
  pb::RegisterReply reply;
  const grpc::Status s = stub.Register(&ctx, req, &reply);
  if (!s.ok()) return control::from_grpc(s, "");
  Registered r;
  DP_ASSIGN_OR_RETURN(r.setup, control::from_proto(reply.setup()));
  r.session = reply.session();
  if (r.session.empty()) return Status::internal("the scheduler's answer has no session");
  return r;
}

// Tells the scheduler why this node cannot start, so that it frees the slot at once and logs the
// reason next to its own; best effort.
void report_start_failure(pb::Scheduler::Stub& stub, const std::string& session, const Status& why) {
  grpc::ClientContext ctx;
  ctx.AddMetadata(control::kSessionMetadata, session);
  control::set_timeout(ctx, std::chrono::seconds(5));
  auto stream = stub.Session(&ctx);
  pb::SessionMessage m;
  m.mutable_failed()->set_code(static_cast<int>(why.code()));
  m.mutable_failed()->set_error(why.message());
  (void)stream->Write(m);
  (void)stream->WritesDone();
  (void)stream->Finish();
}

bool is_refusal(const Status& s) {
  return s.is_failed_precondition() || s.is_already_exists() || s.is_invalid_argument();
}

}  // namespace

Result<HostPort> parse_host_port(const std::string& text) {
  const size_t colon = text.rfind(':');
  auto bad = [&] {
    return Status::invalid_argument(fmt::format(
        "--scheduler '{}' is not HOST:PORT; give the address `dualpath serve` prints, e.g. "
        "127.0.0.1:8100",
        text));
  };
  if (colon == std::string::npos || colon == 0 || colon + 1 == text.size()) return bad();
  int port = 0;
  const auto [end, ec] = std::from_chars(text.data() + colon + 1, text.data() + text.size(), port);
  if (ec != std::errc() || end != text.data() + text.size() || port < 1 || port > 65535)
    return bad();
  return HostPort{text.substr(0, colon), static_cast<uint16_t>(port)};
}

int run_node(const NodeArgs& args) {
  install_signal_handlers();
  auto role = engine::parse_role(args.role);
  auto hp = parse_host_port(args.scheduler);
  if (!role.is_ok() || !hp.is_ok()) {
    DP_LOG_ERROR("{}", (!role.is_ok() ? role.status() : hp.status()).message());
    return 2;
  }
  const std::string who = fmt::format("{} node", args.role);
  // Transport security: the cluster credential's mutual TLS, or plain TCP on this host only.
  control::Security security;
  if (!args.cluster_key.empty()) {
    auto cred = control::read_credential(args.cluster_key);
    if (!cred.is_ok()) {
      DP_LOG_ERROR("{}: {}", who, cred.status().message());
      return 2;
    }
    auto id = control::mint_identity(*cred, who);
    if (!id.is_ok()) {
      DP_LOG_ERROR("{}: {}", who, id.status().message());
      return 1;
    }
    security.tls = std::move(id).value();
  } else if (!control::is_loopback_host(hp->host)) {
    DP_LOG_ERROR(
        "{}: the scheduler {} is not on this host, and the control plane crosses hosts only "
        "with the cluster credential: pass --cluster-key FILE (the file given to `dualpath "
        "serve --cluster-key`; `dualpath keygen --out FILE` makes one)",
        who, args.scheduler);
    return 2;
  }
  // The Node service listens where the scheduler reaches this node; UCX uses the interface
  // (by name: UCX_NET_DEVICES takes devices, not addresses).
  std::string bind_host;
  std::string ucx_device = args.listen;
  if (!args.listen.empty()) {
    in_addr a{};
    if (::inet_pton(AF_INET, args.listen.c_str(), &a) == 1) {
      bind_host = args.listen;
      auto dev = interface_of(args.listen);
      if (!dev.is_ok()) {
        DP_LOG_ERROR("{}: {}", who, dev.status().message());
        return 2;
      }
      ucx_device = *dev;
    } else {
      auto ip = interface_address(args.listen);
      if (!ip.is_ok()) {
        DP_LOG_ERROR("{}: {}", who, ip.status().message());
        return 2;
      }
      bind_host = *ip;
    }
  } else {
    auto ip = address_towards(*hp);
    if (!ip.is_ok()) {
      DP_LOG_ERROR("{}: {}", who, ip.status().message());
      return 1;
    }
    bind_host = *ip;
  }

  // Destroyed in reverse order of declaration: the server (its handlers use the engines), then
  // the service (it owns the engines), then the runtime the engines use.
  std::unique_ptr<engine::NodeRuntime> rt;
  // The Node service first: its address goes in the registration. It answers "starting" until
  // the runtime exists.
  auto service = std::make_unique<NodeService>();
  grpc::ServerBuilder builder;
  int port = 0;
  control::configure_server(builder, fmt::format("{}:{}", bind_host, args.control_port), security,
                            {}, control::kNodeMaxMessageBytes, kControlThreads, &port);
  builder.RegisterService(service.get());
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || port == 0) {
    DP_LOG_ERROR("{}: cannot listen on {}:{} for the scheduler's calls; free the port or give "
                 "another --control-port or --listen",
                 who, bind_host, args.control_port);
    return 1;
  }
  struct StopServer {
    StopServer(std::unique_ptr<grpc::Server>& s, NodeService& n) : server(s), service(n) {}
    StopServer(const StopServer&) = delete;
    StopServer& operator=(const StopServer&) = delete;
    std::unique_ptr<grpc::Server>& server;
    NodeService& service;
    ~StopServer() {
      service.cancel_all();
      server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
    }
  };
  engine::NodeSetup current_setup;
  pb::RegisterRequest reg;
  reg.set_role(control::to_proto(*role));
  reg.set_index(args.index);
  reg.set_protocol(control::kProtocolVersion);
  reg.set_host(host_name());
  reg.set_pid(::getpid());
  reg.set_control_address(fmt::format("{}:{}", bind_host, port));
  auto channel = control::make_channel(args.scheduler, security, {},
                                       control::kSchedulerMaxMessageBytes);
  auto stub = pb::Scheduler::NewStub(channel);
  // The first registration must succeed by connect_timeout; later ones (after losing the
  // scheduler) by reconnect_timeout.
  const Clock& clock = real_clock();
  Duration deadline = clock.now() + args.connect_timeout;
  Status last;
  std::optional<StopServer> stop_server;
  for (;;) {
    if (g_stop.load(std::memory_order_relaxed)) return 0;
    const Duration left = deadline - clock.now();
    if (left <= Duration(0)) {
      const bool tls_hint = last.message().find("andshake") != std::string::npos ||
                            last.message().find("SSL") != std::string::npos ||
                            last.message().find("ocket closed") != std::string::npos;
      DP_LOG_ERROR(
          "{}: no scheduler answered at {} within {:.0f} s ({}); start `dualpath serve` there, "
          "or check --scheduler{}",
          who, args.scheduler, to_seconds(args.connect_timeout), last.message(),
          tls_hint ? ", and that --cluster-key is the scheduler's credential" : "");
      return 1;
    }
    auto got = register_node(*stub, reg, std::min(kSetupTimeout, left));
    if (!got.is_ok()) {
      last = got.status();
      if (is_refusal(last)) {
        DP_LOG_ERROR("{}: the scheduler refused this node: {}", who, last.message());
        return 2;
      }
      if (!last.is_unavailable() && !last.is_timed_out()) {
        DP_LOG_WARN("{}: registration failed: {}; retrying", who, last.to_string());
      }
      std::this_thread::sleep_for(kRetryPause);
      continue;
    }
    engine::NodeSetup setup = got->setup;
    if (!ucx_device.empty()) setup.net_devices = ucx_device;
    const NodeId self{setup.role, setup.index};
    if (rt == nullptr) {
      auto fail = [&](const Status& why) {
        DP_LOG_ERROR("{}: {}", self.name(), why.to_string());
        report_start_failure(*stub, got->session, why);
        return 1;
      };
      auto created = engine::NodeRuntime::create(setup);
      if (!created.is_ok()) {
        // A device UCX does not know is this node's --listen when it gave one.
        return fail(args.listen.empty()
                        ? created.status()
                        : created.status().with_context(fmt::format(
                              "--listen {} (UCX device {})", args.listen, ucx_device)));
      }
      rt = std::move(created).value();
      std::unique_ptr<engine::PrefillEngine> pe;
      std::unique_ptr<engine::DecodeEngine> de;
      if (setup.role == NodeRole::kPrefill) {
        auto e = engine::PrefillEngine::create(*rt);
        if (!e.is_ok()) return fail(e.status());
        pe = std::move(e).value();
      } else {
        auto e = engine::DecodeEngine::create(*rt);
        if (!e.is_ok()) return fail(e.status());
        de = std::move(e).value();
      }
      service->install(*rt, std::move(pe), std::move(de));
      stop_server.emplace(server, *service);
      current_setup = setup;
      reg.set_index(setup.index);  // re-registrations claim the same index
      reg.set_resume(true);
    } else if (!(setup == current_setup)) {
      DP_LOG_ERROR(
          "{}: the restarted scheduler gives this node another setup (a changed config); "
          "restart the node to take it",
          self.name());
      return 1;
    }
    service->set_session(got->session);
    DP_LOG_INFO("{}: registered with the scheduler at {} (its calls come to {})", self.name(),
                args.scheduler, reg.control_address());
    const SessionEnd end = serve_session(*stub, got->session, *service, *rt, self);
    if (end == SessionEnd::kQuit || end == SessionEnd::kSignal) return 0;
    // The scheduler went away (or cut this node off): nobody waits for what runs.
    service->cancel_all();
    DP_LOG_WARN("{}: lost the scheduler at {}; reconnecting for up to {:.0f} s", self.name(),
                args.scheduler, to_seconds(args.reconnect_timeout));
    deadline = clock.now() + args.reconnect_timeout;
  }
}

}  // namespace dualpath::node
