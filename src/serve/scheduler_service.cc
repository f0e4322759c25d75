#include "serve/scheduler_service.h"

#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <deque>
#include <map>
#include <optional>
#include <thread>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "common/log.h"
#include "control/control.grpc.pb.h"
#include "control/convert.h"
#include "control/credential.h"
#include "engine/backend_factory.h"
#include "engine/engine_config.h"
#include "engine/node_runtime.h"
#include "model/cost_model.h"
#include "sched/scheduler_settings.h"
#include "serve/node_registry.h"
#include "serve/placement.h"
#include "serve/turn_runner.h"
#include "control/node_client.h"
#include "control/rpc.h"

namespace dualpath::serve {

namespace pb = ::dualpath::control::v1;
using engine::NodeId;
using engine::NodeRole;

namespace {

// Beta for the CPU reference model (no cost model prices it): about what the tiny fp32 model
// prefills per second on one core here (docs/compute.md).
constexpr double kCpuPrefillTokensPerS = 8000;

std::string session_of(const grpc::ServerContextBase& ctx) {
  const auto& md = ctx.client_metadata();
  auto it = md.find(control::kSessionMetadata);
  if (it == md.end()) return {};
  return std::string(it->second.data(), it->second.size());
}

}  // namespace

// The Scheduler service (control.proto) on the registry: Register (a unary call on gRPC's sync
// pool), and each node's Session stream (its hello, then its reports: the lease) on gRPC's
// callback API. A session holds no thread: a report is handled on the gRPC thread that read it.
// With a thread blocked in Read per session, 132 nodes' sessions kept 132 threads in gRPC's
// poller rotation, and every event in the process (a node's reply to a turn's call, a report)
// woke and put back to sleep several of them: a third of the scheduler's context switches at
// 44P88D (docs/serve.md, "At the paper's scale").
class SchedulerEndpoint final : public pb::Scheduler::WithCallbackMethod_Session<pb::Scheduler::Service> {
 public:
  SchedulerEndpoint(NodeRegistry& registry, std::function<engine::NodeSetup(const NodeId&)> setup)
      : registry_(registry), setup_(std::move(setup)) {}

  grpc::Status Register(grpc::ServerContext*, const pb::RegisterRequest* req,
                        pb::RegisterReply* reply) override {
    try {
      auto r = registry_.reserve(*req);
      if (!r.is_ok()) {
        DP_LOG_WARN("refused a node: {}", r.status().message());
        return control::to_grpc(r.status());
      }
      reply->set_index(r->index);
      *reply->mutable_setup() = control::to_proto(setup_(registry_.id_of(r->node)));
      reply->set_session(r->session);
      return grpc::Status::OK;
    } catch (const std::exception& e) {
      return control::to_grpc(Status::internal(fmt::format("registration failed: {}", e.what())));
    }
  }

  grpc::ServerBidiReactor<pb::SessionMessage, pb::SchedulerMessage>* Session(
      grpc::CallbackServerContext* ctx) override {
    return new SessionReactor(*this, ctx);
  }

  // Ends a session (its node was declared dead, or the scheduler stops): its stream is cancelled.
  // With `quit`, the node is told to exit first.
  void end_session(const std::string& session, bool quit) {
    std::shared_ptr<SessionReactor::Gate> gate;
    {
      MutexLock lock(mu_);
      auto it = sessions_.find(session);
      if (it == sessions_.end()) return;
      gate = it->second;
    }
    SessionReactor::end(*gate, quit);
  }
  void end_all(bool quit) {
    std::vector<std::shared_ptr<SessionReactor::Gate>> all;
    {
      MutexLock lock(mu_);
      for (auto& [s, g] : sessions_) all.push_back(g);
    }
    for (auto& g : all) SessionReactor::end(*g, quit);
  }

  // Waits for the joining threads (each join's calls have deadlines).
  ~SchedulerEndpoint() override {
    MutexLock lock(mu_);
    while (joining_ > 0) cv_.wait(lock);
  }

