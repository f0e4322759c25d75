#include "engine/cancel_registry.h"

#include <gtest/gtest.h>

namespace dualpath::engine {
namespace {

TEST(CancelRegistry, CancelsRunningRequestsAndRemembersEarlyCancels) {
  CancelRegistry c(std::chrono::minutes(1));
  c.begin(1);
  EXPECT_FALSE(c.cancelled(1));
  c.cancel(1);
  EXPECT_TRUE(c.cancelled(1));
  c.end(1);
  EXPECT_FALSE(c.cancelled(1));
  // A cancel that crosses its request on the wire stops it as soon as it begins.
  c.cancel(2);
  c.begin(2);
  EXPECT_TRUE(c.cancelled(2));
  c.end(2);
  c.begin(3);
  c.begin(4);
  EXPECT_EQ(c.running(), 2u);
  c.cancel_all();
  EXPECT_TRUE(c.cancelled(3));
  EXPECT_TRUE(c.cancelled(4));
  c.begin(5);
  EXPECT_FALSE(c.cancelled(5));  // cancel_all covers what ran then, not what starts later
}

TEST(CancelRegistry, StopEndsARunningRequestWithoutCancellingIt) {
  CancelRegistry c;
  c.stop(1);  // not running: nothing to stop, and nothing remembered
  c.begin(1);
  EXPECT_FALSE(c.stop_requested(1));
  c.stop(1);
  EXPECT_TRUE(c.stop_requested(1));
  EXPECT_FALSE(c.cancelled(1));
  c.end(1);
  EXPECT_FALSE(c.stop_requested(1));
}

}  // namespace
}  // namespace dualpath::engine
