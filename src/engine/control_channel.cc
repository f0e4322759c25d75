#include "engine/control_channel.h"

#include <fmt/format.h>

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
