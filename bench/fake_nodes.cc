#include "bench/fake_nodes.h"

#include <fmt/format.h>
#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <map>
#include <thread>
#include <unordered_map>

#include "common/clock.h"
#include "common/log.h"
#include "common/mutex.h"
#include "control/control.grpc.pb.h"
#include "control/convert.h"
#include "control/report_pacer.h"
#include "control/rpc.h"
#include "engine/token_batcher.h"

namespace dualpath::bench {

namespace pb = ::dualpath::control::v1;

namespace {

constexpr int32_t kOutputToken = 'x';  // the byte tokenizer's id of "x"

// The marker id in a prompt (byte tokens), -1 when there is none.
int64_t marker_of(const google::protobuf::RepeatedField<int32_t>& tokens) {
  static constexpr std::string_view kTag = "ctl#";
  const int n = tokens.size();
  for (int i = 0; i + static_cast<int>(kTag.size()) < n; ++i) {
    bool match = true;
    for (size_t k = 0; k < kTag.size() && match; ++k) match = tokens[i + static_cast<int>(k)] == kTag[k];
    if (!match) continue;
    int64_t id = 0;
    int j = i + static_cast<int>(kTag.size());
    bool digits = false;
    for (; j < n && tokens[j] >= '0' && tokens[j] <= '9'; ++j) {
      id = id * 10 + (tokens[j] - '0');
      digits = true;
    }
    if (digits && j < n && tokens[j] == ';') return id;
  }
  return -1;
}

}  // namespace

std::string fake_request_marker(int64_t id) { return fmt::format("ctl#{};", id); }

class FakeNodes::Impl final : public pb::Node::Service {
 public:
  explicit Impl(const FakeNodesOptions& o) : options_(o), clock_(real_clock()) {}

  ~Impl() override { stop(); }

  dualpath::Status start() {
    grpc::ServerBuilder builder;
    int port = 0;
    control::configure_server(builder, "127.0.0.1:0", control::Security{}, {},
                              control::kNodeMaxMessageBytes, options_.max_streams, &port);
    builder.RegisterService(this);
    server_ = builder.BuildAndStart();
    if (server_ == nullptr || port == 0) {
      return dualpath::Status::unavailable("fake nodes: cannot listen on 127.0.0.1");
    }
    const std::string address = fmt::format("127.0.0.1:{}", port);
    auto channel = control::make_channel(options_.scheduler, control::Security{}, {},
                                         control::kSchedulerMaxMessageBytes);
    stub_ = pb::Scheduler::NewStub(channel);
    const Duration deadline = clock_.now() + options_.register_timeout;
    // Every node exists before the first registers (the reporter walks the published prefix
    // while the rest register): a node reports from the moment it joins, as a real one does.
    // Reporting only once all 132 had registered let the first ones' leases (2 s) run out on a
    // loaded machine, and a fake node does not register again.
    const int total = options_.prefill_nodes + options_.decode_nodes;
    for (int i = 0; i < total; ++i) nodes_.push_back(std::make_unique<Node>());
    auto add = [&](pb::Role role, int count) -> dualpath::Status {
      for (int i = 0; i < count; ++i) {
        if (published_.load(std::memory_order_relaxed) > 0 && options_.register_pause.count() > 0) {
          clock_.sleep_for(options_.register_pause);
        }
        pb::RegisterRequest reg;
        reg.set_role(role);
        reg.set_index(i);
        reg.set_protocol(control::kProtocolVersion);
        reg.set_host("bench-control");
        reg.set_pid(::getpid());
        reg.set_control_address(address);
        pb::RegisterReply reply;
        for (;;) {
          grpc::ClientContext ctx;
          control::set_timeout(ctx, std::chrono::seconds(10));
          const grpc::Status s = stub_->Register(&ctx, reg, &reply);
          if (s.ok()) break;
          if (clock_.now() > deadline) {
            return control::from_grpc(s, fmt::format("fake nodes: registering {} {}",
                                                     role == pb::ROLE_PREFILL ? "prefill" : "decode",
                                                     i));
          }
          clock_.sleep_for(std::chrono::milliseconds(100));  // the scheduler is starting
        }
        const size_t at = published_.load(std::memory_order_relaxed);
        Node* raw = nodes_[at].get();
        raw->setup = reply.setup();
        raw->session = reply.session();
        pb::Hello& h = raw->hello;
        h.set_role(role);
        h.set_index(reply.index());
        h.set_ucx_address("fake");  // forwarded to peers, never read: no data plane here
        h.set_dram_region("fake");
        for (int e = 0; e < std::max(1, reply.setup().engines()); ++e) h.add_hbm_regions("fake");
        if (at == 0) {  // every node's setup names the same interval
          report_interval_ = std::chrono::milliseconds(std::max<int64_t>(
              1, reply.setup().report_interval_ms() > 0 ? reply.setup().report_interval_ms() : 100));
          heartbeat_ = std::chrono::milliseconds(reply.setup().heartbeat_ms());
        }
        raw->thread = std::thread([this, raw] { session(*raw); });
        published_.store(at + 1, std::memory_order_release);
        if (at == 0) reporter_ = std::thread([this] { report_loop(); });
      }
      return dualpath::Status::ok();
    };
    DP_RETURN_IF_ERROR(add(pb::ROLE_PREFILL, options_.prefill_nodes));
    DP_RETURN_IF_ERROR(add(pb::ROLE_DECODE, options_.decode_nodes));
    return dualpath::Status::ok();
  }

