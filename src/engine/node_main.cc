#include "engine/node_main.h"

#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <fmt/format.h>

#include <atomic>
#include <charconv>
#include <condition_variable>
#include <csignal>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include "common/log.h"
#include "engine/control_channel.h"
#include "engine/decode_engine.h"
#include "engine/node_protocol.h"
#include "engine/node_runtime.h"
#include "engine/prefill_engine.h"
#include "engine/wire.h"

namespace dualpath::engine {

namespace {

using Clock = std::chrono::steady_clock;

// How long the registration steps wait for the scheduler's answers.
constexpr Duration kSetupTimeout = std::chrono::seconds(60);
// How often the main loop wakes to check for a signal (a poll timeout, not a synchronisation).
constexpr int kIdlePollMs = 200;
// Between connection attempts.
constexpr auto kRetryPause = std::chrono::milliseconds(200);
// Control workers started with a session. A call that finds none idle starts another (up to
// kMaxControlWorkers): calls block (a prepare waits for buffer space until its deadline, a decode
// runs for its whole reply), and a fixed pool let blocked calls starve the ones that would
// unblock them (a decode behind prepares waiting for its buffers; a `peers` call behind both).
constexpr int kControlWorkers = 16;
constexpr int kMaxControlWorkers = 1024;
// A message that has started arriving must finish within this.
constexpr Duration kNodeFrameTimeout = std::chrono::seconds(30);

// SIGTERM / SIGINT: set by the handler (any thread), read by the main loop.
std::atomic<bool> g_stop{false};  // relaxed loads and stores: a flag polled every kIdlePollMs

extern "C" void on_stop_signal(int) { g_stop.store(true, std::memory_order_relaxed); }

void install_signal_handlers() {
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  ::sigaction(SIGTERM, &sa, nullptr);
  ::sigaction(SIGINT, &sa, nullptr);
  struct sigaction ign {};
  ign.sa_handler = SIG_IGN;
  ::sigaction(SIGPIPE, &ign, nullptr);  // a dead scheduler is a send error, not a signal
}

std::string host_name() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof(buf) - 1) != 0) return "unknown";
  return buf;
}

// Why a session with the scheduler ended.
enum class SessionEnd { kQuit, kLost, kSignal };

// One node's engine and its calls: shared by every session with a scheduler.
class NodeService {
 public:
  NodeService(NodeRuntime& rt, std::unique_ptr<PrefillEngine> pe, std::unique_ptr<DecodeEngine> de)
      : rt_(rt), pe_(std::move(pe)), de_(std::move(de)) {}

  // Answers one call (never throws: the one catch boundary of the node's wire handling).
  // `send_event` sends a message to the scheduler (thread-safe).
  Json handle(const Json& msg, const std::function<void(const Json&)>& send_event) {
    WireReader r(msg, "call");
    const uint64_t call_id = r.u64_or("call_id", 0);
    const std::string cmd = r.str("cmd");
    Result<Json> reply = Status::internal("no reply");
    if (!r.status().is_ok()) {
      reply = r.status();
    } else {
      try {
        reply = dispatch(cmd, msg, send_event);
      } catch (const std::exception& e) {
        reply = Status::internal(fmt::format("{}: '{}' failed with an exception: {}",
                                             NodeId{rt_.setup().role, rt_.setup().index}.name(),
                                             cmd, e.what()));
      }
    }
    Json answer = reply.is_ok() ? ok_reply(std::move(reply).value()) : error_reply(reply.status());
    answer["type"] = "reply";
    answer["call_id"] = call_id;
    return answer;
  }

  LoadReport report() const {
    LoadReport l;
    const auto q = rt_.storage_nic().read_queue.snapshot();
    l.read_queue_tokens = q.tokens;
    l.read_queue_bytes = q.bytes;
    l.dram_used_bytes = rt_.dram().used_bytes();
    l.dram_bytes = rt_.dram().total_bytes();
    for (int e = 0; e < rt_.engines(); ++e) l.hbm_used_bytes.push_back(rt_.hbm(e).used_bytes());
    l.requests = static_cast<int64_t>(rt_.cancels().running() + (de_ ? de_->prepared() : 0));
    return l;
  }

  // Calls that never block (they only flip flags or free buffers): the reader answers them
  // itself, so a cancel or a stop is never queued behind the calls it is meant to end.
  static bool is_immediate(const std::string& cmd) {
    return cmd == "status" || cmd == "cancel" || cmd == "stop" || cmd == "release";
  }

