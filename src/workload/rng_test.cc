#include "workload/rng.h"

#include <gtest/gtest.h>

#include <cmath>

namespace dualpath::workload {
namespace {

TEST(RngTest, SameSeedSameStreamDifferentSeedDifferentStream) {
  Rng a(7), b(7), c(8);
  for (int i = 0; i < 100; ++i) {
    const uint64_t x = a.next_u64();
    EXPECT_EQ(x, b.next_u64());
    EXPECT_NE(x, c.next_u64());
  }
}

// Pins the stream, so a change to the generator (which would change every dataset) is noticed.
TEST(RngTest, StreamIsPinned) {
  Rng r(1);
  const uint64_t first = r.next_u64();
  Rng again(1);
  EXPECT_EQ(first, again.next_u64());
  uint64_t st = 0;
  EXPECT_EQ(splitmix64(st), 0xE220A8397B1DCDAFULL);  // the published first splitmix64(0) output
}

TEST(RngTest, NormalQuantileMatchesKnownValues) {
  EXPECT_NEAR(normal_quantile(0.5), 0.0, 1e-9);
  EXPECT_NEAR(normal_quantile(0.975), 1.959963985, 1e-6);
  EXPECT_NEAR(normal_quantile(0.001), -3.090232306, 1e-6);
}

TEST(RngTest, MomentsAreRight) {
  Rng r(42);
  constexpr int kN = 200000;
  double sum = 0, sum2 = 0, esum = 0;
  for (int i = 0; i < kN; ++i) {
    const double z = r.normal();
    sum += z;
    sum2 += z * z;
    esum += r.exponential(2.0);
    const double u = r.uniform();
    ASSERT_GT(u, 0.0);
    ASSERT_LT(u, 1.0);
    ASSERT_LT(r.below(10), 10u);
  }
  EXPECT_NEAR(sum / kN, 0.0, 0.01);
  EXPECT_NEAR(sum2 / kN, 1.0, 0.02);
  EXPECT_NEAR(esum / kN, 2.0, 0.03);
}

}  // namespace
}  // namespace dualpath::workload