  void stop() {
    {
      MutexLock lock(mu_);
      if (stopping_) return;
      stopping_ = true;
    }
    cv_.notify_all();
    if (reporter_.joinable()) reporter_.join();
    for (size_t i = 0; i < published_.load(std::memory_order_acquire); ++i) {
      Node* n = nodes_[i].get();
      n->context.TryCancel();
      if (n->thread.joinable()) n->thread.join();
    }
    if (server_) server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  }

  std::vector<FakeRequestTimes> take_times(size_t n) {
    std::vector<FakeRequestTimes> out(n);
    MutexLock lock(mu_);
    for (auto& [id, t] : times_) {
      if (id >= 0 && static_cast<size_t>(id) < n) out[static_cast<size_t>(id)] = std::move(t);
    }
    times_.clear();
    return out;
  }

  Counts counts() const {
    Counts c;
    c.prepare = prepare_.load(std::memory_order_relaxed);
    c.prefill = prefill_.load(std::memory_order_relaxed);
    c.decode = decode_.load(std::memory_order_relaxed);
    c.tokens = tokens_.load(std::memory_order_relaxed);
    c.reports = reports_.load(std::memory_order_relaxed);
    return c;
  }

  // The Node service: every call answered at once.
  grpc::Status Peers(grpc::ServerContext*, const pb::PeersRequest*, pb::Ack*) override {
    return grpc::Status::OK;
  }

  grpc::Status Prepare(grpc::ServerContext*, const pb::PrepareRequest* req,
                       pb::PrepareReply*) override {
    prepare_.fetch_add(1, std::memory_order_relaxed);
    calls_.fetch_add(1, std::memory_order_relaxed);
    remember(req->turn());
    return grpc::Status::OK;
  }

  grpc::Status Prefill(grpc::ServerContext*, const pb::PrefillRequest* req,
                       grpc::ServerWriter<pb::PrefillEvent>* writer) override {
    prefill_.fetch_add(1, std::memory_order_relaxed);
    calls_.fetch_add(1, std::memory_order_relaxed);
    const int64_t now = clock_.now().count();
    const int64_t marker = remember(req->turn());
    if (marker >= 0) {
      MutexLock lock(mu_);
      times_[marker].prefill_ns = now;
    }
    const pb::ReadRange& pe = req->turn().pe_read();
    if (pe.end_tokens() > pe.begin_tokens()) {
      pb::PrefillEvent e;
      e.mutable_read_done()->set_tokens(pe.end_tokens() - pe.begin_tokens());
      writer->Write(e);
    }
    pb::PrefillEvent done;
    done.mutable_done()->set_first_token(kOutputToken);
    writer->Write(done);
    return grpc::Status::OK;
  }