  // The session with the scheduler ended: nobody waits for the answers of what runs now, and its
  // workers must be joined before the node can register again.
  void cancel_all() {
    rt_.cancels().cancel_all();
    if (pe_) pe_->notify_cancel();
  }

  // Periodic housekeeping (the report thread): expired DE buffers, safe quarantined HBM.
  void tick() {
    if (de_) de_->reap_expired();
    if (pe_) pe_->release_quarantined();
  }

 private:
  Result<Json> dispatch(const std::string& cmd,
                        const Json& msg,
                        const std::function<void(const Json&)>& send_event) {
    const NodeId self{rt_.setup().role, rt_.setup().index};
    if (cmd == "status") return report().to_json();
    if (cmd == "peers") {
      WireReader r(msg, "peers call");
      const Json& peers = r.array("peers");
      DP_RETURN_IF_ERROR(r.status());
      DP_RETURN_IF_ERROR(rt_.connect_peers(peers));
      return Json::object();
    }
    if (cmd == "stop") {  // end a decode early; it answers with the tokens so far
      WireReader r(msg, "stop call");
      const uint64_t id = r.u64("request_id");
      DP_RETURN_IF_ERROR(r.status());
      rt_.cancels().stop(id);
      return Json::object();
    }
    if (cmd == "cancel" || cmd == "release") {
      WireReader r(msg, cmd + " call");
      const uint64_t id = r.u64("request_id");
      DP_RETURN_IF_ERROR(r.status());
      if (cmd == "cancel") {
        rt_.cancels().cancel(id);
        if (pe_) pe_->notify_cancel();
      }
      if (de_) DP_RETURN_IF_ERROR(de_->release(id));
      return Json::object();
    }
    if (cmd == "prefill" && pe_) {
      DP_ASSIGN_OR_RETURN(PrefillRequest req, PrefillRequest::from_json(msg));
      DP_ASSIGN_OR_RETURN(PrefillReply reply, pe_->prefill(req));
      return reply.to_json();
    }
    if (cmd == "prepare" && de_) {
      DP_ASSIGN_OR_RETURN(PrepareRequest req, PrepareRequest::from_json(msg));
      DP_ASSIGN_OR_RETURN(PrepareReply reply, de_->prepare(req));
      return reply.to_json();
    }
    if (cmd == "decode" && de_) {
      DP_ASSIGN_OR_RETURN(DecodeRequest req, DecodeRequest::from_json(msg));
      auto sink = [&](int64_t start, std::span<const int32_t> tokens) {
        TokenEvent e{req.request_id, start, {tokens.begin(), tokens.end()}};
        Json j = e.to_json();
        j["type"] = "event";
        j["event"] = "tokens";
        send_event(j);
      };
      DP_ASSIGN_OR_RETURN(DecodeReply reply, de_->decode(req, sink));
      return reply.to_json();
    }
    return Status::invalid_argument(
        fmt::format("{}: unknown or misdirected command '{}'", self.name(), cmd));
  }

  NodeRuntime& rt_;
  std::unique_ptr<PrefillEngine> pe_;
  std::unique_ptr<DecodeEngine> de_;
};

