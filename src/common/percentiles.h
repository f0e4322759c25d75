#pragma once
// Exact percentiles over a sample vector (copies and sorts; fine for the sizes we report).

#include <cstdint>
#include <string_view>
#include <vector>

namespace dualpath {

// Linear interpolation between closest ranks; q in [0, 1]. Returns 0 for an empty sample.
double percentile(std::vector<double> samples, double q);
double median(std::vector<double> samples);
double mean(const std::vector<double>& samples);

// The latency summary every report uses (sim, bench live, bench serve): mean and the p50, p90 and
// p99 of one metric, in the samples' unit, over `count` samples (all 0 when there are none).
struct LatencyStats {
  double mean = 0, p50 = 0, p90 = 0, p99 = 0, max = 0;
  int64_t count = 0;
  // The statistic named "mean", "p50", "p90" or "p99" (an SLO's); mean for anything else.
  double get(std::string_view statistic) const;
};

LatencyStats summarize(std::vector<double> samples);

}  // namespace dualpath
