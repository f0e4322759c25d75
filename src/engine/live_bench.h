#pragma once
// The live benchmark (`dualpath bench live`): agents replayed through a LocalCluster, one driver
// thread per agent, each turn's shape (context kept, append, generation) taken from the same
// workload/ replay the simulator runs (sim::build_agents on the same config file), so the two
// can be compared turn for turn:
//
//   prompt_i  = context_i (the agent's earlier prompts and generated tokens, cut to the turn's
//               kept context) + append_i fresh random token ids;
//   hit       = the longest prefix of it in the store (the blocks earlier turns persisted), or
//               for the oracle the kept context less its last (generated) token, whose KV
//               only the next prefill computes, block-rounded: the same hits;
//   output    = exactly gen_i tokens, which join the context.
//
// Agent a decodes on decode node a mod D, so its later turns hit what its decode node persisted.
// Times are reported in emulated seconds (real seconds / time_dilation) next to the real ones,
// so a modeled cluster's figures compare with the simulator's.
//
// Threads: run_live_bench blocks; it runs one thread per agent and calls `progress` from them,
// one call at a time.

#include <cstdint>
#include <functional>
#include <vector>

#include "engine/local_cluster.h"
#include "workload/trajectory.h"

namespace dualpath::engine {

struct LiveBenchOptions {
  sched::PathRequest path = sched::PathRequest();
  uint64_t seed = 1;  // the appended token ids
  // Called after every turn with (turns done, turns in all, real seconds since the start).
  std::function<void(int64_t, int64_t, double)> progress;
};

struct LiveBenchResult {
  double time_dilation = 1;
  double jct_s = 0;       // emulated: the last agent's finish (real / time_dilation)
  double jct_real_s = 0;  // real
  int agents = 0;
  int64_t turns = 0;
  int64_t prompt_tokens = 0;
  int64_t hit_tokens = 0;
  int64_t pe_path_turns = 0;
  int64_t de_path_turns = 0;
  int64_t failed_over_turns = 0;
  HopBytes bytes;
  std::vector<int64_t> storage_read_by_node;  // [0] the PE node, then decode nodes by index
  double ttft_p50_s = 0, ttft_p99_s = 0, ttft_mean_s = 0;  // emulated
  double tpot_p50_s = 0, tpot_p99_s = 0;                   // emulated
  // Per-agent session lengths (emulated seconds), to see the tail.
  std::vector<double> agent_jct_s;

  Json to_json() const;
  std::string table() const;
};

// Runs every agent's turns to completion (or the first error, which names agent and turn).
Result<LiveBenchResult> run_live_bench(LocalCluster& cluster,
                                       const std::vector<std::vector<workload::TurnShape>>& agents,
                                       const LiveBenchOptions& options);

}  // namespace dualpath::engine
