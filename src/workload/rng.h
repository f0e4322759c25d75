#pragma once
// Rng: the workload module's own PRNG (xoshiro256**, seeded through splitmix64) with explicit
// inverse-CDF samplers. std::*_distribution is not used on purpose: its output differs between
// standard-library versions, and a dataset must be a pure function of (name, seed) everywhere.
// Thread-compatible (one instance per thread).

#include <cstdint>
#include <string_view>

namespace dualpath::workload {

// One step of splitmix64: a good 64-bit mixer, used to seed and to derive sub-streams.
uint64_t splitmix64(uint64_t& state);

// FNV-1a of a string, to mix a dataset name into a seed.
uint64_t hash_name(std::string_view name);

class Rng {
 public:
  explicit Rng(uint64_t seed);

  uint64_t next_u64();
  // Uniform in the open interval (0, 1): never 0 or 1, so log() and the normal quantile are finite.
  double uniform();
  // Standard normal by the inverse CDF (Acklam's rational approximation, |rel. error| < 1.2e-9).
  double normal();
  // Exponential with the given mean (inverse CDF).
  double exponential(double mean);
  // Uniform integer in [0, n), n > 0 (bias ~ n / 2^53, negligible here).
  uint64_t below(uint64_t n);

 private:
  uint64_t s_[4];
};

// The standard normal quantile function used by Rng::normal(); exposed for tests.
double normal_quantile(double p);

}  // namespace dualpath::workload
