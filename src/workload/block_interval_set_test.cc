#include "workload/block_interval_set.h"

#include <gtest/gtest.h>

namespace dualpath::workload {
namespace {

TEST(BlockIntervalSetTest, InsertMergesAndCoveredPrefixStopsAtTheFirstGap) {
  BlockIntervalSet s;
  s.insert(10, 5);  // 10..14
  s.insert(20, 5);  // 20..24
  EXPECT_EQ(s.run_count(), 2);
  EXPECT_EQ(s.covered_prefix(10, 5), 5);
  EXPECT_EQ(s.covered_prefix(12, 10), 3);
  EXPECT_EQ(s.covered_prefix(15, 3), 0);
  EXPECT_EQ(s.covered_prefix(5, 10), 0);
  s.insert(15, 5);  // fills the gap: one run 10..24
  EXPECT_EQ(s.run_count(), 1);
  EXPECT_EQ(s.covered_prefix(10, 100), 15);
  s.insert(0, 50);  // swallows it
  EXPECT_EQ(s.run_count(), 1);
  EXPECT_EQ(s.covered_prefix(0, 50), 50);
  s.insert(3, 0);
  EXPECT_EQ(s.run_count(), 1);
}

}  // namespace
}  // namespace dualpath::workload
