#pragma once
// TurnPlanner: the live service's side of the scheduler's inputs (sched/turn_plan.h), from its
// config: the costs a turn's request is priced with and whether a turn loads nothing. The turn
// runner calls it for every attempt, and the plan-replay check (shared_policy_test.cc) calls the
// same code with the simulator's recorded arrivals.
//
// Value type; thread-compatible.

#include <cstdint>

#include "dualpath/result.h"
#include "model/cost_model.h"
#include "sched/turn_plan.h"
#include "serve/serve_config.h"

namespace dualpath::serve {

// The live service's scheduler inputs for one turn, from its config: the turn costs of
// sched::make_sched_request and whether the turn loads nothing (the oracle bound). Shared by the
// runner and the plan-replay check.
struct TurnPlanner {
  sched::TurnCosts costs;
  const model::CostModel* cost = nullptr;  // prices the tail policy's work (modeled compute)
  sched::PathPolicy paths = sched::PathPolicy::kShortestQueue;
  // The turn loads no KV: a forced oracle path, or the mode's (no lookup in the store).
  bool no_io(const sched::PathRequest& path) const {
    return path == sched::ReadPath::kOracle || (!path && paths == sched::PathPolicy::kNoIo);
  }
  // The scheduler's request for a turn whose longest cached prefix is `cached_tokens`, of which
  // decode node `dram_node` holds the leading `dram_tokens` in its DRAM tier (-1, 0: none).
  sched::SchedRequest request(int64_t id,
                              int64_t prompt_tokens,
                              int64_t gen_tokens,
                              int64_t cached_tokens,
                              const sched::PathRequest& path,
                              int dram_node = -1,
                              int64_t dram_tokens = 0) const;
};

// The planner of a config: KV per token and the DE HBM budget in the cost model's units when
// compute is modeled (the emulated KV is kv_scale of it), so that reservations and budgets are
// the simulator's; the live bytes for the CPU model. `cost` (the service's, may be null) prices
// the tail policy's work and must outlive the planner.
Result<TurnPlanner> make_turn_planner(const ServeConfig& config, const model::CostModel* cost);

}  // namespace dualpath::serve
