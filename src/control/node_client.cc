#include "control/node_client.h"

#include <fmt/format.h>

#include <optional>

#include "control/rpc.h"

namespace dualpath::control {

void CallGroup::cancel(const Status& why) {
  MutexLock lock(mu_);
  if (cancelled_) return;
  cancelled_ = true;
  why_ = why.is_ok() ? Status::aborted("cancelled") : why;
  // Local and non-blocking; a call cannot leave the group (and free its context) meanwhile.
  for (grpc::ClientContext* c : calls_) c->TryCancel();
}

bool CallGroup::cancelled() const {
  MutexLock lock(mu_);
  return cancelled_;
}

bool CallGroup::add(grpc::ClientContext* ctx) {
  MutexLock lock(mu_);
  if (cancelled_) return false;
  calls_.insert(ctx);
  return true;
}

void CallGroup::remove(grpc::ClientContext* ctx) {
  MutexLock lock(mu_);
  calls_.erase(ctx);
}

Status CallGroup::why() const {
  MutexLock lock(mu_);
  return why_;
}

NodeClient::NodeClient(std::shared_ptr<grpc::Channel> channel,
                       std::string name,
                       std::string session,
                       const Clock& clock)
    : name_(std::move(name)),
      session_(std::move(session)),
      clock_(clock),
      stub_(pb::Node::NewStub(std::move(channel))) {}

NodeClient::~NodeClient() { close(Status::unavailable(fmt::format("{}: client closed", name_))); }

Status NodeClient::begin(Call& call, Duration timeout, CallGroup* group) {
  if (timeout > Duration(0)) set_timeout(call.context, timeout);
  call.context.AddMetadata(kSessionMetadata, session_);
  call.last_progress_ns.store(clock_.now().count(), std::memory_order_relaxed);
  {
    MutexLock lock(mu_);
    if (is_closed_) return closed_;
    calls_.insert(&call);
  }
  if (group != nullptr && !group->add(&call.context)) {
    MutexLock lock(mu_);
    calls_.erase(&call);
    return group->why();
  }
  call.group = group;
  return Status::ok();
}

Status NodeClient::end(Call& call, const grpc::Status& status, std::string_view what) {
  Status group_why;
  if (call.group != nullptr) {
    call.group->remove(&call.context);
    if (call.group->cancelled()) group_why = call.group->why();
  }
  bool expired = false;
  Status closed;
  {
    MutexLock lock(mu_);
    calls_.erase(&call);
    expired = call.expired;
    if (is_closed_) closed = closed_;
  }
  if (status.ok()) return Status::ok();
  if (!closed.is_ok()) return closed;  // the node was declared dead under the call
  if (!group_why.is_ok()) return group_why;
  if (expired) {
    return Status::timed_out(fmt::format(
        "{} on {}: no message for {:.1f} s (is the node stuck?)", what, name_,
        to_seconds(call.idle_timeout)));
  }
  return from_grpc(status, fmt::format("{} on {}", what, name_));
}

template <class Reply, class Request, class Method>
Result<Reply> NodeClient::unary(Method method,
                                const Request& request,
                                Duration timeout,
                                std::string_view what,
                                CallGroup* group) {
  Call call;
  DP_RETURN_IF_ERROR(begin(call, timeout, group));
  Reply reply;
  const grpc::Status s = (stub_.get()->*method)(&call.context, request, &reply);
  DP_RETURN_IF_ERROR(end(call, s, what));
  return reply;
}

Status NodeClient::peers(const pb::PeersRequest& request, Duration timeout) {
  return unary<pb::Ack>(&pb::Node::Stub::Peers, request, timeout, "peers").status();
}

Result<pb::PrepareReply> NodeClient::prepare(const pb::PrepareRequest& request,
                                             Duration timeout,
                                             CallGroup* group) {
  return unary<pb::PrepareReply>(&pb::Node::Stub::Prepare, request, timeout, "prepare", group);
}

template <class Reply, class Event, class OnEvent>
Result<Reply> NodeClient::read_stream(Call& call,
                                      std::unique_ptr<grpc::ClientReader<Event>> reader,
                                      const OnEvent& on_event,
                                      std::string_view what) {
  Event event;
  std::optional<Reply> reply;
  while (reader->Read(&event)) {
    call.last_progress_ns.store(clock_.now().count(), std::memory_order_relaxed);
    if (event.has_done()) {
      reply = std::move(*event.mutable_done());
    } else {
      on_event(event);
    }
  }
  const grpc::Status s = reader->Finish();
  DP_RETURN_IF_ERROR(end(call, s, what));
  if (!reply) {
    return Status::internal(
        fmt::format("{} on {}: the stream ended without a reply", what, name_));
  }
  return std::move(*reply);
}

Result<pb::PrefillReply> NodeClient::prefill(const pb::PrefillRequest& request,
                                             Duration timeout,
                                             const std::function<void(int64_t)>& on_read_done,
                                             CallGroup* group) {
  Call call;
  DP_RETURN_IF_ERROR(begin(call, timeout, group));
  return read_stream<pb::PrefillReply>(
      call, stub_->Prefill(&call.context, request),
      [&](const pb::PrefillEvent& e) {
        if (e.has_read_done() && on_read_done) on_read_done(e.read_done().tokens());
      },
      "prefill");
}

Result<pb::DecodeReply> NodeClient::decode(
    const pb::DecodeRequest& request,
    Duration idle_timeout,
    const std::function<void(const pb::TokenBatch&)>& on_tokens,
    CallGroup* group) {
  Call call;
  call.idle_timeout = idle_timeout;
  DP_RETURN_IF_ERROR(begin(call, Duration(0), group));
  return read_stream<pb::DecodeReply>(
      call, stub_->Decode(&call.context, request),
      [&](const pb::DecodeEvent& e) {
        if (e.has_tokens() && on_tokens) on_tokens(e.tokens());
      },
      "decode");
}

Status NodeClient::release(uint64_t request_id, Duration timeout) {
  pb::RequestRef r;
  r.set_request_id(request_id);
  return unary<pb::Ack>(&pb::Node::Stub::Release, r, timeout, "release").status();
}

Status NodeClient::cancel(uint64_t request_id, Duration timeout) {
  pb::RequestRef r;
  r.set_request_id(request_id);
  return unary<pb::Ack>(&pb::Node::Stub::Cancel, r, timeout, "cancel").status();
}

Status NodeClient::stop(uint64_t request_id, Duration timeout) {
  pb::RequestRef r;
  r.set_request_id(request_id);
  return unary<pb::Ack>(&pb::Node::Stub::Stop, r, timeout, "stop").status();
}

Result<pb::LoadReport> NodeClient::status(Duration timeout) {
  return unary<pb::LoadReport>(&pb::Node::Stub::Status, pb::StatusRequest(), timeout, "status");
}

void NodeClient::close(const Status& why) {
  MutexLock lock(mu_);
  if (is_closed_) return;
  is_closed_ = true;
  closed_ = why.is_ok() ? Status::unavailable(fmt::format("{} is closed", name_)) : why;
  // TryCancel is local and does not block; a call cannot end (and free its context) meanwhile,
  // since ending takes this lock.
  for (Call* c : calls_) c->context.TryCancel();
}

bool NodeClient::closed() const {
  MutexLock lock(mu_);
  return is_closed_;
}

void NodeClient::expire_idle() {
  const int64_t now = clock_.now().count();
  MutexLock lock(mu_);
  for (Call* c : calls_) {
    if (c->idle_timeout <= Duration(0) || c->expired) continue;
    if (now - c->last_progress_ns.load(std::memory_order_relaxed) > c->idle_timeout.count()) {
      c->expired = true;
      c->context.TryCancel();
    }
  }
}

size_t NodeClient::in_flight() const {
  MutexLock lock(mu_);
  return calls_.size();
}

}  // namespace dualpath::control
