#pragma once
// OnlineStopRule: when an online run has said what it can (PAPER.md §9), shared by the simulator
// and the live benchmark so that both stop, and report, by the same rule. Every check interval
// the TTFT statistic (OnlineConfig::slo_statistic) over the last window is computed; the run
// stops when it exceeds the TTFT SLO ("ttft_slo": the cluster is past its capacity), when it is
// within steady_tolerance of its value lookback_s earlier ("steady_state"), or at the duration
// cap ("duration"). Latencies are then reported over the last window.
//
// Pure (times are the caller's: simulated or emulated seconds). Thread-compatible.

#include <deque>
#include <string_view>
#include <utility>
#include <vector>

#include "sim/sim_config.h"

namespace dualpath::sim {

class OnlineStopRule {
 public:
  explicit OnlineStopRule(const OnlineConfig& config) : cfg_(config) {}

  // A request's first token at `t`, `ttft` after its arrival. Any order.
  void add(double t, double ttft) { samples_.emplace_back(t, ttft); }
  // The check at `now` (call every check_interval_s): empty to go on, else why the run stops.
  // `apply_ttft_rules` false (a timestamped trace) applies the duration cap only.
  std::string_view check(double now, bool apply_ttft_rules = true);
  // The statistic of the TTFTs of first tokens in (from, to]; NaN when there are none.
  double window_statistic(double from, double to) const;

 private:
  OnlineConfig cfg_;
  std::deque<std::pair<double, double>> samples_;  // (first token time, ttft)
  std::vector<double> history_;                    // the window statistic at each check
};

// The verdict of an online run, the simulator's and the live benchmark's alike: met when its
// TTFT and TPOT statistics (over the reported window) are within the SLO and the stop rule did
// not stop it for its TTFT ("ttft_slo"). So the verdict a run prints is the one its stop rule
// reached: a run stopped past capacity is not met, even when the window reported after the stop
// reads a little under the SLO.
bool slo_met(const OnlineConfig& config,
             std::string_view stop_reason,
             double ttft_statistic,
             double tpot_statistic);

}  // namespace dualpath::sim
