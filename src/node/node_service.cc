#include "node/node_service.h"

#include <fmt/format.h>

#include <vector>

#include "common/log.h"
#include "control/convert.h"
#include "control/rpc.h"

namespace dualpath::node {

namespace {

// How often the watcher looks at the running calls' contexts.
constexpr auto kCancelPoll = std::chrono::milliseconds(10);

// One catch boundary per entry point: a handler that throws (a bug, an allocation failure)
// answers INTERNAL, and the node goes on.
template <class F>
grpc::Status guarded(const engine::NodeId& self, std::string_view call, F&& f) {
  try {
    return f();
  } catch (const std::exception& e) {
    return control::to_grpc(dualpath::Status::internal(
        fmt::format("{}: '{}' failed with an exception: {}", self.name(), call, e.what())));
  }
}

}  // namespace

// Registers a running call with the watcher for its lifetime.
class NodeService::Watch {
 public:
  Watch(NodeService& s, grpc::ServerContext* ctx, uint64_t request_id) : s_(s), ctx_(ctx) {
    MutexLock lock(s_.mu_);
    s_.watched_[ctx_] = request_id;
  }
  ~Watch() {
    MutexLock lock(s_.mu_);
    s_.watched_.erase(ctx_);
  }
  Watch(const Watch&) = delete;
  Watch& operator=(const Watch&) = delete;

