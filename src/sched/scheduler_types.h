#pragma once
// The scheduler's view of requests and engines: plain load snapshots, no I/O, no clock
// (DESIGN.md sched/). The simulator and the live scheduler service build these from their state.

#include <cstdint>

#include "sched/read_path.h"

namespace dualpath::sched {

// A request as the scheduler sees it. tokens(r) = len_r = prompt tokens (PAPER.md §12 item 2:
// we balance prompt tokens, cached and new, because disk reads, transfers and attention all
// scale with them).
struct RequestInfo {
  int64_t id = 0;
  int64_t tokens = 0;
  double hbm_need_bytes = 0;  // DE HBM this request needs at decode start (prompt + generation)
  double work = 0;            // its prefill work (PePolicy::kTail's load unit; see PeEngineLoad)
  // The node whose DRAM holds its hit (issue 35's DE DRAM tier), -1: none. Phase 2 prefers that
  // node's engines while they stay within DeParams::affinity_factor of the balanced load.
  int affinity_node = -1;
};

struct Assignment {
  int64_t request_id = 0;
  int engine = 0;  // index into the engines snapshot passed in
};

// PE-side load (PAPER.md §8): seq_e unfinished requests, tok_e their tokens, n(e) the node.
struct PeEngineLoad {
  int node = 0;
  int64_t seq = 0;
  int64_t tok = 0;
  // The prefill work of those requests: the caller's estimate of each one's GPU seconds
  // (attention over its whole context plus the linear layers of its new tokens), or its prompt
  // tokens where the caller gives none.
  double work = 0;
};

// DE-side load: as PE, plus the engine's free HBM.
struct DeEngineLoad {
  int64_t seq = 0;
  int64_t tok = 0;
  double free_hbm_bytes = 0;
};


}  // namespace dualpath::sched
