#include "engine/local_cluster.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include <chrono>
#include <cstdlib>
#include <algorithm>
#include <cstring>
#include <filesystem>
#include <thread>

#include "common/log.h"
#include "sched/path_choice.h"


namespace dualpath::engine {

namespace {

using Clock = std::chrono::steady_clock;

// How long a node process may take from spawn to its hello (model weights, UCX init).
constexpr Duration kStartTimeout = std::chrono::seconds(60);
// Accept in slices this long, checking between them whether the child has already exited.
constexpr Duration kAcceptSlice = std::chrono::milliseconds(200);
// How long a turn's failure waits for its decode node's exit to become visible (waitpid).
constexpr auto kReapGrace = std::chrono::seconds(2);
// A node that does not exit this long after "quit" is killed.
constexpr auto kQuitGrace = std::chrono::seconds(5);

}  // namespace


Status LocalCluster::spawn(NodeProcess& node,
                           const NodeSetup& setup,
                           const ClusterOptions& options) {
  SpawnOptions spawn;
  spawn.argv = {options.node_program};
  spawn.argv.insert(spawn.argv.end(), options.node_args.begin(), options.node_args.end());
  for (const std::string& a :
       {std::string("--role"), node.role, std::string("--index"), std::to_string(node.index),
        std::string("--driver-port"), std::to_string(listener_->port())}) {
    spawn.argv.push_back(a);
  }
  spawn.die_with_parent = true;  // a killed driver leaves no orphans
  auto child = Subprocess::spawn(spawn);
  if (!child.is_ok()) {
    return child.status().with_context(
        fmt::format("cannot start the {} node '{}'", node.role, options.node_program));
  }
  node.process = std::move(child).value();
  const auto deadline = Clock::now() + kStartTimeout;
  for (;;) {
    auto channel = listener_->accept(kAcceptSlice);
    if (channel.is_ok()) {
      node.channel = std::move(channel).value();
      break;
    }
    if (!channel.status().is_timed_out()) return channel.status();
    if (auto status = node.process.poll()) {
      return Status::unavailable(
          fmt::format("the {} node {} exited ({}) before connecting; its stderr says why",
                      node.role, node.index, Subprocess::describe(*status)));
    }
    if (Clock::now() > deadline) {
      return Status::timed_out(
          fmt::format("the {} node {} did not connect within {} s", node.role, node.index,
                      std::chrono::duration_cast<std::chrono::seconds>(kStartTimeout).count()));
    }
  }
  return send_json(*node.channel, setup.to_json(), config_.request_timeout);
}

Result<std::unique_ptr<LocalCluster>> LocalCluster::start(ClusterOptions options) {
  std::unique_ptr<LocalCluster> c(new LocalCluster());
  c->config_ = options.config;
  EngineConfig& cfg = c->config_;
  if (cfg.data_paths.empty()) {
    const char* base = std::getenv("TMPDIR");
    std::string pattern = std::string(base ? base : "/tmp") + "/dualpath_live.XXXXXX";
    if (::mkdtemp(pattern.data()) == nullptr) {
      return Status::io_error(fmt::format("cannot make a temporary store directory {}: {}", pattern,
                                          std::strerror(errno)));
    }
    c->temp_dir_ = pattern;
    cfg.data_paths = {pattern};
  }
  DP_RETURN_IF_ERROR(cfg.validate());
  DP_ASSIGN_OR_RETURN(ModelKvShape shape, model_kv_shape(cfg));

  store::FileStoreOptions so;
  so.data_paths = cfg.data_paths;
  so.model = kv_fingerprint(cfg.backend_spec());
  so.layout = store::BlockLayout{shape.layers, cfg.block_tokens, shape.bytes_per_token_per_layer};
  DP_ASSIGN_OR_RETURN(c->store_, store::FileStore::open(so));

  DP_ASSIGN_OR_RETURN(c->listener_, transport::OobListener::listen("127.0.0.1"));
  c->nodes_.resize(1 + cfg.decode_nodes);
  c->pending_read_tokens_.assign(c->nodes_.size(), 0);
  c->pe_engine_prefills_.assign(static_cast<size_t>(cfg.engines_per_node), 0);
  Json hellos = Json::array();
  for (size_t i = 0; i < c->nodes_.size(); ++i) {
    NodeProcess& node = c->nodes_[i];
    NodeSetup setup;
    setup.role = i == 0 ? NodeRole::kPrefill : NodeRole::kDecode;
    setup.index = i == 0 ? 0 : static_cast<int>(i - 1);
    node.role = std::string(role_name(setup.role));
    node.index = setup.index;
    setup.backend = cfg.backend_spec();
    setup.block_tokens = cfg.block_tokens;
    setup.data_paths = cfg.data_paths;
    // Processes sharing the data paths split the capacity (file_store.h).
    setup.store_capacity_bytes = cfg.store_capacity_bytes / static_cast<int64_t>(c->nodes_.size());
    setup.dram_buffer_bytes = i == 0 ? cfg.pe_dram_buffer_bytes : cfg.de_dram_buffer_bytes;
    setup.hbm_bytes = cfg.hbm_bytes;
    setup.pipeline_depth = cfg.pipeline_depth;
    setup.timeout = cfg.request_timeout;
    setup.transports = cfg.transport.context.transports;
    setup.net_devices = cfg.transport.context.net_devices;
    setup.poll_us = cfg.transport.poll_us;
    setup.poll_in_flight_us = cfg.transport.poll_in_flight_us;
    setup.snic_gbps = cfg.emulated_snic_gbps();
    setup.compute_slots = i == 0 ? cfg.compute_slots() : 0;
    setup.engines = cfg.engines_per_node;
    DP_RETURN_IF_ERROR(c->spawn(node, setup, options));
    auto hello = receive_json(*node.channel, kStartTimeout);
    if (!hello.is_ok())
      return hello.status().with_context(fmt::format("{} node {}", node.role, node.index));
    if (!hello->value("ok", false)) {
      return Status(static_cast<StatusCode>(hello->value("code", 13)),
                    fmt::format("{} node {}: {}", node.role, node.index,
                                hello->value("error", std::string())));
    }
    hellos.push_back(*hello);
  }
  for (NodeProcess& node : c->nodes_) {
    DP_RETURN_IF_ERROR(send_json(*node.channel, Json{{"peers", hellos}}, cfg.request_timeout));
  }
  for (NodeProcess& node : c->nodes_) {
    auto reply = receive_json(*node.channel, cfg.request_timeout);
    if (!reply.is_ok())
      return reply.status().with_context(fmt::format("{} node {}", node.role, node.index));
    if (!reply->value("ok", false)) {
      return Status::unavailable(fmt::format("{} node {} cannot connect to its peers: {}",
                                             node.role, node.index,
                                             reply->value("error", std::string())));
    }
  }
  for (NodeProcess& node : c->nodes_) {
    node.link = std::make_unique<NodeLink>(std::move(node.channel),
                                           fmt::format("{} node {}", node.role, node.index));
  }
  return c;
}

LocalCluster::~LocalCluster() {
  for (NodeProcess& node : nodes_) {
    if (node.link) (void)node.link->send(Json{{"cmd", "quit"}}, std::chrono::seconds(1));
    if (node.channel) {
      (void)send_json(*node.channel, Json{{"cmd", "quit"}}, std::chrono::seconds(1));
    }
    // Closing the socket also tells a node to exit, should it miss the message.
    node.link.reset();
    node.channel.reset();
  }
  const auto deadline = Clock::now() + kQuitGrace;
  for (NodeProcess& node : nodes_) {
    // Reap with a deadline; the nodes exit on "quit" or on the closed socket.
    const auto left = std::max(Duration(0), std::chrono::duration_cast<Duration>(
                                                deadline - Clock::now()));
    if (!node.process.wait_for(left).is_ok()) node.process.stop(SIGKILL, Duration(0));
  }
  store_.reset();
  if (!temp_dir_.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(temp_dir_, ec);
  }
}

Duration LocalCluster::call_timeout() const {
  // A node answers within its own request deadline (plus per-operation deadlines on the DE);
  // the driver waits longer, so a slow node reports its own error instead of a driver timeout.
  return 2 * config_.request_timeout + std::chrono::seconds(5);
}

Result<int64_t> LocalCluster::read_queue_tokens(NodeProcess& node) {
  DP_ASSIGN_OR_RETURN(Json reply, node.link->call(Json{{"cmd", "status"}}, call_timeout()));
  return reply.value("read_queue_tokens", int64_t{0});
}

void LocalCluster::place_session(int64_t session, TurnRequest& request) const {
  const int64_t d = decode_nodes();
  request.de_index = static_cast<int>(session % d);
  request.de_engine = static_cast<int>((session / d) % engines_per_node());
}

bool LocalCluster::decode_node_alive(int index) {
  NodeProcess& node = nodes_.at(1 + index);
  std::lock_guard lock(pids_mu_);
  return node.process.running();
}

Result<TurnResult> LocalCluster::run_turn(const TurnRequest& request) {
  if (request.de_index < 0 || request.de_index >= decode_nodes()) {
    return Status::invalid_argument(fmt::format("decode node {} does not exist ({} running)",
                                                request.de_index, decode_nodes()));
  }
  if (request.de_engine < 0 || request.de_engine >= engines_per_node()) {
    return Status::invalid_argument(fmt::format("decode engine {} does not exist ({} per node)",
                                                request.de_engine, engines_per_node()));
  }
  if (!decode_node_alive(request.de_index)) {
    return Status::unavailable(fmt::format(
        "decode node {} has exited; send its sessions to another decode node", request.de_index));
  }
  auto result = run_turn_on(request, request.de_index, /*force_pe_path=*/false);
  if (result.is_ok()) return result;
  if (result.status().is_not_found() && request.path != sched::PathRequest(sched::ReadPath::kRecompute)) {
    // A hit block vanished between the prefix match and the read (evicted, or quarantined as
    // corrupt): the turn is recomputed, never served from wrong bytes.
    DP_LOG_WARN("{}; recomputing the turn", result.status().to_string());
    TurnRequest retry = request;
    retry.path = sched::PathRequest(sched::ReadPath::kRecompute);
    retry.after_prepare = nullptr;
    return run_turn_on(retry, request.de_index, /*force_pe_path=*/false);
  }
  // A dead node's socket and UCX endpoints fail before the kernel has finished tearing the
  // process down (large mappings), so give a failing node a moment to be reaped.
  const auto reap_deadline = Clock::now() + kReapGrace;
  while (decode_node_alive(request.de_index)) {
    if (Clock::now() > reap_deadline) return result;  // alive: the error is the turn's own
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  // The decode node died during the turn: fail over to the PE read path on another one.
  for (int i = 1; i < decode_nodes(); ++i) {
    const int other = (request.de_index + i) % decode_nodes();
    if (!decode_node_alive(other)) continue;
    DP_LOG_WARN(
        "decode node {} died during a turn ({}); retrying on decode node {} by the PE "
        "read path",
        request.de_index, result.status().to_string(), other);
    TurnRequest retry = request;
    retry.after_prepare = nullptr;
    auto again = run_turn_on(retry, other, /*force_pe_path=*/true);
    if (again.is_ok()) again->failed_over_from = request.de_index;
    return again;
  }
  return result.status().with_context(
      fmt::format("decode node {} died and no other decode node is alive", request.de_index));
}

Result<TurnResult> LocalCluster::run_turn_on(const TurnRequest& request,
                                             int de_index,
                                             bool force_pe_path) {
  const auto start = Clock::now();
  NodeProcess& pe = nodes_[0];
  NodeProcess& de = nodes_[1 + de_index];
  const auto n = static_cast<int64_t>(request.tokens.size());
  const int64_t bt = config_.block_tokens;
  TurnResult result;
  result.prompt_tokens = n;

  sched::ReadPath path = sched::ReadPath::kRecompute;
  int64_t hit = 0;
  if (request.path == sched::PathRequest(sched::ReadPath::kOracle)) {
    if (config_.compute != "modeled") {
      return Status::invalid_argument(
          "the oracle path needs live.compute = \"modeled\": it loads no KV, and the CPU model "
          "cannot compute without it");
    }
    path = sched::ReadPath::kOracle;
    hit = std::clamp<int64_t>(request.oracle_hit_tokens / bt * bt, 0, ((n - 1) / bt) * bt);
  } else if (request.path != sched::PathRequest(sched::ReadPath::kRecompute)) {
    hit = store_->longest_cached_prefix(request.tokens).hit_tokens(store_->layout());
    hit = std::min(hit, ((n - 1) / bt) * bt);  // leave at least one new token
    if (request.path == sched::PathRequest(sched::ReadPath::kPe)) path = sched::ReadPath::kPe;
    if (request.path == sched::PathRequest(sched::ReadPath::kDe)) path = sched::ReadPath::kDe;
    if (request.path == sched::PathRequest()) {
      // The read queue of a node, as the scheduler sees it: the reads in flight on its storage
      // NIC (the node's gauge) or, when larger, the hit tokens of the turns this driver has sent
      // to it whose reads have not finished. Without the second term, turns that start
      // together would all see empty gauges and tie.
      std::lock_guard lock(path_mu_);
      DP_ASSIGN_OR_RETURN(int64_t pe_gauge, read_queue_tokens(pe));
      DP_ASSIGN_OR_RETURN(int64_t de_gauge, read_queue_tokens(de));
      const int64_t pe_q = std::max(pe_gauge, pending_read_tokens_[0]);
      const int64_t de_q = std::max(de_gauge, pending_read_tokens_[1 + de_index]);
      path = sched::choose_read_path(pe_q, de_q) == sched::ReadPath::kPe ? sched::ReadPath::kPe
                                                                         : sched::ReadPath::kDe;
      DP_LOG_DEBUG("read queues: PE {} tokens, decode node {} {} tokens -> {} path", pe_q, de_index,
                   de_q, sched::read_path_name(path));
    }
  }
  if (force_pe_path && path == sched::ReadPath::kDe) path = sched::ReadPath::kPe;
  result.hit_tokens = hit;
  result.path = path;
  result.de_index = de_index;
  // The node that reads this turn's hits carries them in its pending reads until they are read.
  const size_t reader = path == sched::ReadPath::kDe ? 1 + de_index : 0;
  const int64_t read_tokens =
      path == sched::ReadPath::kRecompute || path == sched::ReadPath::kOracle ? 0 : hit;
  {
    std::lock_guard lock(path_mu_);
    pending_read_tokens_[reader] += read_tokens;
  }
  bool read_done = false;
  auto finish_read = [&] {
    if (read_done) return;
    read_done = true;
    std::lock_guard lock(path_mu_);
    pending_read_tokens_[reader] -= read_tokens;
  };
  struct OnExit {
    std::function<void()> fn;
    ~OnExit() { fn(); }
  } read_guard{finish_read};

  const uint64_t id = next_request_id_.fetch_add(1, std::memory_order_relaxed);
  PrepareRequest prepare{id,
                         request.tokens,
                         hit,
                         request.gen_tokens,
                         path == sched::ReadPath::kDe,
                         path == sched::ReadPath::kOracle,
                         request.de_engine};
  result.de_engine = request.de_engine;
  Json prep_msg = prepare.to_json();
  prep_msg["cmd"] = "prepare";
  DP_ASSIGN_OR_RETURN(Json prepared, de.link->call(prep_msg, call_timeout()));
  if (path == sched::ReadPath::kDe) finish_read();
  result.bytes += HopBytes::from_json(prepared.value("bytes", Json::object()));

  auto fail = [&](Status s) {
    (void)de.link->call(Json{{"cmd", "release"}, {"request_id", id}}, config_.request_timeout);
    return s.with_context(
        fmt::format("turn of request {} ({} path, decode node {})", id, sched::read_path_name(path), de_index));
  };
  if (request.after_prepare) request.after_prepare();
  // The prefill engine with the fewest prefills in flight (ties: the lowest index).
  int pe_engine = 0;
  {
    std::lock_guard lock(path_mu_);
    for (int e = 1; e < engines_per_node(); ++e) {
      if (pe_engine_prefills_[e] < pe_engine_prefills_[pe_engine]) pe_engine = e;
    }
    ++pe_engine_prefills_[pe_engine];
  }
  result.pe_engine = pe_engine;
  PrefillRequest prefill{id,
                         request.tokens,
                         hit,
                         path,
                         de_index,
                         prepared.value("dram_offset", uint64_t{0}),
                         pe_engine};
  Json pre_msg = prefill.to_json();
  pre_msg["cmd"] = "prefill";
  auto prefilled = pe.link->call(pre_msg, call_timeout());
  {
    std::lock_guard lock(path_mu_);
    --pe_engine_prefills_[pe_engine];
  }
  finish_read();
  if (!prefilled.is_ok()) return fail(prefilled.status());
  result.ttft_s = std::chrono::duration<double>(Clock::now() - start).count();
  result.bytes += HopBytes::from_json(prefilled->value("bytes", Json::object()));
  result.first_logits = (*prefilled)["logits"].get<std::vector<float>>();
  result.layer_timeline = (*prefilled)["layer_timeline"];

  auto decoded = de.link->call(Json{{"cmd", "decode"},
                                    {"request_id", id},
                                    {"first_token", prefilled->value("first_token", 0)}},
                               call_timeout());
  if (!decoded.is_ok()) return fail(decoded.status());
  result.bytes += HopBytes::from_json(decoded->value("bytes", Json::object()));
  result.output_tokens = (*decoded)["output_tokens"].get<std::vector<int32_t>>();
  result.tpot_s = decoded->value("tpot_s", 0.0);
  return result;
}

}  // namespace dualpath::engine