 private:
  NodeService& s_;
  grpc::ServerContext* ctx_;
};

NodeService::NodeService() { watcher_ = std::thread([this] { watch_loop(); }); }

void NodeService::install(engine::NodeRuntime& runtime,
                          std::unique_ptr<engine::PrefillEngine> pe,
                          std::unique_ptr<engine::DecodeEngine> de) {
  rt_ = &runtime;
  pe_ = std::move(pe);
  de_ = std::move(de);
  ready_.store(true, std::memory_order_release);
}

NodeService::~NodeService() {
  {
    MutexLock lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (watcher_.joinable()) watcher_.join();
}

engine::NodeId NodeService::self() const {
  if (!ready_.load(std::memory_order_acquire)) return {};
  return {rt_->setup().role, rt_->setup().index};
}

void NodeService::set_session(std::string token) {
  MutexLock lock(mu_);
  session_ = std::move(token);
}

grpc::Status NodeService::check_session(const grpc::ServerContext& ctx) const {
  if (!ready_.load(std::memory_order_acquire)) {
    return control::to_grpc(dualpath::Status::unavailable("the node is starting"));
  }
  const auto& md = ctx.client_metadata();
  auto it = md.find(control::kSessionMetadata);
  MutexLock lock(mu_);
  if (it != md.end() && !session_.empty() &&
      std::string_view(it->second.data(), it->second.size()) == session_) {
    return grpc::Status::OK;
  }
  return control::to_grpc(dualpath::Status::failed_precondition(fmt::format(
      "{}: the call does not carry this node's session (it serves the scheduler it registered "
      "with)",
      self().name())));
}

void NodeService::watch_loop() {
  MutexLock lock(mu_);
  while (!stopping_) {
    std::vector<uint64_t> cancel;
    for (const auto& [ctx, id] : watched_) {
      if (ctx->IsCancelled()) cancel.push_back(id);  // thread-safe in the synchronous API
    }
    if (!cancel.empty()) {
      lock.unlock();
      for (uint64_t id : cancel) cancel_request(id);
      lock.lock();
    }
    (void)cv_.wait_for(lock, kCancelPoll);
  }
}

void NodeService::cancel_request(uint64_t request_id) {
  if (!ready_.load(std::memory_order_acquire)) return;
  rt_->cancels().cancel(request_id);
  if (pe_) pe_->notify_cancel();
}

void NodeService::cancel_all() {
  if (!ready_.load(std::memory_order_acquire)) return;
  rt_->cancels().cancel_all();
  if (pe_) pe_->notify_cancel();
}

void NodeService::tick() {
  if (!ready_.load(std::memory_order_acquire)) return;
  if (de_) de_->reap_expired();
  if (pe_) pe_->release_quarantined();
}

engine::LoadReport NodeService::report() const {
  engine::LoadReport l;
  const auto q = rt_->storage_nic().read_queue.snapshot();
  l.read_queue_tokens = q.tokens;
  l.read_queue_bytes = q.bytes;
  l.dram_used_bytes = rt_->dram().used_bytes();
  l.dram_bytes = rt_->dram().total_bytes();
  if (store::DramTier* tier = rt_->dram_tier()) l.dram_tier_bytes = tier->stats().used_bytes;
  for (int e = 0; e < rt_->engines(); ++e) l.hbm_used_bytes.push_back(rt_->hbm(e).used_bytes());
  l.requests = static_cast<int64_t>(rt_->cancels().running() + (de_ ? de_->prepared() : 0));
  return l;
}

grpc::Status NodeService::Peers(grpc::ServerContext* ctx, const pb::PeersRequest* req, pb::Ack*) {
  return guarded(self(), "peers", [&] {
    if (auto s = check_session(*ctx); !s.ok()) return s;
    std::vector<engine::NodeHello> hellos;
    for (const pb::Hello& h : req->peers()) {
      auto hello = control::from_proto(h);
      if (!hello.is_ok()) return control::to_grpc(hello.status());
      hellos.push_back(std::move(hello).value());
    }
    return control::to_grpc(rt_->connect_peers(hellos, req->reset()));
  });
}

grpc::Status NodeService::Prepare(grpc::ServerContext* ctx, const pb::PrepareRequest* req,
                                  pb::PrepareReply* reply) {
  return guarded(self(), "prepare", [&] {
    if (auto s = check_session(*ctx); !s.ok()) return s;
    if (!de_) return control::to_grpc(dualpath::Status::invalid_argument(
                  fmt::format("{}: prepare goes to a decode node", self().name())));
    auto r = control::prepare_request(*req, rt_->layout().block_tokens);
    if (!r.is_ok()) return control::to_grpc(r.status());
    Watch watch(*this, ctx, r->request_id);
    auto out = de_->prepare(*r);
    if (!out.is_ok()) return control::to_grpc(out.status());
    *reply = control::to_proto(*out);
    return grpc::Status::OK;
  });
}

grpc::Status NodeService::Prefill(grpc::ServerContext* ctx, const pb::PrefillRequest* req,
                                  grpc::ServerWriter<pb::PrefillEvent>* writer) {
  return guarded(self(), "prefill", [&] {
    if (auto s = check_session(*ctx); !s.ok()) return s;
    if (!pe_) return control::to_grpc(dualpath::Status::invalid_argument(
                  fmt::format("{}: prefill goes to a prefill node", self().name())));
    auto r = control::prefill_request(*req, rt_->layout().block_tokens);
    if (!r.is_ok()) return control::to_grpc(r.status());
    Watch watch(*this, ctx, r->request_id);
    const uint64_t id = r->request_id;
    const int64_t read_tokens = r->path == sched::ReadPath::kSplit ? r->pe_read_tokens
                                                                   : r->hit_tokens;
    auto out = pe_->prefill(*r, [&] {
      pb::PrefillEvent e;
      e.mutable_read_done()->set_tokens(read_tokens);
      if (!writer->Write(e)) cancel_request(id);  // the scheduler stopped reading
    });
    if (!out.is_ok()) return control::to_grpc(out.status());
    pb::PrefillEvent done;
    *done.mutable_done() = control::to_proto(*out);
    writer->Write(done);
    return grpc::Status::OK;
  });
}

grpc::Status NodeService::Decode(grpc::ServerContext* ctx, const pb::DecodeRequest* req,
                                 grpc::ServerWriter<pb::DecodeEvent>* writer) {
  return guarded(self(), "decode", [&] {
    if (auto s = check_session(*ctx); !s.ok()) return s;
    if (!de_) return control::to_grpc(dualpath::Status::invalid_argument(
                  fmt::format("{}: decode goes to a decode node", self().name())));
    auto r = control::decode_request(*req);
    if (!r.is_ok()) return control::to_grpc(r.status());
    Watch watch(*this, ctx, r->request_id);
    const uint64_t id = r->request_id;
    auto sink = [&](int64_t start, std::span<const int32_t> tokens) {
      pb::DecodeEvent e;
      e.mutable_tokens()->set_start(start);
      e.mutable_tokens()->mutable_tokens()->Add(tokens.begin(), tokens.end());
      if (!writer->Write(e)) cancel_request(id);  // the scheduler stopped reading
    };
    auto out = de_->decode(*r, sink);
    if (!out.is_ok()) return control::to_grpc(out.status());
    pb::DecodeEvent done;
    *done.mutable_done() = control::to_proto(*out);
    writer->Write(done);
    return grpc::Status::OK;
  });
}

grpc::Status NodeService::Release(grpc::ServerContext* ctx, const pb::RequestRef* req, pb::Ack*) {
  return guarded(self(), "release", [&] {
    if (auto s = check_session(*ctx); !s.ok()) return s;
    return control::to_grpc(de_ ? de_->release(req->request_id()) : dualpath::Status::ok());
  });
}

grpc::Status NodeService::Cancel(grpc::ServerContext* ctx, const pb::RequestRef* req, pb::Ack*) {
  return guarded(self(), "cancel", [&] {
    if (auto s = check_session(*ctx); !s.ok()) return s;
    cancel_request(req->request_id());
    return control::to_grpc(de_ ? de_->release(req->request_id()) : dualpath::Status::ok());
  });
}

grpc::Status NodeService::Stop(grpc::ServerContext* ctx, const pb::RequestRef* req, pb::Ack*) {
  return guarded(self(), "stop", [&] {
    if (auto s = check_session(*ctx); !s.ok()) return s;
    rt_->cancels().stop(req->request_id());
    return grpc::Status::OK;
  });
}

grpc::Status NodeService::Status(grpc::ServerContext* ctx, const pb::StatusRequest*,
                                 pb::LoadReport* reply) {
  return guarded(self(), "status", [&] {
    if (auto s = check_session(*ctx); !s.ok()) return s;
    *reply = control::to_proto(report());
    return grpc::Status::OK;
  });
}

}  // namespace dualpath::node