 private:
  // One node's session. Every operation on the stream (a read, a write, a cancel, the finish)
  // enters the gate first: once the finish has begun none starts, and the finish waits for those
  // under way, so the reactor (deleted in OnDone, which follows the finish) is never touched
  // after it is gone. No lock is held across a gRPC call: gRPC may run a reaction inline.
  class SessionReactor final
      : public grpc::ServerBidiReactor<pb::SessionMessage, pb::SchedulerMessage> {
   public:
    struct Gate {
      Mutex mu;
      SessionReactor* reactor DP_GUARDED_BY(mu) = nullptr;  // null once the finish began
      int users DP_GUARDED_BY(mu) = 0;                       // operations under way
      std::optional<grpc::Status> finish_pending DP_GUARDED_BY(mu);
      // Messages to the node, one write at a time; the stream is cancelled once they are out
      // when cancel_when_written.
      std::deque<pb::SchedulerMessage> writes DP_GUARDED_BY(mu);
      bool writing DP_GUARDED_BY(mu) = false;
      bool cancel_when_written DP_GUARDED_BY(mu) = false;
      bool ending DP_GUARDED_BY(mu) = false;
    };

    SessionReactor(SchedulerEndpoint& ep, grpc::CallbackServerContext* ctx)
        : ep_(ep), ctx_(ctx), session_(session_of(*ctx)), gate_(std::make_shared<Gate>()) {
      {
        MutexLock lock(gate_->mu);
        gate_->reactor = this;
      }
      if (ep_.registry_.node_of_session(session_) < 0) {
        finish(control::to_grpc(
            Status::failed_precondition("no registration holds this session: register first")));
        return;
      }
      read();
    }

    // From any thread: cancels the stream, after the Quit message when `quit`.
    static void end(Gate& g, bool quit) {
      if (quit) {
        pb::SchedulerMessage q;
        q.mutable_quit();
        SessionReactor* r = nullptr;
        {
          MutexLock lock(g.mu);
          if (g.reactor == nullptr || g.ending) return;
          g.ending = true;
          r = g.reactor;
          ++g.users;  // keeps the reactor until write() has run
        }
        r->write(std::move(q), /*then_cancel=*/true);
        r->leave();
        return;
      }
      SessionReactor* r = nullptr;
      {
        MutexLock lock(g.mu);
        if (g.reactor == nullptr) return;
        g.ending = true;
        r = g.reactor;
        ++g.users;
      }
      r->ctx_->TryCancel();  // the pending read fails: ended()
      r->leave();
    }

    void OnReadDone(bool ok) override {
      try {
        if (!ok) return ended();
        if (!joined_) return hello();
        if (in_.has_report()) {
          auto report = control::from_proto(in_.report());
          if (!report.is_ok()) {
            DP_LOG_WARN("bad load report from {}: {}", name_, report.status().message());
          } else if (!ep_.registry_.report(session_, *report)) {
            return ended();  // a replaced or dead registration
          }
        }
        read();
      } catch (const std::exception& e) {  // a bug: the session ends, the scheduler goes on
        DP_LOG_ERROR("session {}: {}", name_, e.what());
        ended();
      }
    }

    void OnWriteDone(bool) override {
      bool next = false, cancel = false;
      {
        MutexLock lock(gate_->mu);
        gate_->writing = false;
        if (gate_->reactor != nullptr && !gate_->finish_pending) {
          if (!gate_->writes.empty()) {
            out_ = std::move(gate_->writes.front());
            gate_->writes.pop_front();
            gate_->writing = next = true;
          } else if (gate_->cancel_when_written) {
            cancel = true;  // the Quit is out: the node exits, its stream ends
          }
          if (next || cancel) ++gate_->users;
        }
      }
      if (next) StartWrite(&out_);
      if (cancel) ctx_->TryCancel();
      if (next || cancel) leave();
    }

    void OnDone() override {
      {
        MutexLock lock(ep_.mu_);
        auto it = ep_.sessions_.find(session_);
        if (it != ep_.sessions_.end() && it->second == gate_) ep_.sessions_.erase(it);
      }
      delete this;
    }

   private:
    void read() {
      {
        MutexLock lock(gate_->mu);
        if (gate_->reactor == nullptr || gate_->finish_pending) return;
        ++gate_->users;
      }
      StartRead(&in_);
      leave();
    }

    // Queues a message to the node (one write at a time).
    void write(pb::SchedulerMessage m, bool then_cancel) {
      {
        MutexLock lock(gate_->mu);
        if (gate_->reactor == nullptr || gate_->finish_pending) return;
        if (then_cancel) gate_->cancel_when_written = true;
        if (gate_->writing) {
          gate_->writes.push_back(std::move(m));
          return;
        }
        gate_->writing = true;
        out_ = std::move(m);
        ++gate_->users;
      }
      StartWrite(&out_);
      leave();
    }

    // The node's stream ended (it closed, it was cancelled, its registration went): the registry
    // hears it once, and the call is finished.
    void ended() {
      if (!std::exchange(ended_, true)) {
        ep_.registry_.session_ended(
            session_, Status::unavailable(joined_ ? fmt::format("{}: its session ended", name_)
                                                  : "its session ended before its hello"));
      }
      finish(joined_ ? grpc::Status::OK : grpc::Status::CANCELLED);
    }

    // The first message: a start failure, or the hello. Joining calls the other nodes (each call
    // with its deadline), so it runs on a thread of its own, not on gRPC's.
    void hello() {
      // Each failure tells the registry itself (ended_: not again from ended()).
      if (in_.has_failed()) {
        ended_ = true;
        ep_.registry_.start_failed(
            session_, Status(status_code_from_int(in_.failed().code()), in_.failed().error()));
        return finish(grpc::Status::OK);
      }
      if (!in_.has_hello()) {
        ended_ = true;
        ep_.registry_.session_ended(session_,
                                    Status::invalid_argument("its session began without a hello"));
        return finish(control::to_grpc(
            Status::invalid_argument("a session begins with the node's hello")));
      }
      auto hello = control::from_proto(in_.hello());
      if (!hello.is_ok()) {
        ended_ = true;
        ep_.registry_.session_ended(session_, hello.status());
        return finish(control::to_grpc(hello.status()));
      }
      {
        MutexLock lock(ep_.mu_);
        ep_.sessions_[session_] = gate_;  // end() reaches it from now on
        ++ep_.joining_;
      }
      try {
        std::thread([this, ep = &ep_, h = std::move(*hello)] {
          join(h);  // the reactor may be gone after this
          ep->joined();
        }).detach();
      } catch (const std::exception& e) {  // no thread (std::system_error), no memory
        ep_.joined();
        ended_ = true;
        const Status why = Status::unavailable(
            fmt::format("the scheduler cannot start a thread to join the node: {}", e.what()));
        ep_.registry_.session_ended(session_, why);
        finish(control::to_grpc(why));
      }
    }

    void join(const engine::NodeHello& hello) {
      try {
        auto node = ep_.registry_.join(session_, hello);
        if (!node.is_ok()) {
          DP_LOG_ERROR("{}", node.status().message());
          ended_ = true;
          ep_.registry_.session_ended(session_, node.status());
          return finish(control::to_grpc(node.status()));
        }
        name_ = ep_.registry_.id_of(*node).name();
        joined_ = true;
        DP_LOG_INFO("{} registered (control service at {})", name_,
                    ep_.registry_.status()[static_cast<size_t>(*node)].control_address);
        pb::SchedulerMessage joined;
        joined.mutable_joined();
        write(std::move(joined), /*then_cancel=*/false);
        read();  // a session ended meanwhile: the read fails at once
      } catch (const std::exception& e) {
        DP_LOG_ERROR("joining {}: {}", name_, e.what());
        ended();
      }
    }

    // Finishes the call once no other operation is under way (the last one to leave does).
    void finish(const grpc::Status& status) {
      {
        MutexLock lock(gate_->mu);
        if (gate_->reactor == nullptr || gate_->finish_pending) return;
        gate_->finish_pending = status;
        if (gate_->users > 0) return;
        gate_->reactor = nullptr;
      }
      Finish(status);
    }

    void leave() {
      std::optional<grpc::Status> status;
      {
        MutexLock lock(gate_->mu);
        if (--gate_->users > 0 || !gate_->finish_pending || gate_->reactor == nullptr) return;
        gate_->reactor = nullptr;
        status = gate_->finish_pending;
      }
      Finish(*status);
    }

    SchedulerEndpoint& ep_;
    grpc::CallbackServerContext* ctx_;
    const std::string session_;
    const std::shared_ptr<Gate> gate_;
    pb::SessionMessage in_;     // the one read under way
    pb::SchedulerMessage out_;  // the one write under way (gate_->writing)
    // Touched by one step at a time: the reads follow each other, and the join runs between the
    // hello's read and the next.
    std::string name_ = "a node";
    std::atomic<bool> joined_{false};
    bool ended_ = false;
  };

