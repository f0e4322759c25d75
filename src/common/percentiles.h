#pragma once
// Exact percentiles over a sample vector (copies and sorts; fine for the sizes we report).

#include <vector>

namespace dualpath {

// Linear interpolation between closest ranks; q in [0, 1]. Returns 0 for an empty sample.
double percentile(std::vector<double> samples, double q);
double median(std::vector<double> samples);
double mean(const std::vector<double>& samples);

}  // namespace dualpath
