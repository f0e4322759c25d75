// The control channel's decoder on any bytes, as a node or the scheduler receives them: the
// JSON parse (non-throwing, as receive_json does), then every message type's from_json, the
// reply-status reader and the hex payload decoder. One bad message must be an error for that
// message, never an exception that kills the node.
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "engine/control_channel.h"
#include "engine/node_protocol.h"
#include "engine/wire.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace dualpath::engine;
  const char* text = reinterpret_cast<const char*>(data);
  const nlohmann::json j = nlohmann::json::parse(text, text + size, nullptr,
                                                 /*allow_exceptions=*/false);
  if (j.is_discarded()) return 0;
  (void)HopBytes::from_json(j);
  (void)PrepareRequest::from_json(j);
  (void)PrepareReply::from_json(j);
  (void)PrefillRequest::from_json(j);
  (void)PrefillReply::from_json(j);
  (void)DecodeRequest::from_json(j);
  (void)DecodeReply::from_json(j);
  (void)LoadReport::from_json(j);
  (void)TokenEvent::from_json(j);
  (void)RegisterRequest::from_json(j);
  (void)reply_status(j, "fuzz");
  if (j.is_object()) {
    for (const auto& [key, value] : j.items()) {
      if (value.is_string()) (void)from_hex(value.get<std::string>());
      (void)HopBytes::from_json(value);  // nested objects reach the same readers
    }
  }
  return 0;
}
