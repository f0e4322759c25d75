#include "workload/replay.h"

#include <fmt/format.h>

#include <cmath>
#include <limits>

#include "workload/rng.h"
#include "workload/shape.h"

namespace dualpath::workload {
namespace {

// Distinct sub-stream salts so the offline and online agent draws never alias.
constexpr uint64_t kOfflineSalt = 0x6F66666C696E6531ULL;
constexpr uint64_t kOnlineSalt = 0x6F6E6C696E653231ULL;

Status check_dataset(const Dataset& ds, const ReplayOptions& options) {
  if (ds.trajectories.empty()) {
    return Status::invalid_argument(fmt::format(
        "dataset '{}' has no trajectories to replay; check --dataset (32k|48k|64k|weka:PATH)",
        ds.name));
  }
  if (options.synthetic_first_round_tokens < 0) {
    return Status::invalid_argument(
        fmt::format("synthetic first round of {} tokens; use 0 (none) or a positive length",
                    options.synthetic_first_round_tokens));
  }
  return Status::ok();
}

Agent make_agent(const Dataset& ds, Rng& rng, int64_t id, double t, const ReplayOptions& o) {
  Agent a;
  a.id = id;
  a.trajectory = static_cast<int32_t>(rng.below(ds.trajectories.size()));
  a.start_time_s = t;
  a.synthetic_tokens = o.synthetic_first_round_tokens;
  a.honour_think_time = o.honour_think_time;
  return a;
}

Result<std::vector<Agent>> online(const Dataset& ds,
                                  double agents_per_s,
                                  double duration_s,
                                  int64_t max_agents,
                                  uint64_t seed,
                                  const ReplayOptions& options) {
  DP_RETURN_IF_ERROR(check_dataset(ds, options));
  if (!(agents_per_s > 0) || !std::isfinite(agents_per_s)) {
    return Status::invalid_argument(fmt::format(
        "online replay at {} agents/s; the arrival rate must be a positive number", agents_per_s));
  }
  uint64_t st = seed ^ kOnlineSalt;
  Rng rng(splitmix64(st));
  std::vector<Agent> agents;
  double t = 0;
  for (int64_t id = 0; id < max_agents; ++id) {
    t += rng.exponential(1.0 / agents_per_s);
    if (t >= duration_s) break;
    agents.push_back(make_agent(ds, rng, id, t, options));
  }
  return agents;
}

}  // namespace

int agent_turn_count(const Dataset& ds, const Agent& agent) {
  return static_cast<int>(ds.trajectories[static_cast<size_t>(agent.trajectory)].turns.size()) +
         (agent.synthetic_tokens > 0 ? 1 : 0);
}

Turn agent_turn(const Dataset& ds, const Agent& agent, int i) {
  if (agent.synthetic_tokens > 0) {
    if (i == 0) {
      Turn t;
      t.append_tokens = agent.synthetic_tokens;
      t.gen_tokens = 1;
      return t;
    }
    --i;
  }
  Turn t = ds.trajectories[static_cast<size_t>(agent.trajectory)].turns[static_cast<size_t>(i)];
  // The synthetic round (A_1 + g_1) stays at the head of the context, so a trace's cut point
  // moves by its length.
  if (t.keep_tokens >= 0 && agent.synthetic_tokens > 0) t.keep_tokens += agent.synthetic_tokens + 1;
  if (!agent.honour_think_time) t.think_time_s = 0;
  return t;
}

Trajectory agent_trajectory(const Dataset& ds, const Agent& agent) {
  Trajectory tr;
  tr.id = fmt::format("agent{}:{}", agent.id,
                      ds.trajectories[static_cast<size_t>(agent.trajectory)].id);
  const int n = agent_turn_count(ds, agent);
  tr.turns.reserve(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) tr.turns.push_back(agent_turn(ds, agent, i));
  return tr;
}

std::vector<TurnShape> agent_shape(const Dataset& ds, const Agent& agent) {
  return shape(agent_trajectory(ds, agent));
}

Result<std::vector<Agent>> make_offline_agents(const Dataset& ds,
                                               int n_agents,
                                               uint64_t seed,
                                               const ReplayOptions& options) {
  DP_RETURN_IF_ERROR(check_dataset(ds, options));
  if (n_agents < 1) {
    return Status::invalid_argument(
        fmt::format("offline replay with {} agents; pass --agents N with N >= 1", n_agents));
  }
  uint64_t st = seed ^ kOfflineSalt;
  Rng rng(splitmix64(st));
  std::vector<Agent> agents;
  agents.reserve(static_cast<size_t>(n_agents));
  for (int64_t id = 0; id < n_agents; ++id) agents.push_back(make_agent(ds, rng, id, 0.0, options));
  return agents;
}

Result<std::vector<Agent>> make_online_agents(const Dataset& ds,
                                              double agents_per_s,
                                              double duration_s,
                                              uint64_t seed,
                                              const ReplayOptions& options) {
  if (!(duration_s > 0) || !std::isfinite(duration_s)) {
    return Status::invalid_argument(fmt::format(
        "online replay for {} s; the duration must be a positive number of seconds", duration_s));
  }
  return online(ds, agents_per_s, duration_s, std::numeric_limits<int64_t>::max(), seed, options);
}

Result<std::vector<Agent>> make_online_agents_count(const Dataset& ds,
                                                    double agents_per_s,
                                                    int n_agents,
                                                    uint64_t seed,
                                                    const ReplayOptions& options) {
  if (n_agents < 1) {
    return Status::invalid_argument(
        fmt::format("online replay with {} agents; ask for at least 1 agent", n_agents));
  }
  return online(ds, agents_per_s, std::numeric_limits<double>::infinity(), n_agents, seed, options);
}

}  // namespace dualpath::workload
