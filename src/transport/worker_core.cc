#include "transport/worker_core.h"

#include <fmt/format.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "common/log.h"
#include "transport/ucx_status.h"

namespace dualpath::transport {
namespace {

// After an operation's deadline the endpoint is force-closed and UCX releases the request at
// once in practice; should it not, we complete the operation ourselves after this grace and keep
// the record alive for UCX's late callback.
constexpr auto kAbandonGrace = std::chrono::seconds(2);

// ucp_worker_progress calls between two looks at the inbox and the timers.
constexpr int kProgressBurst = 8;

// Rendezvous receive buffers a worker keeps for reuse (AmBufferPool): two 16 MiB messages.
constexpr uint64_t kAmBufferCacheBytes = 32 * 1024 * 1024;

}  // namespace

Status EndpointState::health() const {
  if (!failed.load(std::memory_order_acquire)) return Status::ok();  // pairs with fail_endpoint
  MutexLock lock(mu);
  return failure;
}

// ---- TaskInbox ----

TaskInbox::TaskInbox() : event_fd_(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {}

TaskInbox::~TaskInbox() {
  if (event_fd_ >= 0) close(event_fd_);
}

void TaskInbox::push(std::function<void()> task) {
  bool was_empty = false;
  {
    MutexLock lock(mu_);
    was_empty = tasks_.empty();
    tasks_.push_back(std::move(task));
    has_tasks_.store(true, std::memory_order_release);
  }
  // Only the first task of a batch needs a wakeup: the thread drains the whole queue. The flag
  // is set after the write, so a clear_signal() that sees it finds the eventfd readable; one
  // that misses it leaves the eventfd readable, the next ppoll returns at once, and the loop
  // then drains it with clear_signal(true).
  if (was_empty) {
    uint64_t one = 1;
    [[maybe_unused]] ssize_t n = write(event_fd_, &one, sizeof one);
    signalled_.store(true, std::memory_order_release);
  }
}

void TaskInbox::take_all(std::deque<std::function<void()>>& out) {
  if (!has_tasks_.load(std::memory_order_acquire)) return;
  MutexLock lock(mu_);
  has_tasks_.store(false, std::memory_order_relaxed);  // relaxed: written under mu_
  out.swap(tasks_);
}

void TaskInbox::clear_signal(bool force) {
  if (!signalled_.exchange(false, std::memory_order_acq_rel) && !force) return;
  uint64_t value = 0;
  [[maybe_unused]] ssize_t n = read(event_fd_, &value, sizeof value);
}

// ---- WorkerCore ----

struct WorkerCore::Pending {
  WorkerCore* core = nullptr;
  uint64_t id = 0;
  EndpointState* ep = nullptr;  // null once the endpoint is closed
  SteadyTime deadline;
  DoneFn done;
  // What the operation is, for messages; rendered by what() only when one is needed (the hot
  // path posts thousands of batches per second).
  const char* verb = "";
  uint64_t bytes = 0;
  size_t pieces = 0;
  int am_id = -1;
  std::string peer;  // copied: the endpoint may be gone when a message is needed
  std::string what() const {
    if (am_id >= 0)
      return fmt::format("active message {} of {} bytes to peer '{}'", am_id, bytes, peer);
    return fmt::format("{} of {} bytes in {} pieces to peer '{}'", verb, bytes, pieces, peer);
  }
  std::vector<std::byte> header;  // an AM header must live until the send completes
  Status first_error;             // from posting: reported even if the flush succeeds
  Status closed_reason;           // why the endpoint closed under it, for UCX's cancel status
  bool timed_out = false;
  bool abandoned = false;
};

struct WorkerCore::AmSlot {
  WorkerCore* core = nullptr;
  uint16_t id = 0;
  AmHandler handler;
};

struct WorkerCore::AmRecv {
  AmSlot* slot = nullptr;
  std::vector<std::byte> header;
  AmBufferPool::Buffer data;  // back to the pool once the handler has run
};

WorkerCore::WorkerCore(ucp_context_h context,
                       ucp_worker_h worker,
                       std::string name,
                       Duration poll_before_sleep,
                       Duration poll_while_in_flight)
    : worker_(worker),
      name_(std::move(name)),
      poll_before_sleep_(poll_before_sleep),
      poll_while_in_flight_(poll_while_in_flight),
      am_buffers_(
          kAmBufferCacheBytes,
          [this, context](size_t capacity) { return allocate_am_buffer(context, capacity); },
          [context](const AmBufferPool::Buffer& b) {
            ucp_mem_unmap(context, static_cast<ucp_mem_h>(b.handle));
          }) {}

// UCX-allocated and registered once, like Worker::allocate_memory, so that a rendezvous receive
// never registers memory on its way (on RDMA transports a registration costs far more than the
// memh lookup); the pool then keeps the buffer, its pages and its registration warm.
std::optional<AmBufferPool::Buffer> WorkerCore::allocate_am_buffer(ucp_context_h context,
                                                                   size_t capacity) {
  ucp_mem_map_params_t params{};
  params.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH |
                      UCP_MEM_MAP_PARAM_FIELD_FLAGS;
  params.address = nullptr;
  params.length = std::max<size_t>(capacity, 1);
  params.flags = UCP_MEM_MAP_ALLOCATE;
  ucp_mem_h memh = nullptr;
  ucs_status_t st = ucp_mem_map(context, &params, &memh);
  ucp_mem_attr_t attr{};
  attr.field_mask = UCP_MEM_ATTR_FIELD_ADDRESS;
  if (st == UCS_OK) st = ucp_mem_query(memh, &attr);
  if (st != UCS_OK) {
    if (memh) ucp_mem_unmap(context, memh);
    DP_LOG_WARN("transport: worker '{}': cannot allocate a {}-byte receive buffer: {}", name_,
                capacity, ucs_status_string(st));
    return std::nullopt;
  }
  return AmBufferPool::Buffer{static_cast<std::byte*>(attr.address), capacity, 0, memh};
}

WorkerCore::~WorkerCore() {
  if (!worker_) return;
  // UCX asserts, when it destroys an endpoint, that every request it still holds was released
  // by its owner. Sends abandoned to a dead peer and endpoint closes may still be in flight:
  // give their callbacks (which free them) a bounded chance to run first.
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  while ((!abandoned_.empty() || closing_ > 0) && std::chrono::steady_clock::now() < until) {
    ucp_worker_progress(worker_);
  }
  if (!abandoned_.empty() || closing_ > 0) {
    // Requests to a peer that died with its shared-memory queue full never complete. Leaking
    // the worker is the lesser harm: destroying it would abort the process inside UCX.
    DP_LOG_WARN("transport: worker '{}': {} operations and {} endpoint closes are still held by "
                "UCX for a lost peer; the worker is left to process exit",
                name_, abandoned_.size(), closing_);
    return;
  }
  ucp_worker_destroy(worker_);
}

void WorkerCore::stop() {
  post([this] { stopping_ = true; });
}

WorkerCore::TimerKey WorkerCore::post_at(SteadyTime when, std::function<void()> task) {
  TimerKey key{when, next_timer_id_++};
  timers_.emplace(key, std::move(task));
  return key;
}

void WorkerCore::run() {
  int ucx_fd = -1;
  ucs_status_t st = ucp_worker_get_efd(worker_, &ucx_fd);
  if (st != UCS_OK) {
    DP_LOG_ERROR("transport: worker '{}': ucp_worker_get_efd failed: {}", name_,
                 ucs_status_string(st));
  }
  SteadyTime last_event = std::chrono::steady_clock::now();
  SteadyTime last_in_flight{};  // when transfers were last seen in flight
  std::deque<std::function<void()>> tasks;  // reused: draining an empty inbox allocates nothing
  for (;;) {
    inbox_.clear_signal();
    inbox_.take_all(tasks);
    for (auto& task : tasks) task();
    tasks.clear();
    if (stopping_) break;
    SteadyTime now = std::chrono::steady_clock::now();
    bool busy = run_timers(now);
    expire(now);
    // Bounded: while a stream keeps completing, every completion posts more work and progress
    // would never return 0; the inbox (a model message, a cancel) must get its turn.
    for (int i = 0; i < kProgressBurst && ucp_worker_progress(worker_) != 0; ++i) busy = true;
    if (!to_close_.empty()) {
      close_scheduled();
      busy = true;
    }
    if (busy || !inbox_.empty()) {
      last_event = now;
      continue;
    }
    // WorkerOptions::poll_before_sleep: keep polling a while after the last event;
    // WorkerOptions::poll_while_in_flight: the same while transfers are in flight or were so
    // within that time (the gap between one rendezvous message and the next is not idleness).
    SteadyTime idle_since = std::chrono::steady_clock::now();
    if (!pending_.empty() || am_receiving_ > 0) last_in_flight = idle_since;
    Duration poll = poll_before_sleep_;
    if (idle_since - last_in_flight < poll_while_in_flight_) {
      poll = std::max(poll, poll_while_in_flight_);
    }
    if (idle_since - last_event < poll) continue;
    // Sleep until UCX, the inbox or a deadline wakes us; ucp_worker_arm says BUSY when events
    // arrived since the last progress, and then we progress again instead of sleeping.
    if (ucp_worker_arm(worker_) == UCS_ERR_BUSY) continue;
    SteadyTime wake = next_wakeup();
    timespec ts{};
    timespec* timeout = nullptr;
    if (wake != SteadyTime::max()) {
      auto left = std::max<std::chrono::nanoseconds>(wake - std::chrono::steady_clock::now(),
                                                     std::chrono::nanoseconds(0));
      ts.tv_sec = static_cast<time_t>(left.count() / 1000000000);
      ts.tv_nsec = static_cast<long>(left.count() % 1000000000);
      timeout = &ts;
    }
    // The inbox first: without a UCX event fd the inbox must still wake us.
    pollfd fds[2] = {{inbox_.fd(), POLLIN, 0}, {ucx_fd, POLLIN, 0}};
    int n = ppoll(fds, ucx_fd >= 0 ? 2 : 1, timeout, nullptr);
    if (n > 0 && (fds[0].revents & POLLIN) != 0) inbox_.clear_signal(/*force=*/true);
    if (n < 0 && errno != EINTR) {
      DP_LOG_ERROR("transport: worker '{}': ppoll failed: {}", name_, std::strerror(errno));
    }
  }
  // Nothing may stay in flight: close what is left so that every operation completes.
  while (!pending_.empty()) {
    inbox_.take_all(tasks);
    for (auto& task : tasks) task();
    tasks.clear();
    expire(std::chrono::steady_clock::now() + std::chrono::hours(1));
    close_scheduled();
    ucp_worker_progress(worker_);
  }
}

bool WorkerCore::run_timers(SteadyTime now) {
  bool ran = false;
  while (!timers_.empty() && timers_.begin()->first.first <= now) {
    auto task = std::move(timers_.begin()->second);
    timers_.erase(timers_.begin());
    task();
    ran = true;
  }
  return ran;
}

SteadyTime WorkerCore::next_wakeup() const {
  SteadyTime wake = SteadyTime::max();
  if (!timers_.empty()) wake = timers_.begin()->first.first;
  if (!deadlines_.empty()) wake = std::min(wake, deadlines_.begin()->first);
  return wake;
}

WorkerCore::Pending& WorkerCore::add_pending(EndpointState& ep,
                                             SteadyTime deadline,
                                             DoneFn done,
                                             const char* verb,
                                             uint64_t bytes,
                                             size_t pieces,
                                             int am_id) {
  auto p = std::make_unique<Pending>();
  p->core = this;
  p->id = next_pending_id_++;
  p->ep = &ep;
  p->deadline = deadline;
  p->done = std::move(done);
  p->peer = ep.peer_name;
  p->verb = verb;
  p->bytes = bytes;
  p->pieces = pieces;
  p->am_id = am_id;
  Pending& ref = *p;
  deadlines_.emplace(deadline, ref.id);
  pending_.emplace(ref.id, std::move(p));
  return ref;
}

void WorkerCore::finish(Pending& p, ucs_status_t status) {
  if (p.abandoned) {
    // We completed it at the grace deadline; this is UCX's late release. Drop the record.
    for (auto it = abandoned_.begin(); it != abandoned_.end(); ++it) {
      if (it->get() == &p) {
        abandoned_.erase(it);
        break;
      }
    }
    return;
  }
  Status result;
  if (p.timed_out) {
    result = Status::timed_out(fmt::format(
        "{} did not complete by its deadline; the endpoint was closed (the peer is presumed lost)",
        p.what()));
  } else if (!p.first_error.is_ok()) {
    result = p.first_error;
  } else if (status != UCS_OK) {
    Status ep_failure = p.ep ? p.ep->health() : p.closed_reason;
    result = ep_failure.is_ok() ? ucx_status(status, p.what()) : ep_failure.with_context(p.what());
  }
  deadlines_.erase({p.deadline, p.id});
  auto node = pending_.extract(p.id);
  EndpointState* ep = node.mapped()->ep;
  // A transfer that failed on its own (the peer's memory vanished, the connection broke) means
  // the endpoint is unusable; without peer mode UCX would not say so, so we do.
  if (ep != nullptr && !ep->failed.load(std::memory_order_relaxed) &&
      (result.is_unavailable() || result.is_io_error())) {
    fail_endpoint(*ep, result);
  }
  DoneFn done = std::move(node.mapped()->done);
  done(result);  // may start more work; `p` is gone with `node`
}

void WorkerCore::expire(SteadyTime now) {
  while (!deadlines_.empty() && deadlines_.begin()->first <= now) {
    uint64_t id = deadlines_.begin()->second;
    deadlines_.erase(deadlines_.begin());
    Pending& p = *pending_.at(id);
    if (p.timed_out || p.ep == nullptr) {
      // Past the grace, or its endpoint is closed: UCX did not release it. Complete it ourselves.
      abandon(id, Status::timed_out(p.what() + " did not complete by its deadline"));
      continue;
    }
    p.timed_out = true;
    p.deadline = now + kAbandonGrace;
    deadlines_.emplace(p.deadline, id);
    // In peer mode the forced close makes UCX complete every request on the endpoint, this one
    // included; otherwise fail_endpoint abandons them.
    fail_endpoint(*p.ep, Status::timed_out(fmt::format("{} passed its deadline", p.what())));
    // `p` may be gone now.
  }
}

void WorkerCore::abandon(uint64_t id, const Status& status) {
  auto node = pending_.extract(id);
  if (node.empty()) return;
  Pending& p = *node.mapped();
  deadlines_.erase({p.deadline, p.id});
  p.abandoned = true;  // a late UCX callback finds it here and only frees it
  p.ep = nullptr;
  DoneFn done = std::move(p.done);
  Status result =
      p.timed_out ? Status::timed_out(fmt::format(
                        "{} did not complete by its deadline; the peer is presumed lost", p.what()))
                  : status.with_context(p.what());
  abandoned_.push_back(std::move(node.mapped()));
  done(result);
}

void WorkerCore::on_send_done(void* request, ucs_status_t status, void* user_data) {
  auto* p = static_cast<Pending*>(user_data);
  p->core->finish(*p, status);
  ucp_request_free(request);
}

void WorkerCore::start_rma(
    RmaKind kind, EndpointState& ep, std::vector<RmaOp> ops, SteadyTime deadline, DoneFn done) {
  const char* verb = kind == RmaKind::kPut ? "put" : "get";
  if (ep.ep == nullptr || ep.failed.load(std::memory_order_relaxed)) {
    Status health = ep.health();
    done(health.is_ok() ? Status::failed_precondition("endpoint is closed") : health);
    return;
  }
  uint64_t total_bytes = 0;
  for (const auto& op : ops) total_bytes += op.length_bytes;
  Pending& p = add_pending(ep, deadline, std::move(done), verb, total_bytes, ops.size(), -1);
  for (const auto& op : ops) {
    ucp_request_param_t param{};
    if (op.local_memh) {
      param.op_attr_mask = UCP_OP_ATTR_FIELD_MEMH;
      param.memh = op.local_memh;
    }
    if (ep.ep == nullptr) break;  // UCX reported the peer lost while we were posting
    ucs_status_ptr_t req =
        kind == RmaKind::kPut
            ? ucp_put_nbx(ep.ep, op.local, op.length_bytes, op.remote_address, op.rkey, &param)
            : ucp_get_nbx(ep.ep, op.local, op.length_bytes, op.remote_address, op.rkey, &param);
    if (UCS_PTR_IS_ERR(req)) {
      p.first_error = ucx_status(UCS_PTR_STATUS(req), p.what());
      break;
    }
    // Completion is tracked by the flush below; a released request is freed by UCX when done.
    if (req != nullptr) ucp_request_free(req);
  }
  if (ep.ep == nullptr) {
    finish(p, UCS_ERR_CANCELED);  // closed_reason says why
    return;
  }
  ucp_request_param_t flush{};
  flush.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
  flush.cb.send = &WorkerCore::on_send_done;
  flush.user_data = &p;
  ucs_status_ptr_t req = ucp_ep_flush_nbx(ep.ep, &flush);
  if (req == nullptr) {
    finish(p, UCS_OK);
  } else if (UCS_PTR_IS_ERR(req)) {
    finish(p, UCS_PTR_STATUS(req));
  }
}

void WorkerCore::start_am(EndpointState& ep,
                          uint16_t am_id,
                          std::vector<std::byte> header,
                          std::span<const std::byte> data,
                          ucp_mem* data_memh,
                          SteadyTime deadline,
                          DoneFn done) {
  if (ep.ep == nullptr || ep.failed.load(std::memory_order_relaxed)) {
    Status health = ep.health();
    done(health.is_ok() ? Status::failed_precondition("endpoint is closed") : health);
    return;
  }
  Pending& p =
      add_pending(ep, deadline, std::move(done), "am", header.size() + data.size(), 1, am_id);
  p.header = std::move(header);
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
  param.cb.send = &WorkerCore::on_send_done;
  param.user_data = &p;
  if (data_memh) {
    param.op_attr_mask |= UCP_OP_ATTR_FIELD_MEMH;
    param.memh = data_memh;
  }
  ucs_status_ptr_t req = ucp_am_send_nbx(ep.ep, am_id, p.header.data(), p.header.size(),
                                         data.data(), data.size(), &param);
  if (req == nullptr) {
    finish(p, UCS_OK);
  } else if (UCS_PTR_IS_ERR(req)) {
    finish(p, UCS_PTR_STATUS(req));
  }
}

void WorkerCore::set_am_handler(uint16_t am_id, AmHandler handler, Status& result) {
  auto slot = std::make_unique<AmSlot>();
  slot->core = this;
  slot->id = am_id;
  slot->handler = std::move(handler);
  ucp_am_handler_param_t param{};
  param.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_FLAGS |
                     UCP_AM_HANDLER_PARAM_FIELD_CB | UCP_AM_HANDLER_PARAM_FIELD_ARG;
  param.id = am_id;
  param.flags = UCP_AM_FLAG_WHOLE_MSG;
  param.cb = &WorkerCore::on_am;
  param.arg = slot.get();
  result = ucx_status(ucp_worker_set_am_recv_handler(worker_, &param),
                      fmt::format("ucp_worker_set_am_recv_handler({})", am_id));
  if (result.is_ok()) am_slots_[am_id] = std::move(slot);
}

ucs_status_t WorkerCore::on_am(void* arg,
                               const void* header,
                               size_t header_length,
                               void* data,
                               size_t length,
                               const ucp_am_recv_param_t* param) {
  auto* slot = static_cast<AmSlot*>(arg);
  const auto* header_bytes = static_cast<const std::byte*>(header);
  if ((param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) == 0) {
    slot->handler(AmMessage{
        slot->id, {header_bytes, header_length}, {static_cast<const std::byte*>(data), length}});
    return UCS_OK;
  }
  // Rendezvous: the data is still at the sender; fetch it into a buffer of ours, then deliver.
  // The raw pointer travels through UCX's user_data and is re-owned in on_am_data.
  auto recv = std::make_unique<AmRecv>();
  recv->slot = slot;
  recv->header.assign(header_bytes, header_bytes + header_length);
  std::optional<AmBufferPool::Buffer> buffer = slot->core->am_buffers_.take(length);
  if (!buffer) return UCS_OK;  // logged; UCX drops the message
  recv->data = *buffer;
  ucp_request_param_t rp{};
  rp.op_attr_mask =
      UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_MEMH;
  rp.cb.recv_am = &WorkerCore::on_am_data;
  rp.user_data = recv.get();
  rp.memh = static_cast<ucp_mem_h>(recv->data.handle);
  ucs_status_ptr_t req =
      ucp_am_recv_data_nbx(slot->core->worker_, data, recv->data.data, length, &rp);
  if (req == nullptr) {
    slot->handler(AmMessage{slot->id, recv->header, recv->data.span()});
    slot->core->am_buffers_.give_back(recv->data);
  } else if (UCS_PTR_IS_ERR(req)) {
    DP_LOG_WARN("transport: worker '{}': receiving active message {} ({} bytes) failed: {}",
                slot->core->name_, slot->id, length, ucs_status_string(UCS_PTR_STATUS(req)));
    slot->core->am_buffers_.give_back(recv->data);
  } else {
    ++slot->core->am_receiving_;
    recv.release();  // owned by the request until on_am_data
  }
  return UCS_OK;
}

void WorkerCore::on_am_data(void* request, ucs_status_t status, size_t, void* user_data) {
  std::unique_ptr<AmRecv> recv(static_cast<AmRecv*>(user_data));
  --recv->slot->core->am_receiving_;
  if (status == UCS_OK) {
    recv->slot->handler(AmMessage{recv->slot->id, recv->header, recv->data.span()});
  } else {
    DP_LOG_WARN("transport: worker '{}': receiving active message {} failed: {}",
                recv->slot->core->name_, recv->slot->id, ucs_status_string(status));
  }
  recv->slot->core->am_buffers_.give_back(recv->data);
  ucp_request_free(request);
}

Status WorkerCore::create_endpoint(EndpointState& state, std::span<const std::byte> ucx_address) {
  ucp_ep_params_t params{};
  params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                      UCP_EP_PARAM_FIELD_ERR_HANDLER;
  params.address = reinterpret_cast<const ucp_address_t*>(ucx_address.data());
  // Peer mode: a dead peer fails the endpoint and its requests instead of hanging them.
  params.err_mode =
      state.peer_failure_mode ? UCP_ERR_HANDLING_MODE_PEER : UCP_ERR_HANDLING_MODE_NONE;
  params.err_handler.cb = &WorkerCore::on_ep_error;
  params.err_handler.arg = &state;
  state.core = this;
  return ucx_status(ucp_ep_create(worker_, &params, &state.ep),
                    fmt::format("ucp_ep_create to peer '{}'", state.peer_name));
}

void WorkerCore::on_ep_error(void* arg, ucp_ep_h, ucs_status_t status) {
  auto* state = static_cast<EndpointState*>(arg);
  Status why = ucx_status(status, fmt::format("connection to peer '{}'", state->peer_name));
  if (why.code() != StatusCode::kUnavailable) {
    why = Status::unavailable(why.message() + "; the peer is gone or unreachable");
  }
  state->core->fail_endpoint(*state, why);
}

void WorkerCore::fail_endpoint(EndpointState& state, const Status& why) {
  {
    MutexLock lock(state.mu);
    if (state.failure.is_ok()) state.failure = why;
  }
  state.failed.store(true, std::memory_order_release);  // pairs with EndpointState::health
  if (state.peer_failure_mode) {
    // Closed from the main loop, not here: we may be inside a UCX callback (a request completed
    // while UCX fails the endpoint), and closing an endpoint from there trips UCX's assertions.
    if (state.ep != nullptr &&
        std::find(to_close_.begin(), to_close_.end(), &state) == to_close_.end()) {
      to_close_.push_back(&state);
    }
    return;
  }
  // Without peer mode UCX can neither force-close the endpoint nor cancel its sends, so its
  // requests may never complete: complete them ourselves (the UCX requests stay parked until the
  // worker is destroyed; a dead peer never touches our buffers again). The endpoint stays open
  // and refuses new work; it is closed when its handle is destroyed.
  std::vector<uint64_t> ids;
  for (const auto& [id, p] : pending_) {
    if (p->ep == &state) ids.push_back(id);
  }
  for (uint64_t id : ids) abandon(id, why);
}

void WorkerCore::close_scheduled() {
  while (!to_close_.empty()) {
    EndpointState* state = to_close_.back();
    close_endpoint(*state);  // removes it from to_close_
  }
}

void WorkerCore::close_endpoint(EndpointState& state) {
  to_close_.erase(std::remove(to_close_.begin(), to_close_.end(), &state), to_close_.end());
  Status why = state.health();
  if (!state.peer_failure_mode && !why.is_ok()) {
    // Pending requests were abandoned at failure; a flush-close could wait forever on a dead
    // peer. UCX releases the endpoint when the worker is destroyed.
    DP_LOG_INFO("transport: worker '{}': leaving failed endpoint to '{}' to worker teardown", name_,
                state.peer_name);
    state.ep = nullptr;
    return;
  }
  if (why.is_ok()) {
    why = Status::aborted(fmt::format(
        "the endpoint to peer '{}' was closed while the operation was in flight", state.peer_name));
  }
  for (auto& [id, p] : pending_) {
    if (p->ep != &state) continue;
    p->ep = nullptr;  // the state may be freed once closed
    p->closed_reason = why;
  }
  if (state.ep == nullptr) return;
  ucp_ep_h ep = std::exchange(state.ep, nullptr);
  // Force: releases every outstanding request on the endpoint with an error at once, without
  // waiting on a peer that may be gone. Callers wait for their operations before closing, so a
  // healthy endpoint loses nothing. UCX requires peer mode for a forced close, so an endpoint
  // without it (shared memory, loopback) is flushed and closed instead.
  bool force = state.peer_failure_mode;
  ucp_request_param_t param{};
  param.op_attr_mask =
      UCP_OP_ATTR_FIELD_FLAGS | UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
  param.flags = force ? UCP_EP_CLOSE_FLAG_FORCE : 0;
  param.cb.send = [](void* request, ucs_status_t, void* core) {
    static_cast<WorkerCore*>(core)->closing_ -= 1;
    ucp_request_free(request);
  };
  param.user_data = this;
  ucs_status_ptr_t req = ucp_ep_close_nbx(ep, &param);
  if (req != nullptr && !UCS_PTR_IS_ERR(req)) closing_ += 1;
  if (UCS_PTR_IS_ERR(req)) {
    DP_LOG_WARN("transport: worker '{}': closing endpoint to '{}' failed: {}", name_,
                state.peer_name, ucs_status_string(UCS_PTR_STATUS(req)));
  }
}

}  // namespace dualpath::transport
