#include "serve/scheduler_service.h"

#include <sys/socket.h>
#include <unistd.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "common/log.h"
#include "engine/backend_factory.h"
#include "engine/engine_config.h"
#include "engine/node_runtime.h"
#include "engine/wire.h"
#include "model/cost_model.h"

namespace dualpath::serve {

namespace {

using Clock = std::chrono::steady_clock;
using engine::Json;
using engine::NodeId;
using engine::NodeRole;

// A registering node's first message must come within this.
constexpr Duration kRegisterTimeout = std::chrono::seconds(10);
// From its setup to its hello: the node builds its runtime (model weights, UCX, buffers).
constexpr Duration kHelloTimeout = std::chrono::seconds(120);
// A `peers` call: the node connects its UCX endpoints (its worker pool grows, so the call is never
// queued behind blocked ones).
constexpr Duration kPeersTimeout = std::chrono::seconds(30);
// How long the accept loop blocks before it checks for shutdown.
constexpr Duration kAcceptSlice = std::chrono::milliseconds(200);
// How long a release or cancel to a live node may take (best effort).
constexpr Duration kCleanupTimeout = std::chrono::seconds(5);
// Beta for the CPU reference model (no cost model prices it): about what the tiny fp32 model
// prefills per second on one core here (docs/compute.md).
constexpr double kCpuPrefillTokensPerS = 8000;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

}  // namespace

void TurnCancel::run(std::function<void()> TurnCancel::*hook) {
  std::function<void()> h;
  {
    std::lock_guard lock(mu_);
    h = this->*hook;
  }
  if (h) h();  // outside the lock: a hook sends to the nodes
}

void TurnCancel::cancel() {
  cancelled_.store(true, std::memory_order_release);
  run(&TurnCancel::hook_);
}

void TurnCancel::set_hook(std::function<void()> hook) {
  std::lock_guard lock(mu_);
  hook_ = std::move(hook);
}

void TurnCancel::stop() {
  stopped_.store(true, std::memory_order_release);
  run(&TurnCancel::stop_hook_);
}

void TurnCancel::set_stop_hook(std::function<void()> hook) {
  {
    std::lock_guard lock(mu_);
    stop_hook_ = hook;
  }
  if (hook && stopped()) hook();
}

struct SchedulerService::Node {
  NodeId id;
  int sched_node = 0;
  std::string host;
  int64_t pid = 0;
  std::shared_ptr<engine::NodeLink> link;  // null until it registers
  Json hello;
  bool alive = false;  // registered, connected to its peers, lease current
  bool joining = false;  // a registration holds this slot (setup sent, not alive yet)
  engine::LoadReport report;
  Clock::time_point last_report;
  int64_t registrations = 0;
  uint64_t generation = 0;  // bumped by every registration: a stale link's close is ignored
};

struct SchedulerService::Waiter {
  std::optional<sched::Placement> placement;
  bool cancelled = false;
};

// One attempt of a turn, shared with the event handler (token events) and mark_dead.
struct SchedulerService::Attempt {
  uint64_t id = 0;
  std::vector<int32_t> prompt;
  int64_t gen = 0;
  sched::PathRequest path;
  int64_t oracle_hit = 0;
  // Set once placed.
  sched::Placement placement;
  int pe_node = -1, de_node = -1;
  std::shared_ptr<Node> pe, de;
  // The decode's tokens as they stream in, contiguous from 0; delivered to the client from
  // `delivered` on (offset by `base`, the tokens of earlier attempts).
  std::mutex mu;
  std::vector<int32_t> streamed;  // guarded by mu
  size_t delivered = 0;           // guarded by mu
  int64_t base = 0;
  bool decoding = false;                 // guarded by mu
  std::atomic<bool> prefilled{false};    // release/acquire: read by mark_dead
  // When the decode's latest token event arrived (steady clock ticks; 0: none yet). Relaxed: it
  // only moves the decode call's deadline (NodeLink::call with progress).
  std::atomic<Clock::rep> last_event{0};
  const TurnRequest* request = nullptr;  // valid until `closed` (run_turn's caller owns it)
  bool fault_fired = false;              // guarded by mu
  bool closed = false;                   // guarded by mu: the attempt is over, deliver nothing more
  Clock::time_point turn_start;
  int64_t hit = 0;
};

Result<sched::ClusterShape> scheduler_shape(const ServeConfig& config) {
  const engine::EngineConfig& cfg = config.engine;
  sched::ClusterShape shape;
  shape.prefill_nodes = cfg.prefill_nodes;
  shape.decode_nodes = cfg.decode_nodes;
  shape.pe_engines_per_node = shape.de_engines_per_node = cfg.engines_per_node;
  shape.pe_ep_nodes = std::min(cfg.pe_ep_nodes, cfg.prefill_nodes);
  shape.de_ep_nodes = std::min(cfg.de_ep_nodes, cfg.decode_nodes);
  return shape;
}

Result<sched::ClusterSchedulerParams> scheduler_params(const ServeConfig& config) {
  const engine::EngineConfig& cfg = config.engine;
  DP_ASSIGN_OR_RETURN(engine::ModelKvShape kv_shape, engine::model_kv_shape(cfg));
  sched::ClusterSchedulerParams p;
  p.engines = config.engine_policy();
  p.paths = config.path_policy();
  p.de.z_factor = config.scheduler.z_factor;
  p.de_hbm_bytes = static_cast<double>(cfg.hbm_bytes);
  p.block_tokens = cfg.block_tokens;
  p.split_min_tokens = config.scheduler.split_min_tokens;
  // alpha: tokens a node reads in alpha_s at its (emulated) storage NIC rate; unlimited NICs
  // never count as long. beta: prompt tokens an engine prefills in beta_s.
  const double snic_bytes_per_s = cfg.emulated_snic_gbps() * 1e9 / 8;
  const auto kv = static_cast<double>(kv_shape.layers * kv_shape.bytes_per_token_per_layer);
  // An engine of a live node computes on compute_slots GPUs at once (engine_config.h).
  const double gpus_per_engine = std::max(1, cfg.compute_slots());
  if (cfg.compute == "modeled") {
    DP_ASSIGN_OR_RETURN(model::ModelSpec preset, model::model_preset(cfg.model));
    model::CostModel cost(preset, cfg.hardware, cfg.efficiency);
    // Beta at a typical agent turn (30K cached + 300 new tokens: PAPER.md Fig. 3's shape); the
    // live engines run each request as its own pass, so this is per GPU, times the engine's GPUs.
    p.pe = sched::derive_pe_params(cost, 30000, 300, config.scheduler.quota_s,
                                   cfg.backend_spec().prefill_ep_gpus, 1, 1, 1,
                                   config.scheduler.beta_s);
    p.pe.beta_tokens =
        static_cast<int64_t>(static_cast<double>(p.pe.beta_tokens) * gpus_per_engine);
  } else {
    p.pe.beta_tokens = static_cast<int64_t>(kCpuPrefillTokensPerS * config.scheduler.beta_s);
  }
  p.pe.alpha_tokens = snic_bytes_per_s > 0
                          ? static_cast<int64_t>(snic_bytes_per_s * config.scheduler.alpha_s / kv)
                          : std::numeric_limits<int64_t>::max() / 4;
  p.pe.policy = config.scheduler.pe_policy;
  return p;
}

SchedulerService::SchedulerService(const ServeConfig& config) : config_(config) {}

Result<std::unique_ptr<SchedulerService>> SchedulerService::start(const ServeConfig& config) {
  std::unique_ptr<SchedulerService> s(new SchedulerService(config));
  engine::EngineConfig& cfg = const_cast<engine::EngineConfig&>(s->config_.engine);
  if (cfg.data_paths.empty()) {
    const char* base = std::getenv("TMPDIR");
    std::string pattern = std::string(base ? base : "/tmp") + "/dualpath_serve.XXXXXX";
    if (::mkdtemp(pattern.data()) == nullptr) {
      return Status::io_error(fmt::format("cannot make a temporary store directory {}: {}", pattern,
                                          std::strerror(errno)));
    }
    s->temp_dir_ = pattern;
    cfg.data_paths = {pattern};
  }
  DP_RETURN_IF_ERROR(cfg.validate());
  DP_ASSIGN_OR_RETURN(engine::ModelKvShape shape, engine::model_kv_shape(cfg));
  s->layout_ = store::BlockLayout{shape.layers, cfg.block_tokens, shape.bytes_per_token_per_layer};
  s->kv_bytes_per_token_ = shape.layers * shape.bytes_per_token_per_layer;
  if (cfg.compute == "modeled") {
    DP_ASSIGN_OR_RETURN(model::ModelSpec preset, model::model_preset(cfg.model));
    s->cost_.emplace(preset, cfg.hardware, cfg.efficiency);
  }
  store::FileStoreOptions so;
  so.data_paths = cfg.data_paths;
  so.model = engine::kv_fingerprint(cfg.backend_spec());
  so.layout = s->layout_;
  DP_ASSIGN_OR_RETURN(s->store_, store::FileStore::open(so));

  auto listener = transport::OobListener::listen(config.scheduler.host, config.scheduler.port);
  if (!listener.is_ok()) {
    return listener.status().with_context(fmt::format(
        "the scheduler cannot listen on {}:{} (scheduler.host, scheduler.port); is another "
        "`dualpath serve` running? Use another port, or 0 for any free one",
        config.scheduler.host, config.scheduler.port));
  }
  s->listener_ = std::move(listener).value();

  // The scheduler: every engine of every node, none alive until its node registers.
  DP_ASSIGN_OR_RETURN(const sched::ClusterShape shape_of, scheduler_shape(s->config_));
  DP_ASSIGN_OR_RETURN(const sched::ClusterSchedulerParams p, scheduler_params(s->config_));
  s->sched_ = std::make_unique<sched::ClusterScheduler>(shape_of, p);
  const int P = cfg.prefill_nodes, D = cfg.decode_nodes;
  for (int n = 0; n < P + D; ++n) {
    auto node = std::make_shared<Node>();
    node->id = n < P ? NodeId{NodeRole::kPrefill, n} : NodeId{NodeRole::kDecode, n - P};
    node->sched_node = n;
    s->nodes_.push_back(node);
    s->sched_->set_node_alive(n, false);
  }
  SchedulerService* self = s.get();
  s->accept_thread_ = std::thread([self] { self->accept_loop(); });
  s->fetch_thread_ = std::thread([self] { self->fetch_loop(); });
  s->lease_thread_ = std::thread([self] { self->lease_loop(); });
  return s;
}

SchedulerService::~SchedulerService() {
  shutdown();  // a no-op after an earlier shutdown
  if (accept_thread_.joinable()) accept_thread_.join();
  listener_.reset();  // nodes reconnecting now find nothing, or the next scheduler
  if (fetch_thread_.joinable()) fetch_thread_.join();
  if (lease_thread_.joinable()) lease_thread_.join();
  std::vector<std::thread> regs;
  {
    std::lock_guard lock(mu_);
    regs.swap(registration_threads_);
  }
  for (auto& t : regs) t.join();
  // The reader threads are joined first, while this still holds every link: a close handler
  // in progress (mark_dead) holds a copy of its own link, which must not be the last one.
  std::vector<std::shared_ptr<engine::NodeLink>> links;
  {
    std::lock_guard lock(mu_);
    for (auto& n : nodes_) links.push_back(std::move(n->link));
  }
  for (auto& l : links) {
    if (l) l->stop();
  }
  links.clear();
  store_.reset();
  if (!temp_dir_.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(temp_dir_, ec);
  }
}

std::string SchedulerService::address() const {
  return fmt::format("{}:{}", config_.scheduler.host, port());
}

void SchedulerService::shutdown(bool quit_nodes) {
  std::vector<std::shared_ptr<Node>> nodes;
  {
    std::lock_guard lock(mu_);
    if (stopping_) return;
    stopping_ = true;
    nodes = nodes_;
    for (auto& [id, w] : waiters_) w->cancelled = true;
  }
  cv_.notify_all();
  for (auto& n : nodes) {
    const std::shared_ptr<engine::NodeLink> link = link_of(*n);
    if (link && !link->closed()) {
      if (quit_nodes) (void)link->send(Json{{"type", "quit"}}, std::chrono::seconds(1));
      link->close(Status::aborted("the scheduler is shutting down"));
    }
  }
}

int SchedulerService::sched_node_of(const NodeId& id) const {
  return id.role == NodeRole::kPrefill ? id.index : config_.engine.prefill_nodes + id.index;
}

std::shared_ptr<SchedulerService::Node> SchedulerService::node(int sched_node) const {
  std::lock_guard lock(mu_);
  return nodes_[static_cast<size_t>(sched_node)];
}

std::shared_ptr<engine::NodeLink> SchedulerService::link_of(const Node& n) const {
  std::lock_guard lock(mu_);
  return n.link;
}

engine::NodeSetup SchedulerService::setup_for(const NodeId& id) const {
  const engine::EngineConfig& cfg = config_.engine;
  engine::NodeSetup setup;
  setup.role = id.role;
  setup.index = id.index;
  setup.backend = cfg.backend_spec();
  setup.block_tokens = cfg.block_tokens;
  setup.data_paths = cfg.data_paths;
  // Processes sharing the data paths split the capacity (file_store.h).
  setup.store_capacity_bytes =
      cfg.store_capacity_bytes / static_cast<int64_t>(cfg.prefill_nodes + cfg.decode_nodes);
  setup.store_fault_rate = cfg.store_fault_rate;
  setup.dram_buffer_bytes =
      id.role == NodeRole::kPrefill ? cfg.pe_dram_buffer_bytes : cfg.de_dram_buffer_bytes;
  setup.hbm_bytes = cfg.hbm_bytes;
  setup.pipeline_depth = cfg.pipeline_depth;
  setup.timeout = cfg.request_timeout;
  setup.report_interval = config_.scheduler.report_interval;
  setup.transports = cfg.transport.context.transports;
  setup.net_devices = cfg.transport.context.net_devices;
  setup.poll_us = cfg.transport.poll_us;
  setup.poll_in_flight_us = cfg.transport.poll_in_flight_us;
  setup.snic_gbps = cfg.emulated_snic_gbps();
  setup.compute_slots = id.role == NodeRole::kPrefill ? cfg.compute_slots() : 0;
  setup.engines = cfg.engines_per_node;
  return setup;
}

void SchedulerService::accept_loop() {
  for (;;) {
    {
      std::lock_guard lock(mu_);
      if (stopping_) return;
    }
    auto channel = listener_->accept(kAcceptSlice);
    if (!channel.is_ok()) continue;  // a timeout slice, or a connection that failed
    std::lock_guard lock(mu_);
    if (stopping_) return;
    // The registration owns the channel until it hands it to the node's link.
    registration_threads_.emplace_back(
        [this](std::unique_ptr<transport::OobChannel> ch) { handle_registration(std::move(ch)); },
        std::move(channel).value());
  }
}

void SchedulerService::handle_registration(std::unique_ptr<transport::OobChannel> channel) {
  auto refuse = [&](const Status& why) {
    DP_LOG_WARN("refused a node: {}", why.message());
    (void)engine::send_json(
        *channel,
        Json{{"type", "refused"}, {"code", static_cast<int>(why.code())}, {"error", why.message()}},
        kRegisterTimeout);
  };
  auto first = engine::receive_json(*channel, kRegisterTimeout);
  if (!first.is_ok()) return;  // not a node, or it went away
  auto reg = engine::RegisterRequest::from_json(*first);
  if (!reg.is_ok()) return refuse(reg.status());
  if (reg->protocol != engine::kProtocolVersion) {
    return refuse(Status::failed_precondition(fmt::format(
        "the node speaks protocol {} and the scheduler {}: run the same dualpath build on both",
        reg->protocol, engine::kProtocolVersion)));
  }
  const bool prefill = reg->role == NodeRole::kPrefill;
  const int count = prefill ? config_.engine.prefill_nodes : config_.engine.decode_nodes;
  const char* key = prefill ? "cluster.prefill_nodes" : "cluster.decode_nodes";
  int index = reg->index;
  std::shared_ptr<Node> n;
  {
    std::lock_guard lock(mu_);
    if (stopping_) return;
    auto slot = [&](int i) { return nodes_[static_cast<size_t>(sched_node_of({reg->role, i}))]; };
    if (index >= count) {
      return refuse(Status::failed_precondition(fmt::format(
          "{} node {}: the config ({}) declares {} {} node{} ({} = {}); raise {} or start the "
          "node with --index 0..{}",
          engine::role_name(reg->role), index, config_.origin, count, engine::role_name(reg->role),
          count == 1 ? "" : "s", key, count, key, count - 1)));
    }
    if (index < 0) {
      for (int i = 0; i < count && index < 0; ++i) {
        if (!slot(i)->alive && !slot(i)->joining) index = i;
      }
      if (index < 0) {
        return refuse(Status::failed_precondition(fmt::format(
            "all {} {} nodes of the config ({} = {}) are registered; raise {} to add one", count,
            engine::role_name(reg->role), key, count, key)));
      }
    }
    n = slot(index);
    if (n->alive || n->joining) {
      return refuse(Status::already_exists(fmt::format(
          "duplicate node index: {} is already {} (host {}, pid {}); give another --index, or "
          "stop that node first",
          n->id.name(), n->alive ? "registered" : "registering", n->alive ? n->host : reg->host,
          n->alive ? n->pid : reg->pid)));
    }
    n->joining = true;
  }
  // Until it is alive, the slot is this registration's; every way out below gives it back. The
  // slow part (the node builds its runtime: buffers, store, model) runs without any lock, so
  // nodes starting together set up in parallel.
  struct Release {
    SchedulerService* self;
    Node* node;
    ~Release() {
      std::lock_guard lock(self->mu_);
      node->joining = false;
    }
  } release{this, n.get()};
  const engine::NodeSetup setup = setup_for(n->id);
  Status sent = engine::send_json(
      *channel, Json{{"type", "setup"}, {"index", index}, {"setup", setup.to_json()}},
      kRegisterTimeout);
  if (!sent.is_ok()) return;
  auto hello = engine::receive_json(*channel, kHelloTimeout);
  if (!hello.is_ok()) {
    DP_LOG_WARN("{} did not finish registering: {}", n->id.name(), hello.status().to_string());
    return;
  }
  if (Status s = engine::reply_status(*hello, n->id.name()); !s.is_ok()) {
    DP_LOG_ERROR("{} could not start: {}", n->id.name(), s.message());
    return;
  }
  // The node's link: its reports and token events come in on its reader thread.
  const int sched_node = n->sched_node;
  uint64_t generation = 0;
  {
    std::lock_guard lock(mu_);
    generation = ++n->generation;
  }
  auto link = std::make_shared<engine::NodeLink>(
      std::move(channel), n->id.name(),
      [this, sched_node](const Json& msg) { on_node_message(sched_node, msg); },
      [this, sched_node, generation](const Status& why) {
        mark_dead(sched_node, why, generation);
      });
  // Peers: the new node connects to every live node of the other role, and they to it. This part
  // is serialised: of two nodes joining at once, the second sees the first alive.
  std::lock_guard registration(registration_mu_);
  Json others = Json::array();
  std::vector<std::shared_ptr<Node>> other_nodes;
  {
    std::lock_guard lock(mu_);
    for (const auto& o : nodes_) {
      if (o->id.role != n->id.role && o->alive) {
        others.push_back(o->hello);
        other_nodes.push_back(o);
      }
    }
  }
  const Duration peer_timeout = kPeersTimeout;
  if (auto r = link->call(Json{{"cmd", "peers"}, {"peers", others}}, peer_timeout); !r.is_ok()) {
    DP_LOG_ERROR("{} cannot connect to its peers: {}", n->id.name(), r.status().message());
    link->close(r.status());
    return;
  }
  for (const auto& o : other_nodes) {
    const std::shared_ptr<engine::NodeLink> other = link_of(*o);
    if (other == nullptr) continue;
    auto r = other->call(Json{{"cmd", "peers"}, {"peers", Json::array({*hello})}}, peer_timeout);
    if (!r.is_ok()) {
      DP_LOG_WARN("{} cannot connect to {}: {}", o->id.name(), n->id.name(), r.status().message());
    }
  }
  std::shared_ptr<engine::NodeLink> old;
  {
    std::lock_guard lock(mu_);
    old = std::move(n->link);
    n->link = link;
    n->hello = *hello;
    n->host = reg->host;
    n->pid = reg->pid;
    n->alive = true;
    n->last_report = Clock::now();
    n->registrations += 1;
    sched_->set_node_alive(sched_node, true);
  }
  cv_.notify_all();
  DP_LOG_INFO("{} registered (host {}, pid {}{})", n->id.name(), reg->host, reg->pid,
              reg->resume ? ", resuming" : "");
  // The previous link's reader is joined here, outside the lock (its close handler takes it),
  // before the last reference goes: a close handler in progress may hold one.
  if (old) old->stop();
  old.reset();
}

void SchedulerService::on_node_message(int sched_node, const Json& msg) {
  engine::WireReader r(msg, "node message");
  const std::string type = r.str_or("type", "");
  if (type == "report") {
    auto report = engine::LoadReport::from_json(msg);
    if (!report.is_ok()) {
      DP_LOG_WARN("bad load report from node {}: {}", sched_node, report.status().message());
      return;
    }
    std::lock_guard lock(mu_);
    Node& n = *nodes_[static_cast<size_t>(sched_node)];
    n.report = *report;
    n.last_report = Clock::now();
    sched_->set_reported_read_queue(sched_node, report->read_queue_tokens);
    return;
  }
  if (type == "event") {
    auto e = engine::TokenEvent::from_json(msg);
    if (!e.is_ok()) {
      DP_LOG_WARN("bad token event from node {}: {}", sched_node, e.status().message());
      return;
    }
    std::shared_ptr<Attempt> a;
    {
      std::lock_guard lock(mu_);
      auto it = attempts_.find(e->request_id);
      if (it != attempts_.end()) a = it->second;
    }
    if (a == nullptr) return;  // a late event of a finished attempt
    a->last_event.store(Clock::now().time_since_epoch().count(), std::memory_order_relaxed);
    std::vector<int32_t> fresh;
    bool fire = false;
    // The client's callbacks run under the attempt's lock, so that once the attempt is closed
    // (its request about to go) no callback is running or starts.
    std::lock_guard lock(a->mu);
    if (a->closed) return;
    {
      // Events arrive in order on one link; take what extends the contiguous prefix.
      if (e->start <= static_cast<int64_t>(a->streamed.size())) {
        const auto skip = static_cast<size_t>(static_cast<int64_t>(a->streamed.size()) - e->start);
        if (skip < e->tokens.size())
          a->streamed.insert(a->streamed.end(), e->tokens.begin() + skip, e->tokens.end());
      }
      if (a->streamed.size() > a->delivered) {
        fresh.assign(a->streamed.begin() + a->delivered, a->streamed.end());
        a->delivered = a->streamed.size();
      }
      const TurnRequest& req = *a->request;
      if (!a->fault_fired && req.on_fault_point && req.fault_after_tokens > 0 &&
          a->base + static_cast<int64_t>(a->streamed.size()) >= req.fault_after_tokens) {
        a->fault_fired = fire = true;
      }
    }
    if (!fresh.empty() && a->request->on_tokens) a->request->on_tokens(fresh);
    if (fire) a->request->on_fault_point(a->de->id);
  }
}

void SchedulerService::mark_dead(int sched_node, const Status& why, uint64_t generation) {
  std::shared_ptr<Node> n;
  std::vector<std::pair<std::shared_ptr<engine::NodeLink>, uint64_t>> cancels;
  std::shared_ptr<engine::NodeLink> link;
  bool stopping = false;
  {
    std::lock_guard lock(mu_);
    n = nodes_[static_cast<size_t>(sched_node)];
    if (!n->alive) return;
    if (generation != 0 && n->generation != generation) return;  // a replaced link's close
    stopping = stopping_;
    n->alive = false;
    link = n->link;
    sched_->set_node_alive(sched_node, false);
    // The other side of each turn it was in: told to stop, so nothing waits on the dead peer.
    for (const auto& [id, a] : attempts_) {
      // A dead PE matters to its DE only until the prefill is done: the decode goes on.
      if (a->pe_node == sched_node && !a->prefilled.load(std::memory_order_acquire) && a->de &&
          a->de->link)
        cancels.emplace_back(a->de->link, id);
      if (a->de_node == sched_node && a->pe && a->pe->link) cancels.emplace_back(a->pe->link, id);
    }
  }
  cv_.notify_all();
  if (!stopping) DP_LOG_WARN("{} is dead: {}", n->id.name(), why.message());
  if (link) link->close(why);
  for (auto& [peer, id] : cancels) {
    (void)peer->send(Json{{"type", "call"}, {"call_id", 0}, {"cmd", "cancel"}, {"request_id", id}},
                     kCleanupTimeout);
  }
}

void SchedulerService::lease_loop() {
  const Duration period = std::max<Duration>(
      std::chrono::milliseconds(5),
      std::min<Duration>(std::chrono::milliseconds(50), config_.scheduler.lease_ttl / 4));
  std::unique_lock lock(mu_);
  for (;;) {
    if (cv_.wait_for(lock, period, [&] { return stopping_; })) return;
    std::vector<int> expired;
    const auto now = Clock::now();
    for (const auto& n : nodes_) {
      if (n->alive && now - n->last_report > config_.scheduler.lease_ttl) {
        expired.push_back(n->sched_node);
      }
    }
    lock.unlock();
    for (int node_id : expired) {
      mark_dead(
          node_id,
          Status::unavailable(fmt::format(
              "no load report for {:.1f} s (scheduler.lease_ttl_ms = {})",
              to_seconds(config_.scheduler.lease_ttl),
              std::chrono::duration_cast<std::chrono::milliseconds>(config_.scheduler.lease_ttl)
                  .count())));
    }
    lock.lock();
  }
}

void SchedulerService::fetch_loop() {
  std::unique_lock lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return stopping_ || sched_->has_queued(); });
    if (stopping_) return;
    // The groups pull every fetch interval (PAPER.md §8): the next fetch is one interval on.
    if (cv_.wait_for(lock, config_.scheduler.fetch_interval, [&] { return stopping_; })) return;
    const sched::FetchResult fetched = sched_->fetch();
    for (const sched::Placement& p : fetched.placed) {
      auto it = waiters_.find(p.request_id);
      if (it != waiters_.end()) it->second->placement = p;
    }
    if (!fetched.placed.empty()) cv_.notify_all();
  }
}

