#include "transport/traffic_manager.h"

#include <fmt/format.h>

#include <deque>
#include <future>
#include <optional>
#include <unordered_map>

#include "common/mutex.h"
#include "common/token_bucket.h"
#include "transport/worker_core.h"

namespace dualpath::transport {

// One submission: its remaining pieces (already cut to chunk_bytes) or its active message.
struct Transfer {
  uint64_t id = 0;
  TrafficClass cls = TrafficClass::kKv;
  RmaKind kind = RmaKind::kPut;
  bool is_am = false;
  EndpointState* ep = nullptr;
  std::deque<RmaOp> pieces;
  uint16_t am_id = 0;
  struct AmPiece {
    std::vector<std::byte> header;
    std::span<const std::byte> data;
    ucp_mem* data_memh = nullptr;
  };
  std::deque<AmPiece> messages;  // active messages not yet handed to UCX, in order
  SteadyTime deadline;
  std::shared_ptr<OpState> state;
  uint32_t outstanding = 0;  // batches handed to UCX and not complete
  bool queued = true;        // still in its class queue
  Status error;              // the first error
};

struct TrafficManager::Core {
  Core(WorkerCore& worker_core, const TrafficManagerOptions& options)
      : wc(worker_core),
        opt(options),
        arbiter(options.model_weight, options.kv_weight),
        epoch(std::chrono::steady_clock::now()) {
    if (options.rate_limit_gbps > 0) {
      bucket.emplace(gbps_to_bytes_per_s(options.rate_limit_gbps),
                     static_cast<int64_t>(options.rate_burst_bytes));
    }
  }

  Duration since_epoch(SteadyTime t) const { return t - epoch; }

  void submit(std::unique_ptr<Transfer> t) {
    int c = static_cast<int>(t->cls);
    if (queues[c].empty()) arbiter.activate(t->cls);
    queues[c].push_back(t.get());
    {
      MutexLock lock(stats_mu);
      stats.transfers[c] += 1;
    }
    arm_timer(t->deadline);
    transfers.emplace(t->id, std::move(t));
    pump();
  }

  // Whether class `c` may hand its next batch (`next_bytes`) to UCX. The KV class must leave the
  // model reserve free even after that batch, or a model message would wait for a KV batch to
  // finish: ~3 ms for 1 MiB over TCP loopback. When nothing is in flight it may always send, so
  // a window smaller than one batch, or an active message larger than the window (a message is
  // never split), still goes out — alone. The model class may use the whole window, and sees
  // at most the KV class's share of it as taken: an oversized KV message in flight does not
  // hold model traffic back (docs/transport.md, "The window").
  bool has_room(int c, uint64_t next_bytes) const {
    constexpr int kModel = static_cast<int>(TrafficClass::kModel);
    constexpr int kKv = static_cast<int>(TrafficClass::kKv);
    uint64_t kv_limit = opt.max_inflight_bytes - opt.model_reserve_bytes;
    if (c == kModel) {
      return inflight_bytes[kModel] + std::min(inflight_bytes[kKv], kv_limit) <
             opt.max_inflight_bytes;
    }
    uint64_t total = inflight_bytes[kModel] + inflight_bytes[kKv];
    return total == 0 || total + next_bytes <= kv_limit;
  }

  // The bytes of the next batch of `t`: its next whole active message, or at most one chunk.
  uint64_t next_batch_bytes(const Transfer& t) const {
    if (!t.is_am) return opt.chunk_bytes;
    const auto& m = t.messages.front();
    return m.header.size() + m.data.size();
  }

  void pump() {
    if (in_pump) return;  // a completion inside a post; the running loop picks the work up
    in_pump = true;
    for (;;) {
      SteadyTime now = std::chrono::steady_clock::now();
      std::array<bool, kTrafficClassCount> backlogged{};
      bool any = false;
      for (int c = 0; c < kTrafficClassCount; ++c) {
        backlogged[c] = !queues[c].empty();
        any = any || backlogged[c];
      }
      if (!any) break;
      // The arbiter picks among the backlogged classes regardless of window space, and the
      // pick then waits for space: letting the other class take a turn the window refused would
      // starve the KV class behind a busy model class (the KV class may not use the model
      // reserve). The reserve thus only serves a model message that finds the KV class alone.
      TrafficClass cls = *arbiter.pick(backlogged);
      Transfer& t = *queues[static_cast<int>(cls)].front();
      if (!has_room(static_cast<int>(cls), next_batch_bytes(t))) break;
      if (bucket && !bucket->ready(since_epoch(now))) {
        arm_timer(epoch + bucket->ready_at(since_epoch(now)));
        break;
      }
      if (!t.error.is_ok() || now >= t.deadline) {
        if (t.error.is_ok()) {
          t.error = Status::timed_out("the transfer's deadline passed while queued");
        }
        dequeue(t);
        maybe_complete(t);
        continue;
      }
      post_next(t, now);
    }
    in_pump = false;
  }

