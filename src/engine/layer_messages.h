#pragma once
// The two active messages of the DE read path's per-layer stream (model traffic class):
//   PE -> DE  kPushLayerAm:   "put layer `layer` of request `request_id`'s hit blocks into my HBM
//                              at `pe_hbm_offset_bytes`" (push, not get: a get over TCP is
//                              emulated by the target's progress thread, docs/transport.md)
//   DE -> PE  kLayerPushedAm: "done" with a StatusCode; the put has completed remotely (flushed)
//                              before this message is sent, so the PE may compute on the slot.
// Plain structs copied as bytes; both ends are the same binary on the same machine.

#include <cstdint>
#include <cstring>
#include <optional>
#include <span>

namespace dualpath::engine {

inline constexpr uint16_t kPushLayerAm = 20;
inline constexpr uint16_t kLayerPushedAm = 21;

struct PushLayerMsg {
  uint64_t request_id = 0;
  uint64_t pe_hbm_offset_bytes = 0;  // where hit token 0 of the layer goes in the PE's arena
  uint32_t layer = 0;
  uint32_t pe_index = 0;   // the PE node
  uint32_t pe_engine = 0;  // whose HBM arena on it
  uint32_t reserved = 0;
};

struct LayerPushedMsg {
  uint64_t request_id = 0;
  uint32_t layer = 0;
  int32_t code = 0;  // StatusCode
};

template <typename T>
std::span<const std::byte> message_bytes(const T& msg) {
  return std::as_bytes(std::span(&msg, 1));
}

template <typename T>
std::optional<T> parse_message(std::span<const std::byte> bytes) {
  if (bytes.size() != sizeof(T)) return std::nullopt;
  T msg;
  std::memcpy(&msg, bytes.data(), sizeof(T));
  return msg;
}

}  // namespace dualpath::engine
