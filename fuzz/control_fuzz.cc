// The control plane's message readers on any bytes, as a node or the scheduler receives them off
// the wire (control.proto): protobuf's parse of each message type, then control/convert.h's
// conversion into engine values with its range checks, and a node's reading of a turn spec into
// both engines' requests. A bad message must be an error for that message, never a crash, an
// abort or an out-of-range value that reaches an engine.
#include <cstddef>
#include <cstdint>
#include <string>

#include "control/convert.h"

namespace {

namespace pb = dualpath::control::pb;

template <class M>
bool parse(M& m, const uint8_t* data, size_t size) {
  return m.ParseFromArray(data, static_cast<int>(size));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace dualpath::control;
  // The first byte picks the block size a node would check against (1..256 tokens).
  const int64_t block = size > 0 ? 1 + data[0] : 64;
  if (pb::PrepareRequest m; parse(m, data, size)) {
    auto r = prepare_request(m, block);
    // An accepted request is the plan's shape: whole blocks, the DE read inside the hit.
    if (r.is_ok() && (r->hit_tokens % block != 0 || r->read_from_tokens > r->hit_tokens ||
                      r->hit_tokens >= static_cast<int64_t>(r->tokens.size()))) {
      __builtin_trap();
    }
  }
  if (pb::PrefillRequest m; parse(m, data, size)) {
    auto r = prefill_request(m, block);
    if (r.is_ok() && (r->pe_read_tokens > r->hit_tokens || r->pe_read_tokens < 0)) __builtin_trap();
  }
  if (pb::DecodeRequest m; parse(m, data, size)) (void)decode_request(m);
  if (pb::PrepareReply m; parse(m, data, size)) (void)from_proto(m);
  if (pb::PrefillReply m; parse(m, data, size)) (void)from_proto(m);
  if (pb::DecodeReply m; parse(m, data, size)) (void)from_proto(m);
  if (pb::LoadReport m; parse(m, data, size)) (void)from_proto(m);
  if (pb::Hello m; parse(m, data, size)) (void)from_proto(m);
  if (pb::NodeSetup m; parse(m, data, size)) (void)from_proto(m);
  if (pb::SessionMessage m; parse(m, data, size)) {
    if (m.has_report()) (void)from_proto(m.report());
    if (m.has_hello()) (void)from_proto(m.hello());
  }
  return 0;
}
