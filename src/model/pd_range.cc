#include "model/pd_range.h"

#include <fmt/format.h>

#include <cmath>
#include <limits>

namespace dualpath::model {

Result<PdRange> bottleneck_free_range(const PdRangeInput& in) {
  // `shown` is the value as the user gave it (Gb/s for bandwidths).
  auto positive = [](double v, double shown, const char* key, const char* what) -> Status {
    if (v > 0 && std::isfinite(v)) return Status::ok();
    return Status::invalid_argument(
        fmt::format("{} = {} must be positive ({})", key, shown, what));
  };
  auto gbps = [](double bytes_per_s) { return bytes_per_s * 8 / 1e9; };
  DP_RETURN_IF_ERROR(positive(in.gpus_per_node, in.gpus_per_node, "hardware.gpus_per_node",
                              "GPUs per node, e.g. 8"));
  DP_RETURN_IF_ERROR(positive(in.snics_per_node, in.snics_per_node, "hardware.snics_per_node",
                              "storage NICs per node"));
  DP_RETURN_IF_ERROR(positive(in.snic_bytes_per_s, gbps(in.snic_bytes_per_s), "hardware.snic_gbps",
                              "one storage NIC in Gb/s, e.g. 400"));
  DP_RETURN_IF_ERROR(positive(in.cnic_bytes_per_s, gbps(in.cnic_bytes_per_s), "hardware.cnic_gbps",
                              "one compute NIC in Gb/s, e.g. 400"));
  DP_RETURN_IF_ERROR(positive(in.dram_bytes_per_s, gbps(in.dram_bytes_per_s), "hardware.dram_gbps",
                              "node DRAM in Gb/s, e.g. 4000 for 500 GB/s"));

  const double g = in.gpus_per_node, B = in.cnic_bytes_per_s, M = in.dram_bytes_per_s;
  const double sS = in.snics_per_node * in.snic_bytes_per_s;  // storage bandwidth per node
  const double k = g * B / sS;                                 // gB/(sS)
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();

  PdRange r;
  r.constraints = {
      {"(1) PE CNIC read", "2sS/g <= B", nan, false, 2 * sS / g <= B, false},
      {"(3) PE CNIC write", "P/D >= sS/(gB - sS)", k > 1 ? 1.0 / (k - 1) : inf, true, true, false},
      {"(5) DE CNIC read", "P/D <= gB/(sS) - 2", k - 2, false, true, false},
      {"(7) DE CNIC write", "P/D <= (gB/(sS) - 1)/2", (k - 1) / 2, false, true, false},
      {"(8) DE DRAM", "P/D <= (M/(sS) - 3)/2", (M / sS - 3) / 2, false, true, false},
      {"PE DRAM", "2sS <= M", nan, false, 2 * sS <= M, false},
  };
  r.pd_min = 0;
  r.pd_max = inf;
  bool hw_ok = true;
  for (const auto& c : r.constraints) {
    if (std::isnan(c.bound)) {
      hw_ok = hw_ok && c.satisfiable;
    } else if (c.lower) {
      r.pd_min = std::max(r.pd_min, c.bound);
    } else {
      r.pd_max = std::min(r.pd_max, c.bound);
    }
  }
  // Every constraint that reaches the range end binds (ties are common: g=8, s=1, M=10sS).
  for (auto& c : r.constraints) {
    if (std::isnan(c.bound)) {
      c.binds = !c.satisfiable;
      continue;
    }
    double end = c.lower ? r.pd_min : r.pd_max;
    c.binds = std::abs(c.bound - end) <= 1e-9 * std::max(1.0, std::abs(end));
  }
  r.feasible = hw_ok && r.pd_min <= r.pd_max && r.pd_max > 0;
  return r;
}

std::string as_fraction(double x, int max_den, double tol) {
  if (!std::isfinite(x)) return x > 0 ? "inf" : "nan";
  for (int q = 1; q <= max_den; ++q) {
    double p = std::round(x * q);
    if (std::abs(p / q - x) <= tol * std::max(1.0, std::abs(x))) {
      return q == 1 ? fmt::format("{}", static_cast<long long>(p))
                    : fmt::format("{}/{}", static_cast<long long>(p), q);
    }
  }
  return fmt::format("{:.4f}", x);
}

}  // namespace dualpath::model