  grpc::Status Decode(grpc::ServerContext* ctx, const pb::DecodeRequest* req,
                      grpc::ServerWriter<pb::DecodeEvent>* writer) override {
    decode_.fetch_add(1, std::memory_order_relaxed);
    calls_.fetch_add(1, std::memory_order_relaxed);
    Turn turn;
    {
      MutexLock lock(mu_);
      if (auto it = turns_.find(req->request_id()); it != turns_.end()) {
        turn = it->second;
        turns_.erase(it);
      }
    }
    const auto total = static_cast<size_t>(std::max<int64_t>(1, turn.gen_tokens));
    std::vector<int32_t> output{req->first_token()};
    std::vector<int64_t> sent_ns;
    engine::TokenBatcher batcher(clock_);
    const Duration start = clock_.now();
    auto flush = [&](bool force) {
      if (!batcher.due(output.size(), force)) return true;
      pb::DecodeEvent e;
      e.mutable_tokens()->set_start(static_cast<int64_t>(batcher.sent()));
      e.mutable_tokens()->mutable_tokens()->Add(output.begin() + static_cast<ptrdiff_t>(batcher.sent()),
                                                output.end());
      const int64_t now = clock_.now().count();
      sent_ns.resize(output.size(), now);
      batcher.mark_sent(output.size());
      return writer->Write(e);
    };
    bool ok = flush(true);
    while (ok && output.size() < total && !ctx->IsCancelled()) {
      if (options_.token_rate > 0) {
        clock_.sleep_until(start + std::chrono::duration_cast<Duration>(std::chrono::duration<double>(
                                       static_cast<double>(output.size()) / options_.token_rate)));
      }
      output.push_back(kOutputToken);
      ok = flush(false);
    }
    if (ok) ok = flush(true);
    tokens_.fetch_add(static_cast<int64_t>(output.size()), std::memory_order_relaxed);
    if (turn.marker >= 0) {
      MutexLock lock(mu_);
      times_[turn.marker].token_sent_ns = std::move(sent_ns);
    }
    if (!ok || ctx->IsCancelled()) return grpc::Status::CANCELLED;
    pb::DecodeEvent done;
    done.mutable_done()->mutable_output_tokens()->Add(output.begin(), output.end());
    writer->Write(done);
    return grpc::Status::OK;
  }

  grpc::Status Release(grpc::ServerContext*, const pb::RequestRef* r, pb::Ack*) override {
    forget(r->request_id());
    return grpc::Status::OK;
  }
  grpc::Status Cancel(grpc::ServerContext*, const pb::RequestRef* r, pb::Ack*) override {
    forget(r->request_id());
    return grpc::Status::OK;
  }
  grpc::Status Stop(grpc::ServerContext*, const pb::RequestRef*, pb::Ack*) override {
    return grpc::Status::OK;
  }
  grpc::Status Status(grpc::ServerContext*, const pb::StatusRequest*,
                      pb::LoadReport* reply) override {
    reply->set_requests(0);
    return grpc::Status::OK;
  }

 private:
  struct Node {
    pb::NodeSetup setup;
    std::string session;
    pb::Hello hello;
    grpc::ClientContext context;
    Mutex write_mu;  // the hello and the reporter's writes; the session thread reads unlocked
    std::unique_ptr<grpc::ClientReaderWriter<pb::SessionMessage, pb::SchedulerMessage>> stream
        DP_GUARDED_BY(write_mu);
    std::thread thread;
  };
  struct Turn {
    int64_t marker = -1;
    int64_t gen_tokens = 1;
  };

  // Records a turn's marker and length by its attempt id; returns the marker.
  int64_t remember(const pb::TurnSpec& t) {
    const int64_t marker = marker_of(t.tokens());
    MutexLock lock(mu_);
    turns_[t.request_id()] = Turn{marker, t.gen_tokens()};
    return marker;
  }
  void forget(uint64_t id) {
    MutexLock lock(mu_);
    turns_.erase(id);
  }