  // Hands the next batch of `t` to UCX.
  void post_next(Transfer& t, SteadyTime now) {
    uint64_t bytes = 0;
    uint64_t transfer_id = t.id;
    TrafficClass cls = t.cls;
    ++t.outstanding;
    if (t.is_am) {
      // One message per batch: each is its own UCX send (and, above the rendezvous threshold,
      // its own receive buffer at the peer); messages of one transfer go out in order.
      Transfer::AmPiece m = std::move(t.messages.front());
      t.messages.pop_front();
      bytes = m.header.size() + m.data.size();
      account(cls, bytes, 0, now);
      if (t.messages.empty()) dequeue_only(t);
      start_on(
          t.ep,
          [ep = t.ep, am_id = t.am_id, header = std::move(m.header), data = m.data,
           memh = m.data_memh, deadline = t.deadline](WorkerCore& w, DoneFn done) mutable {
            w.start_am(*ep, am_id, std::move(header), data, memh, deadline, std::move(done));
          },
          transfer_id, cls, bytes);
      return;
    }
    std::vector<RmaOp> batch;
    while (!t.pieces.empty() && batch.size() < opt.max_batch_ops &&
           (batch.empty() || bytes + t.pieces.front().length_bytes <= opt.chunk_bytes)) {
      bytes += t.pieces.front().length_bytes;
      batch.push_back(t.pieces.front());
      t.pieces.pop_front();
    }
    account(cls, bytes, batch.size(), now);
    if (t.pieces.empty()) dequeue_only(t);
    start_on(
        t.ep,
        [ep = t.ep, kind = t.kind, batch = std::move(batch), deadline = t.deadline](
            WorkerCore& w, DoneFn done) mutable {
          w.start_rma(kind, *ep, std::move(batch), deadline, std::move(done));
        },
        transfer_id, cls, bytes);
  }

  // Starts a batch on the worker that owns `ep`. On our own worker it starts now (and may
  // complete at once on shared memory: on_batch_done then runs inside this call). An endpoint of
  // another worker (a per-class worker, docs/transport.md) gets the batch through that worker's
  // inbox, and the completion comes back through ours, so the arbiter's state stays on this
  // thread.
  void start_on(EndpointState* ep,
                std::function<void(WorkerCore&, DoneFn)> start,
                uint64_t transfer_id,
                TrafficClass cls,
                uint64_t bytes) {
    if (ep->core == &wc) {
      start(wc, [this, transfer_id, cls, bytes](const Status& s) {
        on_batch_done(transfer_id, cls, bytes, s);
      });
      return;
    }
    WorkerCore* home = &wc;
    WorkerCore* target = ep->core;
    target->post([target, home, this, start = std::move(start), transfer_id, cls, bytes] {
      start(*target, [home, this, transfer_id, cls, bytes](const Status& s) {
        home->post(
            [this, transfer_id, cls, bytes, s] { on_batch_done(transfer_id, cls, bytes, s); });
      });
    });
  }

  void account(TrafficClass cls, uint64_t bytes, size_t pieces, SteadyTime now) {
    arbiter.charge(cls, bytes);
    if (bucket) bucket->consume(static_cast<int64_t>(bytes), since_epoch(now));
    inflight_bytes[static_cast<int>(cls)] += bytes;
    MutexLock lock(stats_mu);
    stats.bytes[static_cast<int>(cls)] += bytes;
    stats.batches += 1;
    stats.pieces += pieces;
  }

  void on_batch_done(uint64_t transfer_id, TrafficClass cls, uint64_t bytes, const Status& s) {
    inflight_bytes[static_cast<int>(cls)] -= bytes;
    auto it = transfers.find(transfer_id);
    if (it != transfers.end()) {
      Transfer& t = *it->second;
      --t.outstanding;
      if (!s.is_ok() && t.error.is_ok()) t.error = s;
      if (!t.error.is_ok() && t.queued) dequeue(t);  // stop sending the rest
      maybe_complete(t);
    }
    pump();
  }

  // Removes `t` from its queue, dropping pieces not yet sent. The caller then calls
  // maybe_complete(t), once (it may free `t`).
  void dequeue(Transfer& t) {
    t.pieces.clear();
    t.messages.clear();
    dequeue_only(t);
  }

  void dequeue_only(Transfer& t) {
    if (!t.queued) return;
    auto& q = queues[static_cast<int>(t.cls)];
    for (auto it = q.begin(); it != q.end(); ++it) {
      if (*it == &t) {
        q.erase(it);
        break;
      }
    }
    t.queued = false;
  }