Status SchedulerService::wait_ready(Duration timeout) {
  std::unique_lock lock(mu_);
  const bool ok = cv_.wait_for(lock, timeout, [&] {
    return stopping_ ||
           std::all_of(nodes_.begin(), nodes_.end(), [](const auto& n) { return n->alive; });
  });
  if (ok && !stopping_) return Status::ok();
  std::vector<std::string> missing;
  for (const auto& n : nodes_) {
    if (!n->alive) missing.push_back(n->id.name());
  }
  return Status::timed_out(fmt::format(
      "{} of {} nodes did not register within {:.0f} s: {}; start them with `dualpath node "
      "--scheduler {} --role R`, or check their logs",
      missing.size(), nodes_.size(), to_seconds(timeout), fmt::join(missing, ", "), address()));
}

bool SchedulerService::ready() const {
  std::lock_guard lock(mu_);
  return std::all_of(nodes_.begin(), nodes_.end(), [](const auto& n) { return n->alive; });
}

std::vector<NodeStatus> SchedulerService::nodes() const {
  std::lock_guard lock(mu_);
  std::vector<NodeStatus> out;
  for (const auto& n : nodes_) {
    NodeStatus s;
    s.id = n->id;
    s.alive = n->alive;
    s.host = n->host;
    s.pid = n->pid;
    s.report = n->report;
    s.registrations = n->registrations;
    s.last_report_age_s = n->registrations > 0 ? seconds_since(n->last_report) : 0;
    out.push_back(std::move(s));
  }
  return out;
}