  void joined() {
    MutexLock lock(mu_);
    if (--joining_ == 0) cv_.notify_all();
  }

  NodeRegistry& registry_;
  std::function<engine::NodeSetup(const NodeId&)> setup_;
  Mutex mu_;
  CondVar cv_;
  std::map<std::string, std::shared_ptr<SessionReactor::Gate>> sessions_ DP_GUARDED_BY(mu_);
  int joining_ DP_GUARDED_BY(mu_) = 0;  // join threads running
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
  sched::SchedulerInputs in;
  in.typical = config.typical_turn;
  in.pe_group_gpus = cfg.backend_spec().prefill_ep_gpus;
  // An engine of a live node computes on compute_slots GPUs at once (engine_config.h).
  in.gpus_per_engine = std::max(1, cfg.compute_slots());
  // The DE HBM budget in the units the turn planner prices needs in (turn_planner.h).
  in.de_hbm_bytes = static_cast<double>(cfg.hbm_bytes) / cfg.live_kv_scale();
  in.block_tokens = cfg.block_tokens;
  const double live_snic_bytes_per_s = cfg.emulated_snic_gbps() * 1e9 / 8;
  std::optional<model::CostModel> cost;
  if (cfg.compute == "modeled") {
    DP_ASSIGN_OR_RETURN(model::ModelSpec preset, model::model_preset(cfg.model));
    cost.emplace(preset, cfg.hardware, cfg.efficiency);
    in.cost = &*cost;
    // Alpha in the cost model's units, as the simulator prices it: emulated seconds and
    // full-size KV. The limiter runs at the usable rate x kv_scale / time_dilation in real
    // units (engine_config.h), so its rate in model units is that x time_dilation / kv_scale.
    in.snic_bytes_per_s =
        cfg.snic_from_hardware ? model::usable_snic_bytes_per_s(cfg.hardware, cfg.efficiency)
                               : live_snic_bytes_per_s * cfg.time_dilation / cfg.kv_scale;
    in.kv_bytes_per_token = static_cast<double>(preset.stored_bytes_per_token());
  } else {
    // The CPU model: no cost model prices it; its measured rate and its real KV size.
    in.prefill_tokens_per_s = kCpuPrefillTokensPerS;
    in.snic_bytes_per_s = live_snic_bytes_per_s;
    in.kv_bytes_per_token =
        static_cast<double>(kv_shape.layers * kv_shape.bytes_per_token_per_layer);
  }
  in.recompute_auto = config.cache_applies() && config.cache.recompute == "auto";
  return sched::make_cluster_scheduler_params(config.scheduler, in);
}

SchedulerService::SchedulerService(const ServeConfig& config) : config_(config) {}

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
  setup.heartbeat = heartbeat_of(config_.scheduler);
  setup.transports = cfg.transport.context.transports;
  setup.net_devices = cfg.transport.context.net_devices;
  setup.poll_us = cfg.transport.poll_us;
  setup.poll_in_flight_us = cfg.transport.poll_in_flight_us;
  setup.snic_gbps = cfg.emulated_snic_gbps();
  setup.compute_slots = id.role == NodeRole::kPrefill ? cfg.compute_slots() : 0;
  setup.engines = cfg.engines_per_node;
  if (id.role == NodeRole::kDecode) {
    setup.dram_tier_bytes = config_.tier_bytes();
    setup.dram_tier_ttl = config_.tier_ttl();
  }
  return setup;
}

