#pragma once
// SplitMix64: the weight-initialisation PRNG of the CPU reference model. Our own, because the
// std::*_distribution outputs differ between standard-library versions and the same seed must
// give the same weights (and so the same greedy tokens) everywhere.

#include <cstdint>

namespace dualpath::compute {

// Thread-compatible; a value type.
class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}

  uint64_t next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  }

  // Uniform in [-1, 1): the top 24 bits, so every value is exact in a float.
  float uniform_pm1() {
    const auto bits = static_cast<int32_t>(next() >> 40);  // [0, 2^24)
    return static_cast<float>(bits - (1 << 23)) * (1.0f / static_cast<float>(1 << 23));
  }

 private:
  uint64_t state_;
};

// A stateless 64-bit mix (the SplitMix64 finaliser) for hashing small tuples.
inline uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

}  // namespace dualpath::compute