Result<sched::Placement> SchedulerService::place(const sched::SchedRequest& request,
                                                 const TurnRequest& req) {
  // A turn waits for a place as long as a request may run: nodes may be re-registering.
  const auto deadline = Clock::now() + 2 * config_.engine.request_timeout;
  std::unique_lock lock(mu_);
  if (config_.engine_policy() == sched::EnginePolicy::kRoundRobin) {
    for (;;) {
      if (stopping_) return Status::aborted("the scheduler is shutting down");
      if (req.cancel && req.cancel->cancelled()) return Status::aborted("the turn was cancelled");
      if (auto p = sched_->submit(request)) return *p;
      if (cv_.wait_until(lock, deadline) == std::cv_status::timeout) break;
    }
  } else {
    auto w = std::make_shared<Waiter>();
    waiters_[request.id] = w;
    sched_->submit(request);
    cv_.notify_all();  // wakes the fetch loop
    cv_.wait_until(lock, deadline, [&] {
      return w->placement.has_value() || w->cancelled || stopping_ ||
             (req.cancel && req.cancel->cancelled());
    });
    waiters_.erase(request.id);
    if (w->placement) return *w->placement;
    sched_->cancel_queued(request.id);
    if (stopping_) return Status::aborted("the scheduler is shutting down");
    if (w->cancelled || (req.cancel && req.cancel->cancelled()))
      return Status::aborted("the turn was cancelled while it waited to be placed");
  }
  int pe_alive = 0, de_alive = 0;
  for (const auto& n : nodes_) (n->id.role == NodeRole::kPrefill ? pe_alive : de_alive) += n->alive;
  return Status::unavailable(fmt::format(
      "no engine took the turn within {:.0f} s ({} prefill and {} decode nodes alive of {} and "
      "{})",
      to_seconds(2 * config_.engine.request_timeout), pe_alive, de_alive,
      config_.engine.prefill_nodes, config_.engine.decode_nodes));
}