  void maybe_complete(Transfer& t) {
    if (t.queued || t.outstanding > 0) return;
    auto node = transfers.extract(t.id);
    if (node.empty()) return;
    node.mapped()->state->complete(node.mapped()->error);
    if (transfers.empty()) {
      MutexLock lock(idle_mu);
      idle_cv.notify_all();
    }
  }

  void cancel(uint64_t transfer_id) {
    auto it = transfers.find(transfer_id);
    if (it == transfers.end()) return;
    Transfer& t = *it->second;
    if (t.error.is_ok()) t.error = Status::aborted("the transfer was cancelled");
    dequeue(t);
    maybe_complete(t);
    pump();
  }

  // Queued transfers whose deadline passed fail now; the timer then re-arms.
  void on_timer() {
    timer.reset();
    SteadyTime now = std::chrono::steady_clock::now();
    std::vector<Transfer*> expired;
    for (auto& q : queues) {
      for (Transfer* t : q) {
        if (now >= t->deadline) expired.push_back(t);
      }
    }
    for (Transfer* t : expired) {
      if (t->error.is_ok()) {
        t->error = Status::timed_out("the transfer's deadline passed while queued");
      }
      dequeue(*t);
      maybe_complete(*t);
    }
    SteadyTime next = SteadyTime::max();
    for (auto& q : queues) {
      for (Transfer* t : q) next = std::min(next, t->deadline);
    }
    if (next != SteadyTime::max()) arm_timer(next);
    pump();
  }

  void arm_timer(SteadyTime when) {
    if (timer && timer->first <= when) return;
    if (timer) wc.cancel_timer(*timer);
    timer = wc.post_at(when, [this] { on_timer(); });
  }

  void shutdown() {
    if (timer) wc.cancel_timer(*timer);
    timer.reset();
    for (auto& [id, t] : transfers) {
      if (t->error.is_ok()) t->error = Status::aborted("the traffic manager is shutting down");
    }
    std::vector<Transfer*> queued;
    for (auto& q : queues) queued.insert(queued.end(), q.begin(), q.end());
    for (Transfer* t : queued) {
      dequeue(*t);
      maybe_complete(*t);
    }
  }

