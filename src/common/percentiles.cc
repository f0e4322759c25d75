#include "common/percentiles.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace dualpath {

double percentile(std::vector<double> samples, double q) {
  if (samples.empty()) return 0.0;
  std::sort(samples.begin(), samples.end());
  q = std::clamp(q, 0.0, 1.0);
  double pos = q * static_cast<double>(samples.size() - 1);
  auto lo = static_cast<size_t>(std::floor(pos));
  auto hi = static_cast<size_t>(std::ceil(pos));
  double frac = pos - static_cast<double>(lo);
  return samples[lo] + (samples[hi] - samples[lo]) * frac;
}

double median(std::vector<double> samples) { return percentile(std::move(samples), 0.5); }

double mean(const std::vector<double>& samples) {
  if (samples.empty()) return 0.0;
  return std::accumulate(samples.begin(), samples.end(), 0.0) / static_cast<double>(samples.size());
}

}  // namespace dualpath
