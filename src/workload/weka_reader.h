#pragma once
// read_weka(): the real Claude-Code sessions of shared/traces/weka_claude_code (SOURCE.md there)
// as a Dataset. One JSON trace per line; each request becomes one Turn:
//   keep_tokens = block_size x (number of leading hash ids of the request already seen in an
//                 earlier request of the same trajectory: prefix-trie semantics), at most `in`;
//   append      = in - min(keep, context so far), so the replayed prompt is exactly `in`;
//   gen         = out (an `out` of 0, 27 requests in the file, becomes 1: a turn generates >= 1);
//   think_time  = think_time.
// Sub-agents (`"type":"subagent"` entries with nested requests) become trajectories of their own,
// "<trace id>/<agent_id>", placed after their parent, or are dropped (include_subagents = false).
// Their ids share the parent's namespace in the trace, but a separate trajectory only hits on what
// it has itself seen, so each trajectory keeps its own seen-set.

#include <cstdint>
#include <string>

#include "dualpath/result.h"
#include "workload/trajectory.h"

namespace dualpath::workload {

struct WekaOptions {
  bool include_subagents = true;
  // Read only the first N traces (lines with a trace); 0 = all.
  int64_t max_sessions = 0;
  // Dataset::max_len_tokens: -1 = the longest replayed context seen (max over turns of prompt +
  // gen, so scale(ds, 1, 1) truncates nothing); 0 = unbounded; > 0 = this value.
  int64_t max_len_tokens = -1;
};

// Errors: a missing or unreadable file (not_found / io_error, naming the path and the fix); a
// malformed line (invalid_argument naming file:line and the field).
Result<Dataset> read_weka(const std::string& path, const WekaOptions& options = {});

}  // namespace dualpath::workload
