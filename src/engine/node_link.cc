#include "engine/node_link.h"

#include <poll.h>

#include <fmt/format.h>

namespace dualpath::engine {

namespace {
// The reader's poll timeout: how long destruction may wait for it.
constexpr int kReaderPollMs = 100;
// A framed reply that has started arriving must finish within this.
constexpr Duration kFrameTimeout = std::chrono::seconds(30);
}  // namespace

NodeLink::NodeLink(std::unique_ptr<transport::OobChannel> channel, std::string name)
    : name_(std::move(name)), channel_(std::move(channel)) {
  reader_ = std::thread([this] { read_loop(); });
}

NodeLink::~NodeLink() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  reader_.join();
}

void NodeLink::read_loop() {
  for (;;) {
    {
      std::lock_guard lock(mu_);
      if (stopping_) return;
    }
    pollfd pfd{channel_->fd(), POLLIN, 0};
    const int ready = ::poll(&pfd, 1, kReaderPollMs);
    if (ready <= 0) continue;
    auto reply = receive_json(*channel_, kFrameTimeout);
    std::lock_guard lock(mu_);
    if (!reply.is_ok()) {
      closed_ = reply.status().with_context(name_);
      cv_.notify_all();
      return;
    }
    auto it = pending_.find(reply->value("call_id", uint64_t{0}));
    if (it != pending_.end()) it->second = std::move(reply).value();  // else: a late reply
    cv_.notify_all();
  }
}

Status NodeLink::send(const Json& message, Duration timeout) {
  std::lock_guard lock(send_mu_);
  return send_json(*channel_, message, timeout);
}

Result<Json> NodeLink::call(const Json& request, Duration timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  Json message = request;
  uint64_t id = 0;
  {
    std::lock_guard lock(mu_);
    if (!closed_.is_ok()) return closed_;
    id = next_call_id_++;
    pending_[id];
  }
  message["call_id"] = id;
  Status sent = send(message, timeout);
  std::unique_lock lock(mu_);
  if (!sent.is_ok()) {
    pending_.erase(id);
    return sent.with_context(name_);
  }
  const bool done =
      cv_.wait_until(lock, deadline, [&] { return pending_[id].has_value() || !closed_.is_ok(); });
  std::optional<Json> reply = std::move(pending_[id]);
  pending_.erase(id);
  if (!reply) {
    if (!closed_.is_ok()) return closed_;
    (void)done;
    return Status::timed_out(fmt::format("{}: no reply to '{}' within the deadline", name_,
                                         request.value("cmd", std::string())));
  }
  if (!reply->value("ok", false)) {
    const int code = reply->value("code", static_cast<int>(StatusCode::kInternal));
    return Status(static_cast<StatusCode>(code),
                  fmt::format("{}: {}", name_, reply->value("error", std::string("no message"))));
  }
  return std::move(reply).value();
}

}  // namespace dualpath::engine
