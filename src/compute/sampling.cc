#include "compute/sampling.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "compute/cpu_model.h"
#include "compute/init_rng.h"

namespace dualpath::compute {

int32_t sample_token(std::span<const float> logits, const SamplingParams& p, int64_t position) {
  if (logits.empty()) return -1;
  if (p.greedy()) return greedy_token(logits);
  std::vector<int32_t> order(logits.size());
  std::iota(order.begin(), order.end(), 0);
  // Largest first; the lower index wins a tie, so the order is the same everywhere.
  std::stable_sort(order.begin(), order.end(),
                   [&](int32_t a, int32_t b) { return logits[a] > logits[b]; });
  size_t keep = order.size();
  if (p.top_k > 0) keep = std::min(keep, static_cast<size_t>(p.top_k));
  const double top = logits[order[0]];
  std::vector<double> w(keep);
  double sum = 0;
  for (size_t i = 0; i < keep; ++i) {
    w[i] = std::exp((logits[order[i]] - top) / p.temperature);
    sum += w[i];
  }
  if (p.top_p < 1.0) {
    double acc = 0;
    size_t n = 0;
    while (n < keep) {
      acc += w[n] / sum;
      ++n;
      if (acc >= p.top_p) break;
    }
    keep = std::max<size_t>(n, 1);
    sum = std::accumulate(w.begin(), w.begin() + static_cast<std::ptrdiff_t>(keep), 0.0);
  }
  // A uniform in [0, 1) from (seed, position) alone: the top 53 bits.
  const uint64_t r = mix64(mix64(p.seed ^ 0x5DEECE66DULL) ^ static_cast<uint64_t>(position));
  const double u = static_cast<double>(r >> 11) * (1.0 / 9007199254740992.0) * sum;
  double acc = 0;
  for (size_t i = 0; i < keep; ++i) {
    acc += w[i];
    if (u < acc) return order[i];
  }
  return order[keep - 1];
}

}  // namespace dualpath::compute
