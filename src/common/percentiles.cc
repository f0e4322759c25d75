#include "common/percentiles.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace dualpath {

namespace {

// Linear interpolation between closest ranks of an already sorted, non-empty sample.
double sorted_percentile(const std::vector<double>& samples, double q) {
  q = std::clamp(q, 0.0, 1.0);
  double pos = q * static_cast<double>(samples.size() - 1);
  auto lo = static_cast<size_t>(std::floor(pos));
  auto hi = static_cast<size_t>(std::ceil(pos));
  double frac = pos - static_cast<double>(lo);
  return samples[lo] + (samples[hi] - samples[lo]) * frac;
}

}  // namespace

double percentile(std::vector<double> samples, double q) {
  if (samples.empty()) return 0.0;
  std::sort(samples.begin(), samples.end());
  return sorted_percentile(samples, q);
}

double median(std::vector<double> samples) { return percentile(std::move(samples), 0.5); }

double mean(const std::vector<double>& samples) {
  if (samples.empty()) return 0.0;
  return std::accumulate(samples.begin(), samples.end(), 0.0) / static_cast<double>(samples.size());
}

double LatencyStats::get(std::string_view statistic) const {
  if (statistic == "p50") return p50;
  if (statistic == "p90") return p90;
  if (statistic == "p99") return p99;
  return mean;
}

LatencyStats summarize(std::vector<double> samples) {
  LatencyStats s;
  if (samples.empty()) return s;
  s.count = static_cast<int64_t>(samples.size());
  s.mean = mean(samples);
  // Only the ranks the percentiles interpolate between need their sorted values: place each with
  // nth_element on what lies above the previous one (linear time; a full sort of a simulator's
  // millions of samples took seconds). The values are the sorted sample's, so the result is the
  // same as sorting.
  const size_t n = samples.size();
  std::vector<size_t> ranks;
  for (double q : {0.5, 0.9, 0.99}) {
    const double pos = q * static_cast<double>(n - 1);
    ranks.push_back(static_cast<size_t>(std::floor(pos)));
    ranks.push_back(static_cast<size_t>(std::ceil(pos)));
  }
  ranks.push_back(n - 1);
  std::sort(ranks.begin(), ranks.end());
  auto from = samples.begin();
  for (size_t r : ranks) {
    const auto at = samples.begin() + static_cast<std::ptrdiff_t>(r);
    if (at < from) continue;  // placed already (a repeated rank)
    std::nth_element(from, at, samples.end());
    from = at + 1;
  }
  s.p50 = sorted_percentile(samples, 0.5);
  s.p90 = sorted_percentile(samples, 0.9);
  s.p99 = sorted_percentile(samples, 0.99);
  s.max = samples.back();
  return s;
}

}  // namespace dualpath