Result<std::unique_ptr<SchedulerService>> SchedulerService::start(const ServeConfig& config) {
  std::unique_ptr<SchedulerService> s(new SchedulerService(config));
  engine::EngineConfig& cfg = const_cast<engine::EngineConfig&>(s->config_.engine);
  // A private directory for what the service makes itself: the store when no data path was
  // given, the ephemeral credential of its local nodes.
  {
    const char* base = std::getenv("TMPDIR");
    std::string pattern = std::string(base ? base : "/tmp") + "/dualpath_serve.XXXXXX";
    if (::mkdtemp(pattern.data()) == nullptr) {
      return Status::io_error(fmt::format("cannot make a temporary directory {}: {}", pattern,
                                          std::strerror(errno)));
    }
    s->temp_dir_ = pattern;
  }
  if (cfg.data_paths.empty()) cfg.data_paths = {s->temp_dir_ + "/store"};
  std::filesystem::create_directories(cfg.data_paths.front());
  DP_RETURN_IF_ERROR(cfg.validate());
  DP_ASSIGN_OR_RETURN(engine::ModelKvShape shape, engine::model_kv_shape(cfg));
  s->layout_ = store::BlockLayout{shape.layers, cfg.block_tokens, shape.bytes_per_token_per_layer};
  if (cfg.compute == "modeled") {
    DP_ASSIGN_OR_RETURN(model::ModelSpec preset, model::model_preset(cfg.model));
    s->cost_.emplace(preset, cfg.hardware, cfg.efficiency);
  }
  store::FileStoreOptions so;
  so.data_paths = cfg.data_paths;
  so.model = engine::kv_fingerprint(cfg.backend_spec());
  so.layout = s->layout_;
  DP_ASSIGN_OR_RETURN(s->store_, store::FileStore::open(so));

  // Who may join: holders of the cluster credential (mutual TLS), or anyone on this host.
  const std::string& host = config.scheduler.host;
  if (!config.scheduler.cluster_key.empty()) {
    DP_ASSIGN_OR_RETURN(control::ClusterCredential cred,
                        control::read_credential(config.scheduler.cluster_key));
    DP_ASSIGN_OR_RETURN(s->security_.tls, control::mint_identity(cred, "scheduler"));
    s->cluster_key_path_ = config.scheduler.cluster_key;
  } else if (config.ephemeral_credential) {
    DP_ASSIGN_OR_RETURN(control::ClusterCredential cred, control::generate_credential());
    s->cluster_key_path_ = s->temp_dir_ + "/cluster.key";
    DP_RETURN_IF_ERROR(control::write_credential(cred, s->cluster_key_path_));
    DP_ASSIGN_OR_RETURN(s->security_.tls, control::mint_identity(cred, "scheduler"));
  } else if (!control::is_loopback_host(host)) {
    return Status::failed_precondition(fmt::format(
        "the scheduler would listen on {} (scheduler.host, --scheduler-host) without a cluster "
        "credential, so anyone who reaches that port could join as a node; give --cluster-key "
        "FILE (make one with `dualpath keygen --out FILE`), or keep the scheduler on 127.0.0.1",
        host));
  }

  // The parts: the central scheduler, the registry of nodes, the turn runner.
  DP_ASSIGN_OR_RETURN(const sched::ClusterShape shape_of, scheduler_shape(s->config_));
  DP_ASSIGN_OR_RETURN(const sched::ClusterSchedulerParams params, scheduler_params(s->config_));
  s->placer_ = std::make_unique<Placer>(shape_of, params, config.scheduler.fetch_interval(),
                                        s->clock_);
  SchedulerService* self = s.get();
  RegistryOptions ro;
  ro.prefill_nodes = cfg.prefill_nodes;
  ro.decode_nodes = cfg.decode_nodes;
  ro.lease_ttl = config.scheduler.lease_ttl;
  ro.origin = config.origin;
  RegistryListener listener;
  listener.on_alive = [self](int node, bool alive) {
    self->placer_->set_node_alive(node, alive);
    self->cv_.notify_all();
  };
  listener.on_dead = [self](int node, const Status& why, const std::string& session) {
    self->on_dead(node, why, session);
  };
  listener.on_report = [self](int node, const engine::LoadReport& r) {
    self->placer_->set_reported_read_queue(node, r.read_queue_tokens);
  };
  const control::Security security = s->security_;
  s->registry_ = std::make_unique<NodeRegistry>(
      ro,
      [security, clock = &s->clock_](const std::string& address, const std::string& name,
                                     const std::string& session) {
        return std::make_shared<control::NodeClient>(
            control::make_channel(address, security, {}, control::kNodeMaxMessageBytes), name,
            session, *clock);
      },
      listener, s->clock_);
  TurnRunner::Parts parts;
  parts.config = &s->config_;
  parts.registry = s->registry_.get();
  parts.placer = s->placer_.get();
  parts.store = s->store_.get();
  parts.layout = s->layout_;
  DP_ASSIGN_OR_RETURN(parts.planner, make_turn_planner(s->config_, s->cost_ ? &*s->cost_ : nullptr));
  parts.clock = &s->clock_;
  s->runner_ = std::make_unique<TurnRunner>(parts);
  s->endpoint_ = std::make_unique<SchedulerEndpoint>(
      *s->registry_, [self](const NodeId& id) { return self->setup_for(id); });

  // The port. Sessions hold no thread (the callback API); the sync pool answers registrations,
  // which may all come at once.
  grpc::ServerBuilder builder;
  int port = 0;
  const int threads = std::max(64, 2 * (cfg.prefill_nodes + cfg.decode_nodes) + 16);
  control::configure_server(builder, fmt::format("{}:{}", host, config.scheduler.port),
                            s->security_, {}, control::kSchedulerMaxMessageBytes, threads, &port);
  builder.RegisterService(s->endpoint_.get());
  s->server_ = builder.BuildAndStart();
  if (s->server_ == nullptr || port == 0) {
    return Status::unavailable(fmt::format(
        "the scheduler cannot listen on {}:{} (scheduler.host and scheduler.port in the config, "
        "--scheduler-host and --scheduler-port on the command line): is another `dualpath serve` "
        "running there? Use another port, or 0 for any free one",
        host, config.scheduler.port));
  }
  s->port_ = static_cast<uint16_t>(port);
  s->lease_thread_ = std::thread([self] { self->lease_loop(); });
  return s;
}

