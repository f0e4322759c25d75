#pragma once
// read_mooncake(): the Mooncake FAST'25 request traces (shared/traces/mooncake_fast25/SOURCE.md)
// as timestamped requests. One JSON object per line:
//   {"timestamp": ms since the trace start, "input_length": prompt tokens,
//    "output_length": generated tokens, "hash_ids": [prefix block ids, one per 512 tokens]}
// The trace has no sessions: a request reuses KV through its hash ids alone. Equal ids mean the
// same block with the same prefix, so the store is content-addressed and a request hits the
// longest run of its leading ids that earlier requests stored (decided by the replay, which
// knows when each request stored its blocks).

#include <cstdint>
#include <string>
#include <vector>

#include "dualpath/result.h"

namespace dualpath::workload {

// The Mooncake FAST'25 traces hash prompts in 512-token blocks (SOURCE.md).
inline constexpr int64_t kMooncakeBlockTokens = 512;

struct TraceRequest {
  double arrival_s = 0;       // timestamp / 1000
  int64_t input_tokens = 0;   // >= 1
  int64_t output_tokens = 0;  // as recorded (may be 0; a replayed turn generates >= 1)
  // Dense ids (0 .. RequestTrace::distinct_blocks - 1) of the prompt's prefix blocks; the last
  // one covers a partial block when input_tokens is not a multiple of block_tokens.
  std::vector<uint32_t> block_ids;

  // Blocks wholly covered by the prompt: only these can be stored and hit.
  int64_t full_blocks(int64_t block_tokens) const { return input_tokens / block_tokens; }
};

struct RequestTrace {
  std::string name;  // "mooncake:PATH"
  int64_t block_tokens = kMooncakeBlockTokens;
  uint32_t distinct_blocks = 0;
  std::vector<TraceRequest> requests;  // in arrival order (stable for equal timestamps)
};

// Errors: a missing or unreadable file (not_found / io_error naming the path and the fix); a
// malformed line (invalid_argument naming file:line, the field and the expected form); a file
// without requests. Never throws.
Result<RequestTrace> read_mooncake(const std::string& path);

// The trace's own hit ratio, as SOURCE.md computes it: prompt tokens in leading full blocks that
// an earlier request (in arrival order) contained, over all prompt tokens. A replay that stores a
// request's blocks only when it finishes hits at most this much.
double static_prefix_hit_ratio(const RequestTrace& trace);

}  // namespace dualpath::workload
