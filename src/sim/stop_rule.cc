#include "sim/stop_rule.h"

#include <cmath>

#include "common/percentiles.h"

namespace dualpath::sim {

double OnlineStopRule::window_statistic(double from, double to) const {
  std::vector<double> v;
  for (const auto& [t, ttft] : samples_) {
    if (t > from && t <= to) v.push_back(ttft);
  }
  if (v.empty()) return std::nan("");
  return summarize(std::move(v)).get(cfg_.slo_statistic);
}

std::string_view OnlineStopRule::check(double now, bool apply_ttft_rules) {
  if (now >= cfg_.duration_s - 1e-9) return "duration";
  if (!apply_ttft_rules) return {};
  const double w = window_statistic(now - cfg_.window_s, now);
  history_.push_back(w);
  // Judging hit turns only, the rule waits for one whole window: at the start every session is
  // on its first turn, and the few hit turns of the first seconds (one agent's long append) would
  // otherwise stop a run that can hold the SLO (WEKA: p50 16 s over one sample at 20 s).
  const bool judged = cfg_.slo_turns != "hit" || now >= cfg_.window_s - 1e-9;
  if (judged && !std::isnan(w) && w > cfg_.slo_ttft_s) return "ttft_slo";
  const auto back = static_cast<size_t>(std::llround(cfg_.lookback_s / cfg_.check_interval_s));
  if (now >= cfg_.lookback_s + cfg_.window_s && history_.size() > back) {
    const double past = history_[history_.size() - 1 - back];
    if (!std::isnan(w) && !std::isnan(past) && past > 0 &&
        std::abs(w - past) <= cfg_.steady_tolerance * past) {
      return "steady_state";
    }
  }
  // Only the last window is ever watched: drop what is older (a sample may come late by a
  // little, never by a check interval).
  const double keep_from = now - cfg_.window_s - cfg_.check_interval_s;
  std::erase_if(samples_, [&](const auto& s) { return s.first < keep_from; });
  return {};
}

bool slo_met(const OnlineConfig& config,
             std::string_view stop_reason,
             double ttft_statistic,
             double tpot_statistic) {
  return stop_reason != "ttft_slo" && ttft_statistic <= config.slo_ttft_s &&
         tpot_statistic <= config.slo_tpot_s;
}

}  // namespace dualpath::sim
