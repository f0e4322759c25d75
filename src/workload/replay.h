#pragma once
// Agents: trajectory instances replayed by the simulator and the live driver (PAPER.md §9).
// Each agent replays one dataset trajectory, preceded by a synthetic first round: A_1 is
// `synthetic_first_round_tokens` random tokens and g_1 = 1. The random round makes every agent's
// prefix unique, so agents that replay the same trajectory never share KV (hits only within an
// agent). Think time is zero unless `honour_think_time` (PAPER.md §12 item 20).
//
// An Agent refers to its trajectory by index; the Dataset must outlive every use of the agents.

#include <cstdint>
#include <vector>

#include "dualpath/result.h"
#include "workload/trajectory.h"

namespace dualpath::workload {

struct ReplayOptions {
  // Length of the synthetic first round's append A_1 (g_1 = 1). 0 = no synthetic round.
  int64_t synthetic_first_round_tokens = 64;
  // Replay the trajectories' recorded think times (WEKA traces); the paper uses zero.
  bool honour_think_time = false;
};

struct Agent {
  int64_t id = 0;                // 0..n-1, in start-time order
  int32_t trajectory = 0;        // index into Dataset::trajectories
  double start_time_s = 0;       // when the agent sends its first round
  int64_t synthetic_tokens = 0;  // A_1 of the synthetic round (0 = none)
  bool honour_think_time = false;
};

// Number of rounds the agent sends (trajectory turns + 1 when it has a synthetic round).
int agent_turn_count(const Dataset& ds, const Agent& agent);

// Round i (0-based) of the agent: round 0 is the synthetic round when present; the trajectory's
// keep_tokens are shifted by the synthetic round's length (its A_1 + g_1 stay in the context)
// and think times are zeroed unless honour_think_time.
Turn agent_turn(const Dataset& ds, const Agent& agent, int i);

// The agent's whole session as a Trajectory (synthetic round included) and its shapes.
Trajectory agent_trajectory(const Dataset& ds, const Agent& agent);
std::vector<TurnShape> agent_shape(const Dataset& ds, const Agent& agent);

// Offline replay: n_agents start at t = 0; trajectories are drawn uniformly with replacement
// (deterministic in seed). Errors: n_agents < 1, an empty dataset.
Result<std::vector<Agent>> make_offline_agents(const Dataset& ds,
                                               int n_agents,
                                               uint64_t seed,
                                               const ReplayOptions& options = {});

// Online replay: Poisson arrivals at agents_per_s, the first at an exponential time after 0,
// until duration_s (arrivals at t < duration_s). Errors: agents_per_s <= 0, duration_s <= 0,
// an empty dataset.
Result<std::vector<Agent>> make_online_agents(const Dataset& ds,
                                              double agents_per_s,
                                              double duration_s,
                                              uint64_t seed,
                                              const ReplayOptions& options = {});

// Online replay with a fixed number of Poisson arrivals instead of a duration.
Result<std::vector<Agent>> make_online_agents_count(const Dataset& ds,
                                                    double agents_per_s,
                                                    int n_agents,
                                                    uint64_t seed,
                                                    const ReplayOptions& options = {});

}  // namespace dualpath::workload