  // A node's lease: its hello, then (from the reporter) its reports, until the stream ends.
  void session(Node& n) {
    n.context.AddMetadata(control::kSessionMetadata, n.session);
    grpc::ClientReaderWriter<pb::SessionMessage, pb::SchedulerMessage>* stream = nullptr;
    {
      MutexLock lock(n.write_mu);
      n.stream = stub_->Session(&n.context);
      stream = n.stream.get();
      pb::SessionMessage m;
      *m.mutable_hello() = n.hello;
      if (!stream->Write(m)) return;
    }
    // One reader (this thread) beside one writer (under write_mu) is what gRPC allows.
    pb::SchedulerMessage in;
    while (stream->Read(&in)) {
      if (in.has_quit()) break;
    }
    MutexLock lock(n.write_mu);
    n.context.TryCancel();
    (void)n.stream->Finish();
    n.stream.reset();
  }

  // A real node sends a report that repeats its last one only every heartbeat (node_main.cc).
  // These nodes' loads never change, so they report as a real node with work would: every
  // interval while any call came in since the last round (any node's: an upper bound on the
  // real cost), else at the heartbeat.
  void report_loop() {
    MutexLock lock(mu_);
    int64_t calls_seen = 0;
    control::ReportPacer pacer(heartbeat_);
    while (!stopping_) {
      (void)clock_.wait_until(cv_, lock, clock_.now() + report_interval_);
      if (stopping_) return;
      const int64_t calls = calls_.load(std::memory_order_relaxed);
      const Duration now = clock_.now();
      if (!pacer.due(calls != calls_seen, now)) continue;
      calls_seen = calls;
      pacer.sent(now);
      lock.unlock();
      const size_t published = published_.load(std::memory_order_acquire);
      for (size_t i = 0; i < published; ++i) {
        Node* n = nodes_[i].get();
        pb::SessionMessage m;
        pb::LoadReport* r = m.mutable_report();
        r->set_dram_bytes(n->setup.dram_buffer_bytes());
        for (int e = 0; e < n->hello.hbm_regions_size(); ++e) r->add_hbm_used_bytes(0);
        MutexLock w(n->write_mu);
        if (n->stream && n->stream->Write(m)) reports_.fetch_add(1, std::memory_order_relaxed);
      }
      lock.lock();
    }
  }

  const FakeNodesOptions options_;
  dualpath::Clock& clock_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<pb::Scheduler::Stub> stub_;
  // Sized before the first registration; the first `published_` are registered, their setup,
  // session and hello fixed from then on.
  std::vector<std::unique_ptr<Node>> nodes_;
  std::atomic<size_t> published_{0};
  Duration report_interval_{std::chrono::milliseconds(100)};  // set before the reporter starts
  Duration heartbeat_{0};                                      // likewise
  std::thread reporter_;
  std::atomic<int64_t> prepare_{0}, prefill_{0}, decode_{0}, tokens_{0}, reports_{0};
  std::atomic<int64_t> calls_{0};  // prepares, prefills and decodes, for the reporter

  Mutex mu_;
  CondVar cv_;
  bool stopping_ DP_GUARDED_BY(mu_) = false;
  std::unordered_map<uint64_t, Turn> turns_ DP_GUARDED_BY(mu_);
  std::unordered_map<int64_t, FakeRequestTimes> times_ DP_GUARDED_BY(mu_);
};

Result<std::unique_ptr<FakeNodes>> FakeNodes::start(const FakeNodesOptions& options) {
  if (options.prefill_nodes < 1 || options.decode_nodes < 1) {
    return Status::invalid_argument("fake nodes: at least one prefill and one decode node");
  }
  auto impl = std::make_unique<Impl>(options);
  DP_RETURN_IF_ERROR(impl->start());
  return std::unique_ptr<FakeNodes>(new FakeNodes(std::move(impl)));
}

FakeNodes::FakeNodes(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
FakeNodes::~FakeNodes() = default;

std::vector<FakeRequestTimes> FakeNodes::take_times(size_t n) { return impl_->take_times(n); }
FakeNodes::Counts FakeNodes::counts() const { return impl_->counts(); }

}  // namespace dualpath::bench