// One connection to a scheduler, from the hello on: serves calls until quit, a lost connection
// or a signal.
SessionEnd serve_session(transport::OobChannel& channel,
                         NodeService& service,
                         const NodeSetup& setup) {
  std::mutex send_mu;             // one writer at a time on the socket
  std::atomic<bool> lost{false};  // relaxed: a flag for the report thread, set once
  auto send = [&](const Json& m) {
    std::lock_guard lock(send_mu);
    Status s = send_json(channel, m, setup.timeout);
    if (!s.is_ok()) lost.store(true, std::memory_order_relaxed);
  };
  std::mutex mu;
  // Two condition variables on mu: `cv` wakes workers for calls, `stop_cv` the report thread.
  // With one, the reader's notify_one could wake the reporter instead of a worker, and a queued
  // call then waited for the next message (a decode that would free the buffers every waiting
  // prepare needed waited out their deadlines).
  std::condition_variable cv;
  std::condition_variable stop_cv;
  std::deque<Json> queue;  // guarded by mu
  bool stopping = false;   // guarded by mu
  std::vector<std::thread> workers;  // started and joined by this (the reader) thread only
  int idle = 0;                      // guarded by mu: workers waiting for a call
  auto worker = [&] {
    for (;;) {
      Json msg;
      {
        std::unique_lock lock(mu);
        ++idle;
        cv.wait(lock, [&] { return stopping || !queue.empty(); });
        --idle;
        if (stopping) return;
        msg = std::move(queue.front());
        queue.pop_front();
      }
      send(service.handle(msg, send));
    }
  };
  for (int i = 0; i < kControlWorkers; ++i) workers.emplace_back(worker);
  std::thread reporter([&] {
    for (;;) {
      {
        std::unique_lock lock(mu);
        if (stop_cv.wait_for(lock, setup.report_interval, [&] { return stopping; })) return;
      }
      service.tick();
      Json report = service.report().to_json();
      report["type"] = "report";
      send(report);
    }
  });
  auto stop = [&] {
    service.cancel_all();  // running calls end now, so that their workers can be joined
    {
      std::lock_guard lock(mu);
      stopping = true;
    }
    cv.notify_all();
    stop_cv.notify_all();
    reporter.join();
    for (auto& w : workers) w.join();
  };

  SessionEnd end = SessionEnd::kLost;
  for (;;) {
    if (g_stop.load(std::memory_order_relaxed)) {
      end = SessionEnd::kSignal;
      break;
    }
    if (lost.load(std::memory_order_relaxed)) break;
    pollfd pfd{channel.fd(), POLLIN, 0};
    const int ready = ::poll(&pfd, 1, kIdlePollMs);
    if (ready == 0 || (ready < 0 && errno == EINTR)) continue;
    auto msg = receive_json(channel, kNodeFrameTimeout);
    if (!msg.is_ok()) {
      if (msg.status().is_corruption()) {
        DP_LOG_WARN("{} node {}: dropped a malformed message: {}", role_name(setup.role),
                    setup.index, msg.status().to_string());
        continue;
      }
      break;  // the scheduler went away
    }
    WireReader r(*msg, "message");
    const std::string type = r.str_or("type", "call");
    if (type == "quit") {
      end = SessionEnd::kQuit;
      break;
    }
    if (type == "call" && NodeService::is_immediate(r.str_or("cmd", ""))) {
      send(service.handle(*msg, send));
      continue;
    }
    bool grow = false;
    {
      std::lock_guard lock(mu);
      queue.push_back(std::move(msg).value());
      grow = idle < static_cast<int>(queue.size()) &&
             static_cast<int>(workers.size()) < kMaxControlWorkers;
    }
    if (grow) workers.emplace_back(worker);
    cv.notify_one();
  }
  stop();
  return end;
}

// Connects, retrying until `timeout`.
Result<std::unique_ptr<transport::OobChannel>> connect_with_retry(const HostPort& hp,
                                                                  Duration timeout) {
  const auto deadline = Clock::now() + timeout;
  Status last;
  for (;;) {
    if (g_stop.load(std::memory_order_relaxed)) return Status::aborted("stopped by a signal");
    auto ch = transport::OobChannel::connect(hp.host, hp.port, std::chrono::seconds(2));
    if (ch.is_ok()) return ch;
    last = ch.status();
    if (Clock::now() + kRetryPause >= deadline) break;
    std::this_thread::sleep_for(kRetryPause);
  }
  return Status::unavailable(fmt::format(
      "no scheduler answered at {}:{} within {:.0f} s ({}); start `dualpath serve` there, or "
      "check --scheduler",
      hp.host, hp.port, to_seconds(timeout), last.message()));
}

