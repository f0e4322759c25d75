#pragma once
// Workload types shared by the simulator and the live driver (DESIGN.md `workload/`).
//
// A Trajectory is one agent's multi-turn session. Turn i (PAPER.md §9 replay semantics):
//   context_i   = everything the agent has seen before turn i (prompts and generated tokens),
//                 optionally truncated to `keep_tokens` first (a real trace's context compaction);
//   prompt_i    = context_i + append_i;   hit-eligible prefix = context_i (hits only within the
//                 trajectory; the store holds every block the agent wrote, no eviction);
//   generation  = exactly gen_i tokens;   context_{i+1} = prompt_i + gen_i.

#include <cstdint>
#include <string>
#include <vector>

namespace dualpath::workload {

struct Turn {
  int64_t append_tokens = 0;  // new prompt tokens this turn (tool output, user text)
  int64_t gen_tokens = 1;     // tokens generated this turn (>= 1)
  double think_time_s = 0.0;  // client/tool delay before this turn is sent (0 = paper default)
  // If >= 0, the context is cut to this many tokens before the append (the rest is not reused).
  // -1 (the Table-2 generator) keeps the whole context.
  int64_t keep_tokens = -1;
};

struct Trajectory {
  std::string id;
  std::vector<Turn> turns;
};

struct Dataset {
  std::string name;             // "64k", "weka:/path/file.jsonl", ...
  int64_t max_len_tokens = 0;   // MaxLen (MAL); 0 = unbounded
  std::vector<Trajectory> trajectories;
};

// Per-turn view after applying the replay semantics.
struct TurnShape {
  int64_t context_tokens = 0;  // hit-eligible prefix (before block rounding)
  int64_t prompt_tokens = 0;   // context + append
  int64_t gen_tokens = 0;
};

}  // namespace dualpath::workload