Status SchedulerService::run_attempt(const TurnRequest& req,
                                     const std::shared_ptr<Attempt>& ap,
                                     TurnResult& out) {
  Attempt& a = *ap;
  const auto attempt_start = Clock::now();
  const Duration call_timeout = 2 * config_.engine.request_timeout + std::chrono::seconds(5);
  const int64_t bt = config_.engine.block_tokens;
  const auto n = static_cast<int64_t>(a.prompt.size());
  if (n < 1) return Status::invalid_argument("a turn needs at least one prompt token");
  if (a.gen < 1) return Status::invalid_argument("a turn generates at least one token");
  int64_t hit = 0;
  const bool oracle = a.path == sched::ReadPath::kOracle ||
                      (!a.path && config_.path_policy() == sched::PathPolicy::kNoIo);
  if (oracle) {
    if (config_.engine.compute != "modeled") {
      return Status::invalid_argument(
          "the oracle path needs live.compute = \"modeled\": it loads no KV, and the CPU model "
          "cannot compute without it");
    }
    hit = std::clamp<int64_t>(a.oracle_hit / bt * bt, 0, ((n - 1) / bt) * bt);
  } else if (a.path != sched::ReadPath::kRecompute) {
    hit = store_->longest_cached_prefix(a.prompt, req.cache_namespace).hit_tokens(layout_);
    hit = std::min(hit, ((n - 1) / bt) * bt);  // leave at least one new token
  }
  const int64_t blocks = (n + a.gen + bt - 1) / bt;
  sched::SchedRequest sr;
  sr.id = static_cast<int64_t>(a.id);
  sr.prompt_tokens = n;
  sr.gen_tokens = a.gen;
  sr.hit_tokens = hit;
  sr.hbm_need_bytes = std::min(static_cast<double>(blocks * bt * kv_bytes_per_token_),
                               static_cast<double>(config_.engine.hbm_bytes));
  sr.path = oracle ? sched::PathRequest(sched::ReadPath::kOracle) : a.path;
  // The tail policy's load unit; without a cost model (the CPU model) prompt tokens stand in.
  if (cost_) sr.pe_work_s = sched::prefill_work_s(*cost_, hit, n - hit);
  a.hit = hit;
  DP_ASSIGN_OR_RETURN(a.placement, place(sr, req));
  const double queued = seconds_since(attempt_start);
  const sched::Placement& p = a.placement;
  const bool paper = config_.engine_policy() == sched::EnginePolicy::kPaper;
  {
    std::lock_guard lock(mu_);
    a.pe_node = sched_->pe_node_of(p.pe);
    a.de_node = sched_->de_node_of(p.de);
    a.pe = nodes_[static_cast<size_t>(a.pe_node)];
    a.de = nodes_[static_cast<size_t>(a.de_node)];
    // The attempt may have been placed on a node that died since: the links tell.
  }
  std::shared_ptr<engine::NodeLink> pe_link, de_link;
  {
    std::lock_guard lock(mu_);
    attempts_[a.id] = ap;
    pe_link = a.pe->link;
    de_link = a.de->link;
  }
  // Everything the placement counted is given back exactly once, whatever happens.
  // Each side's read is over when its node has answered: the DE side's with the prepare, the PE
  // side's with the prefill.
  bool pe_read_pending = p.pe_read_tokens > 0, de_read_pending = p.de_read_tokens > 0;
  bool prefill_pending = true, turn_pending = true;
  auto finish_de_read = [&] {
    if (!de_read_pending) return;
    de_read_pending = false;
    std::lock_guard lock(mu_);
    sched_->read_finished(a.de_node, p.de_read_tokens);
  };
  auto finish_read = [&] {
    finish_de_read();
    if (!pe_read_pending) return;
    pe_read_pending = false;
    std::lock_guard lock(mu_);
    sched_->read_finished(a.pe_node, p.pe_read_tokens);
  };
  auto finish_prefill = [&] {
    if (!prefill_pending) return;
    prefill_pending = false;
    std::lock_guard lock(mu_);
    sched_->prefill_finished(p.pe, n, sr.pe_work());
  };
  auto finish_turn = [&] {
    if (!turn_pending) return;
    turn_pending = false;
    std::lock_guard lock(mu_);
    sched_->turn_finished(p.de, n + a.gen, paper ? sr.hbm_need_bytes : 0.0);
  };
  bool prepared = false;
  auto cleanup = [&](const Status& s) {
    if (prepared && de_link && !de_link->closed()) {
      (void)de_link->call(Json{{"cmd", "release"}, {"request_id", a.id}}, kCleanupTimeout);
    }
    if (s.is_aborted() && pe_link && !pe_link->closed()) {
      (void)pe_link->send(
          Json{{"type", "call"}, {"call_id", 0}, {"cmd", "cancel"}, {"request_id", a.id}},
          kCleanupTimeout);
    }
    finish_read();
    finish_prefill();
    finish_turn();
    if (req.cancel) {
      req.cancel->set_hook(nullptr);
      req.cancel->set_stop_hook(nullptr);
    }
    {
      std::lock_guard lock(a.mu);  // waits for a callback in flight
      a.closed = true;
    }
    std::lock_guard lock(mu_);
    attempts_.erase(a.id);
  };
  if (pe_link == nullptr || de_link == nullptr) {
    Status s = Status::unavailable("the placed nodes have not registered");
    cleanup(s);
    return s;
  }
  if (req.cancel) {
    req.cancel->set_hook([pe_link, de_link, id = a.id] {
      for (const auto& l : {pe_link, de_link}) {
        (void)l->send(Json{{"type", "call"}, {"call_id", 0}, {"cmd", "cancel"}, {"request_id", id}},
                      kCleanupTimeout);
      }
    });
    if (req.cancel->cancelled()) {
      Status s = Status::aborted("the turn was cancelled");
      cleanup(s);
      return s;
    }
  }
  const int pe_engine = sched_->pe_local(p.pe), de_engine = sched_->de_local(p.de);

  // DE prepare: the DE buffer (and, on the DE path, the storage read; a split read: of the
  // blocks after the PE side's part).
  const bool split = p.path == sched::ReadPath::kSplit;
  engine::PrepareRequest prep{a.id,
                              a.prompt,
                              hit,
                              a.gen,
                              p.path == sched::ReadPath::kDe || split,
                              oracle,
                              de_engine,
                              req.sampling,
                              split ? p.pe_read_tokens : 0,
                              req.cache_namespace};
  auto prep_out = engine::call_node<engine::PrepareReply>(*de_link, "prepare", prep, call_timeout);
  if (!prep_out.is_ok()) {
    prepared = true;  // it may have been, before the failure: release it
    cleanup(prep_out.status());
    return prep_out.status();
  }
  prepared = true;
  finish_de_read();
  out.bytes += prep_out->bytes;
  out.de_read_bytes += prep_out->bytes.storage_read;
  if (req.after_prepare) req.after_prepare(out.attempts, a.pe->id, a.de->id);

  // PE prefill, layer by layer, by the chosen path.
  engine::PrefillRequest pre{
      a.id,
      a.prompt,
      hit,
      oracle ? sched::ReadPath::kOracle
             : (p.path == sched::ReadPath::kOracle ? sched::ReadPath::kPe : p.path),
      a.de->id.index,
      prep_out->dram_offset,
      pe_engine,
      req.sampling,
      split ? p.pe_read_tokens : 0,
      req.cache_namespace};
  auto pre_out = engine::call_node<engine::PrefillReply>(*pe_link, "prefill", pre, call_timeout);
  finish_read();
  finish_prefill();
  if (pre_out.is_ok()) a.prefilled.store(true, std::memory_order_release);
  if (!pre_out.is_ok()) {
    cleanup(pre_out.status());
    return pre_out.status();
  }
  out.bytes += pre_out->bytes;
  out.pe_read_bytes += pre_out->bytes.storage_read;
  out.prefill_s += pre_out->prefill_s;
  if (out.attempts == 1 || out.output_tokens.empty()) {
    out.first_logits = pre_out->logits;
    out.layer_timeline = pre_out->layer_timeline;
  }
  if (out.attempts == 1) out.queue_s = queued;
  if (a.base == 0 && out.ttft_s == 0) out.ttft_s = seconds_since(a.turn_start);

  // DE decode: the tokens stream in as events (on_node_message) while the call runs.
  {
    std::lock_guard lock(a.mu);
    a.decoding = true;
  }
  if (req.cancel) {
    req.cancel->set_stop_hook([de_link, id = a.id] {
      (void)de_link->send(
          Json{{"type", "call"}, {"call_id", 0}, {"cmd", "stop"}, {"request_id", id}},
          kCleanupTimeout);
    });
  }
  // A decode's length grows with its tokens, so its call is timed from its last token event: a
  // node that keeps streaming is never cut off (a long generation would otherwise be retried
  // from scratch, and time out again), one that stops streaming is.
  engine::DecodeRequest dec{a.id, pre_out->first_token};
  auto dec_out = engine::call_node<engine::DecodeReply>(
      *de_link, "decode", dec, call_timeout,
      [&a] { return Clock::time_point(Clock::duration(a.last_event.load(std::memory_order_relaxed))); });
  if (!dec_out.is_ok()) {
    cleanup(dec_out.status());
    return dec_out.status();
  }
  prepared = false;  // the decode consumed the buffer
  out.bytes += dec_out->bytes;
  // Whatever the events did not deliver yet goes to the client now, in order.
  {
    std::lock_guard lock(a.mu);
    if (dec_out->output_tokens.size() > a.delivered) {
      std::vector<int32_t> rest(dec_out->output_tokens.begin() + static_cast<int64_t>(a.delivered),
                                dec_out->output_tokens.end());
      a.delivered = dec_out->output_tokens.size();
      if (req.on_tokens) req.on_tokens(rest);
    }
    a.streamed = dec_out->output_tokens;
  }
  out.output_tokens.insert(out.output_tokens.end(), dec_out->output_tokens.begin(),
                           dec_out->output_tokens.end());
  out.tpot_s = dec_out->tpot_s;
  out.persist_skipped_blocks += dec_out->persist_skipped_blocks;
  out.path = oracle ? sched::ReadPath::kOracle : pre.path;
  out.pe = a.pe->id;
  out.de = a.de->id;
  out.pe_engine = pe_engine;
  out.de_engine = de_engine;
  if (a.base > 0) {
    out.migrated_hit_tokens = a.hit;
    out.migrated_read_bytes = prep_out->bytes.storage_read + pre_out->bytes.storage_read;
  }
  cleanup(Status::ok());
  return Status::ok();
}

