#include "engine/node_main.h"

#include <poll.h>

#include <fmt/format.h>

#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include "common/log.h"
#include "engine/control_channel.h"
#include "engine/decode_engine.h"
#include "engine/node_runtime.h"
#include "engine/prefill_engine.h"

namespace dualpath::engine {

namespace {

// How long a node waits for its driver's setup messages.
constexpr Duration kSetupTimeout = std::chrono::seconds(60);
// How often the idle control loop wakes to check the socket (a poll timeout, not a sync).
constexpr int kIdlePollMs = 1000;
// Requests a node serves at once: a turn needs at most two per node (status and one more), so
// this allows several concurrent sessions per node.
constexpr int kControlWorkers = 8;

Status serve(const NodeArgs& args, transport::OobChannel& channel) {
  DP_ASSIGN_OR_RETURN(Json setup_msg, receive_json(channel, kSetupTimeout));
  DP_ASSIGN_OR_RETURN(NodeSetup setup, NodeSetup::from_json(setup_msg));
  if (role_name(setup.role) != args.role || setup.index != args.index) {
    return Status::invalid_argument(fmt::format("node started as {} {} received the setup of {} {}",
                                                args.role, args.index, role_name(setup.role),
                                                setup.index));
  }
  auto runtime = NodeRuntime::create(setup);
  if (!runtime.is_ok()) {
    (void)send_json(channel, error_reply(runtime.status()), setup.timeout);
    return runtime.status();
  }
  NodeRuntime& rt = **runtime;
  std::unique_ptr<PrefillEngine> pe;
  std::unique_ptr<DecodeEngine> de;
  if (setup.role == NodeRole::kPrefill) {
    DP_ASSIGN_OR_RETURN(pe, PrefillEngine::create(rt));
  } else {
    DP_ASSIGN_OR_RETURN(de, DecodeEngine::create(rt));
  }
  DP_RETURN_IF_ERROR(send_json(channel, ok_reply(rt.hello()), setup.timeout));
  DP_ASSIGN_OR_RETURN(Json peers, receive_json(channel, kSetupTimeout));
  Status connected = rt.connect_peers(peers.value("peers", Json::array()));
  DP_RETURN_IF_ERROR(
      send_json(channel, connected.is_ok() ? ok_reply() : error_reply(connected), setup.timeout));
  DP_RETURN_IF_ERROR(connected);

  // Control workers: each request runs on one of them, so a node serves several turns at once
  // (the engines are thread-safe) and a status query is answered while a prefill runs.
  std::mutex mu;
  std::condition_variable cv;
  std::deque<Json> queue;  // guarded by mu
  bool stopping = false;   // guarded by mu
  std::mutex send_mu;      // one writer at a time on the socket
  auto handle = [&](const Json& msg) {
    const std::string cmd = msg.value("cmd", std::string());
    Result<Json> reply =
        Status::invalid_argument(fmt::format("{} node {}: unknown or misdirected command '{}'",
                                             role_name(setup.role), setup.index, cmd));
    if (cmd == "status") {
      const auto q = rt.storage_nic().read_queue.snapshot();
      reply = Json{{"read_queue_tokens", q.tokens}, {"read_queue_bytes", q.bytes}};
    } else if (cmd == "prefill" && pe) {
      reply = pe->prefill(msg);
    } else if (cmd == "prepare" && de) {
      reply = de->prepare(msg);
    } else if (cmd == "decode" && de) {
      reply = de->decode(msg);
    } else if (cmd == "release" && de) {
      Status s = de->release(msg.value("request_id", uint64_t{0}));
      reply = s.is_ok() ? Result<Json>(Json::object()) : Result<Json>(s);
    }
    Json answer = reply.is_ok() ? ok_reply(std::move(reply).value()) : error_reply(reply.status());
    answer["call_id"] = msg.value("call_id", uint64_t{0});
    std::lock_guard lock(send_mu);
    Status sent = send_json(channel, answer, setup.timeout);
    if (!sent.is_ok())
      DP_LOG_WARN("{} node {}: {}", role_name(setup.role), setup.index, sent.to_string());
  };
  std::vector<std::thread> workers;
  for (int i = 0; i < kControlWorkers; ++i) {
    workers.emplace_back([&] {
      for (;;) {
        Json msg;
        {
          std::unique_lock lock(mu);
          cv.wait(lock, [&] { return stopping || !queue.empty(); });
          if (stopping) return;
          msg = std::move(queue.front());
          queue.pop_front();
        }
        handle(msg);
      }
    });
  }
  auto stop_workers = [&] {
    {
      std::lock_guard lock(mu);
      stopping = true;
    }
    cv.notify_all();
    for (auto& w : workers) w.join();
  };

  for (;;) {
    pollfd pfd{channel.fd(), POLLIN, 0};
    const int ready = ::poll(&pfd, 1, kIdlePollMs);
    if (ready == 0 || (ready < 0 && errno == EINTR)) continue;
    auto msg = receive_json(channel, setup.timeout);
    if (!msg.is_ok()) {
      stop_workers();
      if (msg.status().is_unavailable()) return Status::ok();  // the driver went away
      return msg.status();
    }
    if (msg->value("cmd", std::string()) == "quit") {
      stop_workers();
      return Status::ok();
    }
    {
      std::lock_guard lock(mu);
      queue.push_back(std::move(msg).value());
    }
    cv.notify_one();
  }
}

}  // namespace

int run_node(const NodeArgs& args) {
  auto channel = transport::OobChannel::connect("127.0.0.1", args.driver_port, kSetupTimeout);
  if (!channel.is_ok()) {
    DP_LOG_ERROR("{} node {}: cannot reach the driver on port {}: {}", args.role, args.index,
                 args.driver_port, channel.status().to_string());
    return 1;
  }
  Status s = serve(args, **channel);
  if (!s.is_ok()) {
    DP_LOG_ERROR("{} node {}: {}", args.role, args.index, s.to_string());
    return 1;
  }
  return 0;
}

}  // namespace dualpath::engine
