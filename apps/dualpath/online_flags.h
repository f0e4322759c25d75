#pragma once
// The online-serving flags (sim/sim_config.h OnlineConfig), shared by `dualpath sim` (one run at
// --aps) and `dualpath capacity` (which searches the APS itself, so has no --aps).

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <optional>
#include <string>

#include "sim/sim_config.h"

namespace dualpath::app {

struct OnlineFlags {
  // Each is applied only when given; a given value is range-checked by SimConfig::validate() like
  // the same key of [online] in a TOML file.
  std::optional<double> aps;
  std::optional<double> duration_s;
  std::optional<double> slo_ttft_s;
  std::optional<double> slo_tpot_ms;
  std::optional<std::string> slo_statistic;
  std::optional<double> time_scale;
  std::optional<std::string> slo_turns;

  void add_to(CLI::App* cmd, bool with_aps = true) {
    if (with_aps) {
      cmd->add_option("--aps", aps,
                      "online: agents arriving per second (Poisson), each replaying its whole "
                      "trajectory; the run stops at steady state or when TTFT breaks the SLO");
    }
    cmd->add_option("--duration", duration_s, "online: cap on simulated seconds (default 10800)");
    cmd->add_option("--slo-ttft", slo_ttft_s, "online: TTFT SLO in seconds (default 4)");
    cmd->add_option("--slo-tpot", slo_tpot_ms, "online: TPOT SLO in milliseconds (default 50)");
    cmd->add_option("--slo-statistic", slo_statistic,
                    "online: the statistic the SLO bounds: mean (default, the paper's), p50, p90 "
                    "or p99");
    cmd->add_option("--slo-turns", slo_turns,
                    "online: the turns the SLO judges: all (default) or hit (turns with a cached "
                    "prefix; first turns, all prefill, are reported apart as ttft_first_s)");
    cmd->add_option("--time-scale", time_scale,
                    "mooncake:PATH traces: multiply the timestamps (0.5 = twice the arrival rate)");
  }

  // Applies the given flags to cfg.online; errors name the flag and the fix.
  Status apply(sim::SimConfig& cfg) const {
    const bool trace = sim::is_timestamped_trace(cfg.dataset);
    if (aps) {
      if (!(*aps > 0))
        return Status::invalid_argument(fmt::format(
            "--aps {}: the arrival rate must be a positive number of agents per second, e.g. "
            "--aps 0.4; leave --aps out for an offline run",
            *aps));
      if (trace)
        return Status::invalid_argument(
            "--aps with a mooncake: trace: the trace's timestamps set the arrivals; drop --aps, "
            "or use --time-scale 0.5 to replay it twice as fast");
      cfg.online.aps = *aps;
    }
    if (time_scale && !trace)
      return Status::invalid_argument(fmt::format(
          "--time-scale applies to traces with timestamps (--dataset mooncake:PATH), not to '{}'; "
          "use --aps for the arrival rate",
          cfg.dataset));
    if (duration_s) cfg.online.duration_s = *duration_s;
    if (slo_ttft_s) cfg.online.slo_ttft_s = *slo_ttft_s;
    if (slo_tpot_ms) cfg.online.slo_tpot_s = *slo_tpot_ms / 1e3;
    if (slo_statistic) cfg.online.slo_statistic = *slo_statistic;
    if (time_scale) cfg.online.time_scale = *time_scale;
    if (slo_turns) {
      if (*slo_turns != "all" && *slo_turns != "hit")
        return Status::invalid_argument(fmt::format(
            "--slo-turns '{}': use all (every turn) or hit (turns with a cached prefix)",
            *slo_turns));
      cfg.online.slo_turns = *slo_turns;
    }
    return Status::ok();
  }
};

}  // namespace dualpath::app
