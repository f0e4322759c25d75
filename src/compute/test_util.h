#pragma once
// Helpers shared by the compute/ tests (and the serve/ ones that run a CpuModel in-process).

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

// The greedy tokens after `prompt`: a prefill, then one decode step per token, `n` tokens or
// fewer when `stop` comes (it is not included).
inline std::vector<int32_t> greedy_generate(const CpuModel& model, std::span<const int32_t> prompt,
                                            int64_t n, int32_t stop = -1) {
  std::vector<std::span<const float>> none(static_cast<size_t>(model.config().layers));
  auto first = model.prefill(none, prompt, 0);
  EXPECT_TRUE(first.is_ok()) << first.status().to_string();
  if (!first.is_ok()) return {};
  std::vector<std::vector<float>> kv = first->new_kv;
  std::vector<int32_t> out;
  int32_t t = greedy_token(first->logits);
  while (static_cast<int64_t>(out.size()) < n && t != stop) {
    out.push_back(t);
    if (static_cast<int64_t>(out.size()) == n) break;
    std::vector<std::span<const float>> views(kv.begin(), kv.end());
    auto step = model.decode(views, t);
    EXPECT_TRUE(step.is_ok()) << step.status().to_string();
    if (!step.is_ok()) break;
    for (size_t l = 0; l < kv.size(); ++l) {
      kv[l].insert(kv[l].end(), step->new_kv[l].begin(), step->new_kv[l].end());
    }
    t = greedy_token(step->logits);
  }
  return out;
}

}  // namespace dualpath::compute::testing