Result<TurnResult> SchedulerService::run_turn(TurnRequest request) {
  const auto start = Clock::now();
  TurnResult out;
  out.prompt_tokens = static_cast<int64_t>(request.tokens.size());
  std::vector<int32_t> produced;  // tokens of attempts whose decode node died mid-way
  sched::PathRequest path = request.path;
  Status last;
  for (int attempt = 1; attempt <= config_.scheduler.max_attempts; ++attempt) {
    auto ap = std::make_shared<Attempt>();
    Attempt& a = *ap;
    a.id = next_request_id_.fetch_add(1, std::memory_order_relaxed);
    a.prompt = request.tokens;
    a.prompt.insert(a.prompt.end(), produced.begin(), produced.end());
    a.gen = request.gen_tokens - static_cast<int64_t>(produced.size());
    a.path = path;
    a.oracle_hit = request.oracle_hit_tokens + static_cast<int64_t>(produced.size());
    a.base = static_cast<int64_t>(produced.size());
    a.request = &request;
    a.turn_start = start;
    out.attempts = attempt;
    out.output_tokens = produced;
    last = run_attempt(request, ap, out);
    if (attempt == 1) out.hit_tokens = a.hit;
    if (last.is_ok()) {
      if (out.ttft_s == 0) out.ttft_s = seconds_since(start);
      return out;
    }
    if (request.cancel && request.cancel->cancelled()) {
      return Status::aborted("the turn was cancelled");
    }
    const auto dead = [&](const std::shared_ptr<Node>& nd) {
      if (nd == nullptr) return false;
      const std::shared_ptr<engine::NodeLink> l = link_of(*nd);
      return l == nullptr || l->closed();
    };
    const bool pe_dead = dead(a.pe);
    const bool de_dead = dead(a.de);
    const bool store_miss = last.is_not_found() || last.is_io_error() || last.is_corruption();
    if (store_miss && !pe_dead && !de_dead && path != sched::ReadPath::kRecompute) {
      // A hit block vanished between the prefix match and the read (evicted), failed its
      // checks (quarantined as corrupt) or could not be read (EIO): the turn is recomputed,
      // never served from wrong bytes.
      DP_LOG_WARN("{}; recomputing the turn", last.to_string());
      path = sched::ReadPath::kRecompute;
      continue;
    }
    if (de_dead) {
      // Migrate: what the dead decode node streamed is kept; the next attempt decodes the rest
      // on another node, loading the blocks persisted so far.
      std::vector<int32_t> streamed;
      {
        std::lock_guard lock(a.mu);
        if (a.decoding) streamed = a.streamed;
      }
      if (!streamed.empty()) {
        produced.insert(produced.end(), streamed.begin(), streamed.end());
        out.migrated = true;
        out.migrated_tokens = static_cast<int64_t>(produced.size());
      }
      out.failed_nodes.push_back(a.de_node);
      if (static_cast<int64_t>(produced.size()) >= request.gen_tokens) {
        out.output_tokens = produced;
        return out;
      }
    }
    if (pe_dead) out.failed_nodes.push_back(a.pe_node);
    const bool retryable = pe_dead || de_dead || last.is_unavailable() || last.is_timed_out();
    if (!retryable) return last;
    out.retried = true;
    DP_LOG_WARN("turn attempt {} failed ({}); {}", attempt, last.to_string(),
                out.migrated ? "migrating its decode" : "retrying on live nodes");
  }
  return last.with_context(
      fmt::format("the turn failed after {} attempts", config_.scheduler.max_attempts));
}

}  // namespace dualpath::serve
