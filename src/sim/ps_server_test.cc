#include "sim/ps_server.h"

#include <gtest/gtest.h>

#include <cmath>

namespace dualpath::sim {
namespace {

TEST(PsServer, TwoEqualJobsShareTheRateAndFinishTogether) {
  PsServer s;
  s.advance(0);
  s.add(1, 10.0);
  s.add(2, 10.0);
  s.set_rate(10.0 / 2);  // a 10 units/s link shared by two
  EXPECT_DOUBLE_EQ(s.next_departure(), 2.0);
}

TEST(PsServer, ShortJobLeavesFirstAndTheOtherSpeedsUp) {
  PsServer s;
  s.advance(0);
  s.add(1, 2.0);
  s.add(2, 10.0);
  s.set_rate(5.0);  // 10 units/s over two jobs
  EXPECT_DOUBLE_EQ(s.next_departure(), 0.4);
  s.advance(0.4);
  EXPECT_EQ(s.pop(), 1u);
  s.set_rate(10.0);  // alone now
  // Job 2 got 2 units by t=0.4, needs 8 more at 10/s.
  EXPECT_NEAR(s.next_departure(), 1.2, 1e-12);
}

TEST(PsServer, BoundedQueueDepthAdmitsWaitersInOrder) {
  PsServer s(1);
  s.advance(0);
  s.add(7, 1.0);
  s.add(8, 1.0);
  s.set_rate(1.0);
  EXPECT_EQ(s.active(), 1u);
  EXPECT_EQ(s.waiting(), 1u);
  s.advance(1.0);
  EXPECT_EQ(s.pop(), 7u);
  EXPECT_EQ(s.active(), 1u);
  EXPECT_NEAR(s.next_departure(), 2.0, 1e-12);
}

TEST(PsServer, StalledServerNeverDeparts) {
  PsServer s;
  s.advance(0);
  s.add(1, 1.0);
  s.set_rate(0.0);
  EXPECT_TRUE(std::isinf(s.next_departure()));
}

}  // namespace
}  // namespace dualpath::sim
