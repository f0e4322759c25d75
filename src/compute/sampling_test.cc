// Sampling (compute/sampling.h): greedy at temperature 0; otherwise a draw that depends only on
// (seed, position), follows the softmax, and respects top_k and top_p.
#include "compute/sampling.h"

#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <vector>

#include "compute/cpu_model.h"

namespace dualpath::compute {
namespace {

TEST(Sampling, TemperatureZeroIsGreedy) {
  const std::vector<float> logits = {0.1f, 3.0f, 2.9f, -1.0f};
  SamplingParams p;
  for (int64_t pos = 0; pos < 50; ++pos) EXPECT_EQ(sample_token(logits, p, pos), 1);
}

TEST(Sampling, TheSameSeedAndPositionGiveTheSameTokenAndOthersVary) {
  std::vector<float> logits(64);
  for (size_t i = 0; i < logits.size(); ++i) logits[i] = static_cast<float>(i % 7) * 0.3f;
  SamplingParams p{1.0, 1.0, 0, 42};
  std::vector<int32_t> a, b, c;
  for (int64_t pos = 0; pos < 200; ++pos) {
    a.push_back(sample_token(logits, p, pos));
    b.push_back(sample_token(logits, p, pos));
  }
  p.seed = 43;
  for (int64_t pos = 0; pos < 200; ++pos) c.push_back(sample_token(logits, p, pos));
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  EXPECT_GT(std::set<int32_t>(a.begin(), a.end()).size(), 5u) << "a sample should vary";
}

TEST(Sampling, FrequenciesFollowTheSoftmax) {
  // Two tokens with logits differing by ln 3: at T = 1 they are drawn 3:1.
  const std::vector<float> logits = {std::log(3.0f), 0.0f};
  SamplingParams p{1.0, 1.0, 0, 7};
  int first = 0;
  const int n = 20000;
  for (int64_t pos = 0; pos < n; ++pos) first += sample_token(logits, p, pos) == 0 ? 1 : 0;
  EXPECT_NEAR(static_cast<double>(first) / n, 0.75, 0.02);
}

TEST(Sampling, TopKAndTopPKeepOnlyTheLikeliestTokens) {
  const std::vector<float> logits = {5.0f, 4.9f, 4.8f, 0.0f, -1.0f, -2.0f};
  SamplingParams k{2.0, 1.0, 2, 1};
  SamplingParams nucleus{2.0, 0.5, 0, 1};
  for (int64_t pos = 0; pos < 2000; ++pos) {
    EXPECT_LT(sample_token(logits, k, pos), 2);
    EXPECT_LT(sample_token(logits, nucleus, pos), 3);
  }
}

TEST(Sampling, ABackendWithoutLogitsKeepsItsToken) {
  NextToken modeled;
  modeled.token = 1234;
  EXPECT_EQ(choose_token(modeled, SamplingParams{1.0, 1.0, 0, 5}, 10), 1234);
}

}  // namespace
}  // namespace dualpath::compute
