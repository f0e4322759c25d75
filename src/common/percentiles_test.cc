#include "common/percentiles.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace dualpath
