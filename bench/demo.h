#pragma once
// The live demo (`dualpath demo`): agent sessions with multi-turn prompts replayed through the
// live cluster (serve::Cluster). Each session starts with a prompt of random token ids (from the seed) and each
// turn appends the turn's generated tokens plus a few hundred new ones, so contexts pass 4K
// tokens over 20+ turns; each turn generates a short answer greedily. Sessions run concurrently,
// one driver thread each (or round-robin, one turn at a time, with concurrent = false); the
// scheduler places every turn on any decode node (the store is shared, so a later turn hits the
// blocks its earlier turns persisted wherever they ran). Outputs do not depend on the
// interleaving.

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "serve/cluster.h"

namespace dualpath::bench {

using engine::HopBytes;
using Json = nlohmann::json;
using serve::TurnRequest;
using serve::TurnResult;

struct DemoOptions {
  int sessions = 4;
  int turns = 24;
  uint64_t seed = 1;
  sched::PathRequest path = sched::PathRequest();
  int64_t first_prompt_tokens = 512;
  int64_t min_append_tokens = 150;
  int64_t max_append_tokens = 250;
  int64_t min_gen_tokens = 16;
  int64_t max_gen_tokens = 32;
  bool concurrent = true;
};

struct DemoTurn {
  int session = 0;
  int turn = 0;
  TurnResult result;
};

struct DemoReport {
  std::vector<DemoTurn> turns;
  double wall_s = 0;

  Json to_json() const;
  // One line per session plus a total: turns, final context, hit %, bytes per hop, TTFT, TPOT.
  std::string table() const;
};

// The prompt of every turn of every session is a pure function of (seed, session, turn) and the
// outputs of its earlier turns. `progress` (may be empty) is called after every turn, from the
// session's thread, one call at a time. The report lists turns by (turn, session).
Result<DemoReport> run_demo(serve::Cluster& cluster,
                            const DemoOptions& options,
                            const std::function<void(const DemoTurn&)>& progress);

}  // namespace dualpath::bench