// Registration: register -> setup (or refused). kFailedPrecondition carries a refusal; kTimedOut
// a peer that accepted the connection but never answered (not a dualpath scheduler?).
Result<NodeSetup> register_node(transport::OobChannel& channel,
                                const RegisterRequest& req,
                                Duration timeout) {
  DP_RETURN_IF_ERROR(send_json(channel, req.to_json(), timeout), "register");
  auto answered = receive_json(channel, timeout);
  if (!answered.is_ok() && answered.status().is_timed_out()) {
    return Status::timed_out(fmt::format(
        "the scheduler accepted the connection but did not answer the registration within "
        "{:.0f} s; is it a dualpath scheduler (`dualpath serve` prints its address)?",
        to_seconds(timeout)));
  }
  DP_ASSIGN_OR_RETURN(Json answer, std::move(answered));
  WireReader r(answer, "registration answer");
  const std::string type = r.str("type");
  DP_RETURN_IF_ERROR(r.status());
  if (type == "refused") {
    return Status::failed_precondition(r.str_or("error", "the scheduler refused this node"));
  }
  if (type != "setup") {
    return Status::internal(fmt::format("the scheduler answered '{}' to a registration", type));
  }
  const Json& setup = r.object("setup");
  DP_RETURN_IF_ERROR(r.status());
  return NodeSetup::from_json(setup);
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
  auto role = parse_role(args.role);
  auto hp = parse_host_port(args.scheduler);
  if (!role.is_ok() || !hp.is_ok()) {
    DP_LOG_ERROR("{}", (!role.is_ok() ? role.status() : hp.status()).message());
    return 2;
  }
  RegisterRequest reg;
  reg.role = *role;
  reg.index = args.index;
  reg.host = host_name();
  reg.pid = ::getpid();

  std::unique_ptr<NodeRuntime> rt;
  std::unique_ptr<NodeService> service;
  Json current_setup;
  const Duration connect_timeout = args.connect_timeout;
  // The first registration must succeed by connect_timeout; later ones (after losing the
  // scheduler) by reconnect_timeout.
  auto deadline = Clock::now() + connect_timeout;
  for (;;) {
    const auto left = [&] {
      return std::max(Duration(std::chrono::milliseconds(1)),
                      std::chrono::duration_cast<Duration>(deadline - Clock::now()));
    };
    auto channel = connect_with_retry(*hp, left());
    if (!channel.is_ok()) {
      if (channel.status().is_aborted()) return 0;
      DP_LOG_ERROR("{} node: {}", args.role, channel.status().message());
      return 1;
    }
    auto setup = register_node(**channel, reg, std::min(kSetupTimeout, left()));
    if (!setup.is_ok()) {
      if (setup.status().is_failed_precondition()) {
        DP_LOG_ERROR("{} node: the scheduler refused this node: {}", args.role,
                     setup.status().message());
        return 2;
      }
      if (Clock::now() >= deadline) {
        DP_LOG_ERROR("{} node: {}:{}: {}", args.role, hp->host, hp->port, setup.status().message());
        return 1;
      }
      DP_LOG_WARN("{} node: registration failed: {}; retrying", args.role,
                  setup.status().to_string());
      continue;
    }
    if (!args.listen.empty()) setup->net_devices = args.listen;
    const std::string name = NodeId{setup->role, setup->index}.name();
    if (rt == nullptr) {
      auto created = NodeRuntime::create(*setup);
      if (!created.is_ok()) {
        (void)send_json(**channel,
                        Json{{"type", "hello"},
                             {"ok", false},
                             {"code", static_cast<int>(created.status().code())},
                             {"error", created.status().message()}},
                        kSetupTimeout);
        DP_LOG_ERROR("{}: {}", name, created.status().to_string());
        return 1;
      }
      rt = std::move(created).value();
      std::unique_ptr<PrefillEngine> pe;
      std::unique_ptr<DecodeEngine> de;
      if (setup->role == NodeRole::kPrefill) {
        auto e = PrefillEngine::create(*rt);
        if (!e.is_ok()) {
          DP_LOG_ERROR("{}: {}", name, e.status().to_string());
          return 1;
        }
        pe = std::move(e).value();
      } else {
        auto e = DecodeEngine::create(*rt);
        if (!e.is_ok()) {
          DP_LOG_ERROR("{}: {}", name, e.status().to_string());
          return 1;
        }
        de = std::move(e).value();
      }
      service = std::make_unique<NodeService>(*rt, std::move(pe), std::move(de));
      current_setup = setup->to_json();
      reg.index = setup->index;  // re-registrations claim the same index
      reg.resume = true;
    } else if (setup->to_json() != current_setup) {
      DP_LOG_ERROR(
          "{}: the restarted scheduler gives this node another setup (a changed config); "
          "restart the node to take it",
          name);
      return 1;
    }
    Json hello = rt->hello();
    hello["type"] = "hello";
    hello["ok"] = true;
    if (Status s = send_json(**channel, hello, kSetupTimeout); !s.is_ok()) {
      DP_LOG_WARN("{}: {}; reconnecting", name, s.to_string());
      deadline = Clock::now() + args.reconnect_timeout;
      continue;
    }
    DP_LOG_INFO("{}: registered with the scheduler at {}:{}", name, hp->host, hp->port);
    const SessionEnd end = serve_session(**channel, *service, *setup);
    if (end == SessionEnd::kQuit || end == SessionEnd::kSignal) return 0;
    // The scheduler went away: serve_session cancelled what was running.
    DP_LOG_WARN("{}: lost the scheduler at {}:{}; reconnecting for up to {:.0f} s", name, hp->host,
                hp->port, to_seconds(args.reconnect_timeout));
    deadline = Clock::now() + args.reconnect_timeout;
  }
}

}  // namespace dualpath::engine
