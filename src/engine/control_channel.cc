#include "engine/control_channel.h"

#include <fmt/format.h>

#include <atomic>
#include <chrono>

namespace dualpath::engine {

Status send_json(transport::OobChannel& channel, const Json& message, Duration timeout) {
  const std::string text = message.dump();
  return channel.send(std::as_bytes(std::span(text.data(), text.size())), timeout);
}

Result<Json> receive_json(transport::OobChannel& channel, Duration timeout) {
  DP_ASSIGN_OR_RETURN(auto bytes, channel.receive(timeout));
  Json j = Json::parse(reinterpret_cast<const char*>(bytes.data()),
                       reinterpret_cast<const char*>(bytes.data()) + bytes.size(), nullptr,
                       /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return Status::corruption(
        fmt::format("control message of {} bytes is not a JSON object", bytes.size()));
  }
  return j;
}

Result<Json> call(transport::OobChannel& channel, const Json& request, Duration timeout) {
  // Replies carry the request's call id: a late reply to an earlier call that timed out on our
  // side is skipped, never taken for this call's.
  static std::atomic<uint64_t> next_call_id{1};  // relaxed: only has to hand out distinct ids
  const uint64_t call_id = next_call_id.fetch_add(1, std::memory_order_relaxed);
  Json message = request;
  message["call_id"] = call_id;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  DP_RETURN_IF_ERROR(send_json(channel, message, timeout));
  Json reply;
  for (;;) {
    const auto left =
        std::chrono::duration_cast<Duration>(deadline - std::chrono::steady_clock::now());
    if (left <= Duration::zero()) {
      return Status::timed_out(
          fmt::format("no reply to '{}' within the deadline", request.value("cmd", std::string())));
    }
    DP_ASSIGN_OR_RETURN(reply, receive_json(channel, left));
    if (reply.value("call_id", uint64_t{0}) == call_id) break;
  }
  if (!reply.value("ok", false)) {
    const int code = reply.value("code", static_cast<int>(StatusCode::kInternal));
    return Status(static_cast<StatusCode>(code), reply.value("error", std::string("no message")));
  }
  return reply;
}

Json ok_reply(Json fields) {
  fields["ok"] = true;
  return fields;
}

Json error_reply(const Status& status) {
  return Json{
      {"ok", false}, {"code", static_cast<int>(status.code())}, {"error", status.message()}};
}

std::string to_hex(std::span<const std::byte> bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (std::byte b : bytes) {
    out.push_back(kDigits[static_cast<unsigned>(b) >> 4]);
    out.push_back(kDigits[static_cast<unsigned>(b) & 15]);
  }
  return out;
}

Result<std::vector<std::byte>> from_hex(const std::string& hex) {
  if (hex.size() % 2 != 0) return Status::corruption("hex text of odd length");
  auto digit = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  std::vector<std::byte> out(hex.size() / 2);
  for (size_t i = 0; i < out.size(); ++i) {
    int hi = digit(hex[2 * i]);
    int lo = digit(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) return Status::corruption("hex text with a non-hex digit");
    out[i] = static_cast<std::byte>(hi * 16 + lo);
  }
  return out;
}

}  // namespace dualpath::engine