SchedulerService::~SchedulerService() {
  shutdown();
  if (lease_thread_.joinable()) lease_thread_.join();
  if (server_) server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  server_.reset();
  endpoint_.reset();
  runner_.reset();
  registry_.reset();  // closes the nodes' clients
  placer_.reset();
  store_.reset();
  if (!temp_dir_.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(temp_dir_, ec);
  }
}

std::string SchedulerService::address() const {
  return fmt::format("{}:{}", config_.scheduler.host, port_);
}

void SchedulerService::shutdown(bool quit_nodes) {
  {
    MutexLock lock(mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  cv_.notify_all();
  placer_->shutdown();
  runner_->shutdown();
  // The nodes hear Quit (or, as after a crash, only that their sessions ended).
  endpoint_->end_all(quit_nodes);
  if (server_) server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
}

void SchedulerService::on_dead(int node, const Status& why, const std::string& session) {
  bool stopping = false;
  {
    MutexLock lock(mu_);
    stopping = stopping_;
  }
  if (!stopping) DP_LOG_WARN("{} is dead: {}", registry_->id_of(node).name(), why.message());
  placer_->set_node_alive(node, false);
  runner_->node_dead(node, why);
  endpoint_->end_session(session, /*quit=*/false);
  cv_.notify_all();
}

void SchedulerService::lease_loop() {
  const Duration period = std::clamp<Duration>(config_.scheduler.lease_ttl / 4,
                                               std::chrono::milliseconds(5),
                                               std::chrono::milliseconds(50));
  MutexLock lock(mu_);
  while (!stopping_) {
    (void)clock_.wait_until(cv_, lock, clock_.now() + period);
    if (stopping_) return;
    lock.unlock();
    registry_->expire();
    for (const auto& c : registry_->clients()) c->expire_idle();
    lock.lock();
  }
}

Status SchedulerService::wait_ready(Duration timeout) {
  const Duration deadline = clock_.now() + timeout;
  {
    MutexLock lock(mu_);
    while (!stopping_ && !registry_->all_alive()) {
      if (!clock_.wait_until(cv_, lock, std::min(deadline, clock_.now() + std::chrono::milliseconds(50))) &&
          clock_.now() >= deadline) {
        break;
      }
    }
    if (!stopping_ && registry_->all_alive()) return Status::ok();
  }
  const std::vector<std::string> missing = registry_->missing();
  return Status::timed_out(fmt::format(
      "{} of {} nodes did not register within {:.0f} s: {}; start them with `dualpath node "
      "--scheduler {} --role R{}`, or check their logs",
      missing.size(), registry_->nodes(), to_seconds(timeout), fmt::join(missing, ", "),
      address(), cluster_key_path_.empty() ? "" : " --cluster-key FILE"));
}

bool SchedulerService::ready() const { return registry_->all_alive(); }

std::vector<NodeStatus> SchedulerService::nodes() const { return registry_->status(); }

Result<TurnResult> SchedulerService::run_turn(TurnRequest request) {
  return runner_->run_turn(std::move(request));
}

void SchedulerService::with_scheduler_for_test(
    const std::function<void(sched::ClusterScheduler&)>& f) {
  placer_->with_scheduler(f);
}

}  // namespace dualpath::serve