  WorkerCore& wc;
  TrafficManagerOptions opt;
  ClassArbiter arbiter;
  std::optional<TokenBucket> bucket;
  SteadyTime epoch;
  std::array<std::deque<Transfer*>, kTrafficClassCount> queues;
  std::unordered_map<uint64_t, std::unique_ptr<Transfer>> transfers;
  std::array<uint64_t, kTrafficClassCount> inflight_bytes{};  // handed to UCX, not complete
  bool in_pump = false;
  std::optional<WorkerCore::TimerKey> timer;
  Mutex idle_mu;  // with idle_cv: the destructor waits for `transfers` to drain
  CondVar idle_cv;
  mutable Mutex stats_mu;
  TrafficStats stats DP_GUARDED_BY(stats_mu);  // written on the progress thread, read anywhere
};

Result<std::unique_ptr<TrafficManager>> TrafficManager::create(Worker& worker,
                                                               TrafficManagerOptions options) {
  if (options.chunk_bytes == 0 || options.max_batch_ops == 0) {
    return Status::invalid_argument("traffic manager: chunk_bytes and max_batch_ops must be > 0");
  }
  if (options.max_inflight_bytes <= options.model_reserve_bytes) {
    return Status::invalid_argument(fmt::format(
        "traffic manager: max_inflight_bytes ({}) must exceed model_reserve_bytes ({}), or the KV "
        "class could never send",
        options.max_inflight_bytes, options.model_reserve_bytes));
  }
  if (options.rate_limit_gbps < 0) {
    return Status::invalid_argument("traffic manager: rate_limit_gbps must be >= 0 (0 = off)");
  }
  std::unique_ptr<TrafficManager> tm(new TrafficManager(worker, options));
  DP_ASSIGN_OR_RETURN(tm->local_endpoint_, worker.connect(worker.address()));
  return tm;
}

TrafficManager::TrafficManager(Worker& worker, TrafficManagerOptions options)
    : worker_(worker), options_(options), core_(std::make_shared<Core>(worker.core(), options)) {}

TrafficManager::~TrafficManager() {
  std::shared_ptr<Core> core = core_;
  worker_.post([core] { core->shutdown(); });
  // Wait until every transfer has completed (bounded: what is in flight ends by its deadline).
  for (;;) {
    std::promise<bool> drained;
    auto future = drained.get_future();
    worker_.post([core, &drained] { drained.set_value(core->transfers.empty()); });
    if (future.get()) break;
    MutexLock lock(core->idle_mu);
    (void)core->idle_cv.wait_for(lock, std::chrono::milliseconds(100));
  }
  local_endpoint_.reset();
  // The last reference may be a cancel task still queued on the progress thread; it finds the
  // core (weak_ptr) or nothing.
  worker_.post([core = std::move(core)] {});
  core_.reset();
}

TrafficStats TrafficManager::stats() const {
  MutexLock lock(core_->stats_mu);
  return core_->stats;
}

std::shared_ptr<OpState> TrafficManager::start_transfer(std::unique_ptr<Transfer> t,
                                                        OpOptions& options) {
  Duration timeout =
      options.timeout > Duration::zero() ? options.timeout : worker_.default_timeout();
  t->deadline = std::chrono::steady_clock::now() + timeout;
  t->state =
      std::make_shared<OpState>(std::move(options.on_complete), worker_.progress_thread_id());
  t->id = next_id_.fetch_add(1, std::memory_order_relaxed);  // relaxed: uniqueness only
  std::shared_ptr<OpState> state = t->state;
  Worker* worker = &worker_;
  std::weak_ptr<Core> weak = core_;
  state->set_canceller([worker, weak, id = t->id] {
    worker->post([weak, id] {
      if (auto core = weak.lock()) core->cancel(id);
    });
  });
  // Ownership rides through the inbox as a raw pointer (std::function needs copyable tasks);
  // the task always runs, since the worker drains its inbox before stopping.
  Transfer* raw = t.release();
  worker_.post([core = core_, raw] { core->submit(std::unique_ptr<Transfer>(raw)); });
  return state;
}

Result<Operation> TrafficManager::submit_rma(RmaKind kind,
                                             TrafficClass cls,
                                             Endpoint& endpoint,
                                             std::span<const RmaRequest> requests,
                                             OpOptions options) {
  const char* verb = kind == RmaKind::kPut ? "put" : "get";
  // The endpoint may belong to another worker (one per class); its worker checks the request.
  DP_ASSIGN_OR_RETURN(auto ops, endpoint.worker().resolve(endpoint, requests, verb));
  auto t = std::make_unique<Transfer>();
  t->cls = cls;
  t->kind = kind;
  t->ep = &endpoint.state();
  for (const RmaOp& op : ops) {
    // Cut into chunk_bytes pieces: the unit of arbitration.
    for (uint64_t off = 0; off < op.length_bytes; off += options_.chunk_bytes) {
      RmaOp piece = op;
      piece.local = op.local + off;
      piece.remote_address = op.remote_address + off;
      piece.length_bytes = std::min(options_.chunk_bytes, op.length_bytes - off);
      t->pieces.push_back(piece);
    }
  }
  return Operation(start_transfer(std::move(t), options));
}

Result<Operation> TrafficManager::put(TrafficClass cls,
                                      Endpoint& endpoint,
                                      std::span<const RmaRequest> requests,
                                      OpOptions options) {
  return submit_rma(RmaKind::kPut, cls, endpoint, requests, std::move(options));
}

Result<Operation> TrafficManager::get(TrafficClass cls,
                                      Endpoint& endpoint,
                                      std::span<const RmaRequest> requests,
                                      OpOptions options) {
  return submit_rma(RmaKind::kGet, cls, endpoint, requests, std::move(options));
}

Result<Operation> TrafficManager::send_am(TrafficClass cls,
                                          Endpoint& endpoint,
                                          uint16_t am_id,
                                          std::span<const std::byte> header,
                                          std::span<const std::byte> data,
                                          OpOptions options) {
  const AmRequest one{header, data};
  return send_am(cls, endpoint, am_id, std::span(&one, 1), std::move(options));
}

Result<Operation> TrafficManager::send_am(TrafficClass cls,
                                          Endpoint& endpoint,
                                          uint16_t am_id,
                                          std::span<const AmRequest> messages,
                                          OpOptions options) {
  DP_RETURN_IF_ERROR(check_am_target(endpoint, am_id));
  if (messages.empty()) {
    return Status::invalid_argument("send_am: no messages; pass at least one AmRequest");
  }
  auto t = std::make_unique<Transfer>();
  t->cls = cls;
  t->is_am = true;
  t->ep = &endpoint.state();
  t->am_id = am_id;
  for (const AmRequest& m : messages) {
    Transfer::AmPiece piece;
    piece.header.assign(m.header.begin(), m.header.end());
    piece.data = m.data;
    piece.data_memh = m.data.empty() ? nullptr
                                     : endpoint.worker().find_registration(m.data.data(),
                                                                           m.data.size());
    t->messages.push_back(std::move(piece));
  }
  return Operation(start_transfer(std::move(t), options));
}

}  // namespace dualpath::transport
