#include "engine/node_link.h"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>

#include <fmt/format.h>

#include "engine/wire.h"

namespace dualpath::engine {

namespace {
// The reader's poll timeout: how long destruction may wait for it.
constexpr int kReaderPollMs = 100;
// A framed message that has started arriving must finish within this.
constexpr Duration kLinkFrameTimeout = std::chrono::seconds(30);
}  // namespace

NodeLink::NodeLink(std::unique_ptr<transport::OobChannel> channel,
                   std::string name,
                   MessageHandler on_message,
                   std::function<void(const Status&)> on_closed)
    : name_(std::move(name)),
      channel_(std::move(channel)),
      on_message_(std::move(on_message)),
      on_closed_(std::move(on_closed)) {
  reader_ = std::thread([this] { read_loop(); });
}

NodeLink::~NodeLink() { stop(); }

void NodeLink::stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  std::lock_guard join(join_mu_);
  if (reader_.joinable()) reader_.join();
}

void NodeLink::mark_closed(const Status& why) {
  if (closed_.is_ok()) closed_ = why;
  cv_.notify_all();
}

void NodeLink::close(const Status& why) {
  {
    std::lock_guard lock(mu_);
    mark_closed(why.with_context(name_));
  }
  // The reader sees the shut-down socket and stops; the node sees it closed.
  ::shutdown(channel_->fd(), SHUT_RDWR);
}

bool NodeLink::closed() const {
  std::lock_guard lock(mu_);
  return !closed_.is_ok();
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
    auto msg = receive_json(*channel_, kLinkFrameTimeout);
    if (!msg.is_ok() && msg.status().is_corruption()) continue;  // one bad frame: skip it
    if (!msg.is_ok()) {
      std::function<void(const Status&)> notify;
      Status why;
      {
        std::lock_guard lock(mu_);
        mark_closed(Status::unavailable(msg.status().message()).with_context(name_));
        why = closed_;
        if (!closed_notified_) {
          closed_notified_ = true;
          notify = on_closed_;
        }
      }
      if (notify) notify(why);
      return;
    }
    WireReader r(*msg, "message from " + name_);
    const std::string type = r.str_or("type", "reply");
    if (type != "reply") {
      if (on_message_) on_message_(*msg);
      continue;
    }
    const uint64_t call_id = r.u64_or("call_id", 0);
    std::lock_guard lock(mu_);
    auto it = pending_.find(call_id);
    if (it != pending_.end()) it->second = std::move(msg).value();  // else: a late reply
    cv_.notify_all();
  }
}

Status NodeLink::send(const Json& message, Duration timeout) {
  std::lock_guard lock(send_mu_);
  return send_json(*channel_, message, timeout);
}

Result<Json> NodeLink::call(const Json& request, Duration timeout) {
  return call(request, timeout, Progress{});
}

Result<Json> NodeLink::call(const Json& request, Duration timeout, const Progress& progress) {
  const auto start = std::chrono::steady_clock::now();
  Json message = request;
  uint64_t id = 0;
  {
    std::lock_guard lock(mu_);
    if (!closed_.is_ok()) return closed_;
    id = next_call_id_++;
    pending_[id];
  }
  message["type"] = "call";
  message["call_id"] = id;
  Status sent = send(message, timeout);
  std::unique_lock lock(mu_);
  if (!sent.is_ok()) {
    pending_.erase(id);
    return Status::unavailable(sent.message()).with_context(name_);
  }
  const auto done = [&] { return pending_[id].has_value() || !closed_.is_ok(); };
  // Progress only moves the deadline later; it is re-read each time the deadline passes.
  const auto deadline = [&] { return (progress ? std::max(start, progress()) : start) + timeout; };
  for (auto d = deadline(); !done() && std::chrono::steady_clock::now() < d; d = deadline()) {
    cv_.wait_until(lock, d, done);
  }
  std::optional<Json> reply = std::move(pending_[id]);
  pending_.erase(id);
  if (!reply) {
    if (!closed_.is_ok()) return closed_;
    const std::string cmd = WireReader(request, "call").str_or("cmd", "?");
    if (progress) {
      return Status::timed_out(fmt::format("{}: neither a reply to '{}' nor progress for {:.1f} s",
                                           name_, cmd, to_seconds(timeout)));
    }
    return Status::timed_out(
        fmt::format("{}: no reply to '{}' within {:.1f} s", name_, cmd, to_seconds(timeout)));
  }
  DP_RETURN_IF_ERROR(reply_status(*reply, name_));
  return std::move(reply).value();
}

}  // namespace dualpath::engine
