#pragma once
// The turn plan (issue 31): everything both sides need to execute one placed turn, computed once
// here for the simulator (sim/cluster_sim.cc) and the live service (serve/turn_runner), so that
// the two cannot compute a scheduler input or a read differently.
//
//   make_sched_request(turn, costs)          the scheduler's view of an arriving turn: its hit
//                                            (whole cached blocks, at least one new token), its
//                                            DE HBM need (whole blocks), its path request
//   ClusterScheduler::submit / fetch         the placement: PE engine, DE engine, read path
//   plan_turn(request, placement, block)     the plan: which prompt blocks each node reads,
//                                            whether the DE pushes layers, the no-I/O case
//
// The live nodes receive the plan's read ranges in one message shape (control/), and each
// engine derives what it does from them.
//
// Pure; value types, thread-compatible.

#include <cstdint>
#include <string>

#include "model/cost_model.h"
#include "sched/cluster_scheduler.h"
#include "sched/read_path.h"

namespace dualpath::sched {

// The hit a turn's prefill loads: the cached prefix in whole blocks, leaving at least one prompt
// token to compute (its logits give the first output token; the store never holds a turn's last
// prompt token, which the decode did not run through the model).
int64_t plan_hit_tokens(int64_t cached_tokens, int64_t prompt_tokens, int64_t block_tokens);

// An arriving turn, as its caller knows it.
struct TurnInputs {
  int64_t id = 0;
  int64_t prompt_tokens = 0;
  int64_t gen_tokens = 0;
  // The prompt's longest cached prefix in tokens: the store's prefix match (live), the trace's
  // stored blocks or the turn's context (simulator), the replay's context (oracle).
  int64_t cached_tokens = 0;
  PathRequest path;       // a fixed read path, or nullopt: the policy's choice
  double pe_work_s = 0;   // its prefill work priced by the caller's cost model (PePolicy::kTail)
  // The DE DRAM tier (issue 35): the decode node holding the session's KV in DRAM and how many
  // leading tokens of it (-1, 0: none).
  int dram_node = -1;
  int64_t dram_tokens = 0;
};

// The sizes the request's needs are priced with.
struct TurnCosts {
  int64_t block_tokens = 64;
  double kv_bytes_per_token = 0;  // KV of one token, every layer (the DE's HBM need)
  double de_hbm_budget_bytes = 0;  // a request needs at most one DE engine's whole KV budget
};

// The scheduler's request for an arriving turn. A forced recompute loads nothing. With a cost
// model, its prefill work (SchedRequest::pe_work_s, PePolicy::kTail's unit) is priced by
// prefill_work_s over its hit and new tokens, and recompute_extra_s by what computing the hit
// too would add; without one, turn.pe_work_s stands and it is never recomputed.
SchedRequest make_sched_request(const TurnInputs& turn,
                                const TurnCosts& costs,
                                const model::CostModel* cost = nullptr);

// Tokens [begin, end) of the prompt, whole blocks.
struct ReadRange {
  int64_t begin_tokens = 0;
  int64_t end_tokens = 0;
  int64_t tokens() const { return end_tokens - begin_tokens; }
  bool empty() const { return end_tokens <= begin_tokens; }
  bool operator==(const ReadRange&) const = default;
};

struct TurnPlan {
  int64_t request_id = 0;
  int pe = 0;  // global PE engine (ClusterScheduler numbering)
  int de = 0;  // global DE engine
  ReadPath path = ReadPath::kPe;
  int64_t prompt_tokens = 0;
  int64_t gen_tokens = 0;
  // The prompt's leading tokens whose KV the prefill loads instead of computing (0: recompute).
  // With no_io they are taken to be in HBM already (the oracle bound).
  int64_t hit_tokens = 0;
  ReadRange pe_read;  // read from storage by the PE node into its buffer
  ReadRange de_read;  // read by the DE node into its buffer (pe_read ends where it begins)
  // Pushed by the DE node from its DRAM tier, no storage read (the hit's leading tokens; the
  // reads above start where it ends).
  ReadRange de_dram;
  // The DE node forwards de_read's and de_dram's KV to the PE, layer by layer (the DE path, a
  // split read, the DRAM tier).
  bool de_pushes_layers = false;
  bool no_io = false;  // the oracle: no storage read, no H2D, no PD transfer, nothing persisted
  double hbm_need_bytes = 0;  // DE HBM reserved at decode start
  bool operator==(const TurnPlan&) const = default;
};

// The plan of a placed request. Each side's read range comes from the placement's split of the
// hit (Placement::pe_read_tokens, de_read_tokens: the ledger's own numbers).
TurnPlan plan_turn(const SchedRequest& request, const Placement& placement);

// One line with every field, for logs and the plan-replay check.
std::string to_string(const TurnPlan& plan);

}  // namespace dualpath::sched
