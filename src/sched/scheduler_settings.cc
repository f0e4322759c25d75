#include "sched/scheduler_settings.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <array>
#include <limits>
#include <tuple>

namespace dualpath::sched {

namespace {

struct ModeRow {
  Mode mode;
  const char* name;
  ModePolicy policy;
};

// The one table (issue 31): the simulator's modes and the live service's are its rows.
constexpr std::array<ModeRow, 6> kModes = {{
    {Mode::kBasic, "basic", {EnginePolicy::kRoundRobin, PathPolicy::kPeOnly, false, true}},
    {Mode::kLayerwise, "layerwise", {EnginePolicy::kRoundRobin, PathPolicy::kPeOnly, true, false}},
    {Mode::kDualPath, "dualpath", {EnginePolicy::kRoundRobin, PathPolicy::kAlternate, true, false}},
    {Mode::kFull, "full", {EnginePolicy::kPaper, PathPolicy::kShortestQueue, true, true}},
    {Mode::kOracle, "oracle", {EnginePolicy::kPaper, PathPolicy::kNoIo, true, true}},
    {Mode::kSplit, "split", {EnginePolicy::kPaper, PathPolicy::kSplit, true, true}},
}};

const ModeRow& row(Mode m) { return kModes[static_cast<size_t>(m)]; }

}  // namespace

ModePolicy mode_policy(Mode m) { return row(m).policy; }

bool uses_paper_scheduler(Mode m) { return mode_policy(m).engines == EnginePolicy::kPaper; }

bool cache_policies_apply(Mode m) { return m == Mode::kFull || m == Mode::kSplit; }

bool reads_on_both_sides(Mode m) {
  const PathPolicy p = mode_policy(m).paths;
  return p == PathPolicy::kAlternate || p == PathPolicy::kShortestQueue || p == PathPolicy::kSplit;
}

const std::vector<std::string>& mode_names() {
  static const std::vector<std::string> kNames = [] {
    std::vector<std::string> names;
    for (const ModeRow& r : kModes) names.emplace_back(r.name);
    return names;
  }();
  return kNames;
}

std::string_view mode_name(Mode m) { return row(m).name; }

Result<Mode> parse_mode(std::string_view name, bool live) {
  for (const ModeRow& r : kModes) {
    if (name != r.name) continue;
    if (live && !r.policy.live) break;
    return r.mode;
  }
  if (live) {
    return Status::invalid_argument(fmt::format(
        "scheduler.mode = '{}': the live system runs basic (PE read path only, round robin), "
        "full (DualPath: both read paths, the paper's scheduler), split (full, with one "
        "request's hit read by both sides) or oracle (no KV I/O); layerwise and dualpath are "
        "simulator ablations",
        name));
  }
  const std::string hint = closest_match(name, mode_names());
  return Status::invalid_argument(fmt::format(
      "unknown mode '{}'; use one of {}{}", name, fmt::join(mode_names(), ", "),
      hint.empty() ? "" : fmt::format(" (did you mean '{}'?)", hint)));
}

Status SchedulerSettings::validate() const {
  auto need = [](bool ok, std::string message) {
    return ok ? Status::ok() : Status::invalid_argument(std::move(message));
  };
  // Upper bounds keep typos (1e300, inf) from overflowing token counts or stalling a run.
  DP_RETURN_IF_ERROR(need(quota_s > 0 && quota_s <= 3600,
                          fmt::format("scheduler.quota_ms = {} must be in (0, 3600000] (the paper "
                                      "uses 300)",
                                      quota_s * 1e3)));
  for (auto [v, name, fix] : {std::tuple{alpha_s, "scheduler.alpha_s", "the paper uses 3"},
                              std::tuple{beta_s, "scheduler.beta_s", "the paper uses 5"},
                              std::tuple{z_factor, "scheduler.z_factor", "the paper uses 1.05"}}) {
    DP_RETURN_IF_ERROR(
        need(v > 0 && v <= 1e6, fmt::format("{} = {} must be in (0, 1e6]; {}", name, v, fix)));
  }
  DP_RETURN_IF_ERROR(need(fetch_interval_s >= 1e-6 && fetch_interval_s <= 3600,
                          fmt::format("scheduler.fetch_interval_ms = {} must be between 0.001 and "
                                      "3600000 (default 50)",
                                      fetch_interval_s * 1e3)));
  return need(split_min_tokens >= 1,
              fmt::format("scheduler.split_min_tokens = {} must be >= 1", split_min_tokens));
}

Status read_scheduler_settings(Config& f, SchedulerSettings& s, bool live) {
  if (f.has("scheduler.mode")) {
    auto mode = parse_mode(f.string("scheduler.mode", std::string(mode_name(s.mode))), live);
    if (mode.is_ok()) {
      s.mode = *mode;
    } else {
      f.fail("scheduler.mode", mode.status().message());
    }
  }
  s.quota_s = f.positive_number("scheduler.quota_ms", s.quota_s * 1e3, "ms") / 1e3;
  s.alpha_s = f.positive_number("scheduler.alpha_s", s.alpha_s, "seconds of reading");
  s.beta_s = f.positive_number("scheduler.beta_s", s.beta_s, "seconds of prefill");
  s.z_factor = f.positive_number("scheduler.z_factor", s.z_factor);
  s.fetch_interval_s =
      f.positive_number("scheduler.fetch_interval_ms", s.fetch_interval_s * 1e3, "ms") / 1e3;
  DP_ASSIGN_OR_RETURN(s.pe_policy, parse_pe_policy(f.choice("scheduler.pe_policy",
                                                            std::string(pe_policy_name(s.pe_policy)),
                                                            {"paper", "tail"})));
  s.split_min_tokens = f.integer("scheduler.split_min_tokens", s.split_min_tokens, 1, INT64_MAX,
                                 "tokens: a smaller part of a split read is not split off");
  return Status::ok();
}

ClusterSchedulerParams make_cluster_scheduler_params(const SchedulerSettings& s,
                                                     const SchedulerInputs& in) {
  ClusterSchedulerParams p;
  const ModePolicy policy = mode_policy(s.mode);
  p.engines = policy.engines;
  p.paths = policy.paths;
  if (in.cost != nullptr) {
    // Beta at the workload's typical turn, batched by the compute quota over one PE group.
    p.pe = derive_pe_params(*in.cost, in.typical.cached_tokens, in.typical.new_tokens, s.quota_s,
                            in.pe_group_gpus, in.snic_bytes_per_s, in.kv_bytes_per_token,
                            s.alpha_s, s.beta_s);
  } else {
    p.pe.beta_tokens = static_cast<int64_t>(in.prefill_tokens_per_s * s.beta_s);
    p.pe.alpha_tokens =
        static_cast<int64_t>(in.snic_bytes_per_s * s.alpha_s / in.kv_bytes_per_token);
  }
  if (in.gpus_per_engine != 1) {
    p.pe.beta_tokens =
        static_cast<int64_t>(static_cast<double>(p.pe.beta_tokens) * in.gpus_per_engine);
  }
  // An unlimited storage NIC never has a long read queue.
  if (!(in.snic_bytes_per_s > 0)) p.pe.alpha_tokens = std::numeric_limits<int64_t>::max() / 4;
  p.pe.policy = s.pe_policy;
  p.de.z_factor = s.z_factor;
  p.de_hbm_bytes = in.de_hbm_bytes;
  p.de_group_hbm_bytes = in.de_group_hbm_bytes;
  p.block_tokens = in.block_tokens;
  p.split_min_tokens = s.split_min_tokens;
  p.recompute_auto = in.recompute_auto && in.snic_bytes_per_s > 0;
  p.read_tokens_per_s = in.snic_bytes_per_s / in.kv_bytes_per_token;
  return p;
}

}  // namespace dualpath::sched
