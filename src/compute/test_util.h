#pragma once
// Helpers shared by the compute/ tests.

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "compute/cpu_model.h"
#include "compute/init_rng.h"

namespace dualpath::compute::testing {

// A fresh directory under $TMPDIR, removed with the object.
class ScratchDir {
 public:
  ScratchDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "dp_compute_test.XXXXXX").string();
    if (mkdtemp(tmpl.data()) == nullptr) ADD_FAILURE() << "mkdtemp failed for " << tmpl;
    path_ = tmpl;
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

inline std::vector<int32_t> random_tokens(int64_t n, int32_t vocab, uint64_t seed) {
  SplitMix64 rng(seed);
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (auto& x : t) x = static_cast<int32_t>(rng.next() % static_cast<uint64_t>(vocab));
  return t;
}

inline float max_abs_diff(std::span<const float> a, std::span<const float> b) {
  EXPECT_EQ(a.size(), b.size());
  float m = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) m = std::max(m, std::abs(a[i] - b[i]));
  return m;
}

inline std::shared_ptr<const CpuWeights> tiny_weights(uint64_t seed = 1) {
  auto config = cpu_model_preset("tiny");
  EXPECT_TRUE(config.is_ok());
  auto w = random_weights(*config, seed);
  EXPECT_TRUE(w.is_ok()) << w.status().to_string();
  return *w;
}

}  // namespace dualpath::compute::testing
