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

}  // namespace
}  // namespace dualpath
