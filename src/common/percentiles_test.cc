#include "common/percentiles.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace dualpath {
namespace {

TEST(Percentiles, InterpolatesBetweenRanks) {
  std::vector<double> v = {4, 1, 3, 2};
  EXPECT_DOUBLE_EQ(median(v), 2.5);
  EXPECT_DOUBLE_EQ(percentile(v, 0.0), 1.0);
  EXPECT_DOUBLE_EQ(percentile(v, 1.0), 4.0);
  EXPECT_DOUBLE_EQ(mean(v), 2.5);
}

TEST(Percentiles, EmptySampleIsZero) { EXPECT_DOUBLE_EQ(percentile({}, 0.99), 0.0); }

TEST(LatencyStats, SummarizesMeanAndPercentilesOfTheSamples) {
  std::vector<double> v;
  for (int i = 100; i >= 1; --i) v.push_back(i);  // unsorted on purpose
  LatencyStats s = summarize(v);
  EXPECT_EQ(s.count, 100);
  EXPECT_DOUBLE_EQ(s.mean, 50.5);
  EXPECT_DOUBLE_EQ(s.p50, 50.5);
  EXPECT_NEAR(s.p90, 90.1, 1e-9);
  EXPECT_NEAR(s.p99, 99.01, 1e-9);
  EXPECT_DOUBLE_EQ(s.get("p99"), s.p99);
  EXPECT_DOUBLE_EQ(s.get("mean"), s.mean);
  EXPECT_EQ(summarize({}).count, 0);
}

TEST(LatencyStats, SelectionGivesTheSortedSamplesPercentilesOnAnySize) {
  // summarize() places only the ranks it needs; each figure must equal the sorted sample's.
  uint64_t x = 12345;
  for (size_t n : {1u, 2u, 3u, 10u, 101u, 1000u, 4097u}) {
    std::vector<double> v;
    for (size_t i = 0; i < n; ++i) {
      x = x * 6364136223846793005ull + 1442695040888963407ull;
      v.push_back(static_cast<double>((x >> 33) % 50));  // many ties
    }
    const LatencyStats s = summarize(v);
    EXPECT_DOUBLE_EQ(s.p50, percentile(v, 0.5)) << n;
    EXPECT_DOUBLE_EQ(s.p90, percentile(v, 0.9)) << n;
    EXPECT_DOUBLE_EQ(s.p99, percentile(v, 0.99)) << n;
    EXPECT_DOUBLE_EQ(s.max, *std::max_element(v.begin(), v.end())) << n;
  }
}

}  // namespace
}  // namespace dualpath
