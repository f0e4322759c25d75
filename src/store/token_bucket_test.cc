#include "store/token_bucket.h"

#include <gtest/gtest.h>

namespace dualpath::store {
namespace {

using std::chrono::milliseconds;

TEST(TokenBucket, UnlimitedByDefaultStartsEverythingNow) {
  ManualClock clock;
  TokenBucket b(0, 1 << 20, clock);
  EXPECT_TRUE(b.unlimited());
  EXPECT_EQ(b.reserve(int64_t{1} << 40), clock.now());
}

TEST(TokenBucket, SpacesTransfersAtTheConfiguredRate) {
  ManualClock clock;
  // 8 Gb/s = 1 GB/s: 1 MB takes 1 ms.
  TokenBucket b(8, 1'000'000, clock);
  EXPECT_EQ(b.reserve(1'000'000), Duration{0});  // the burst lets the first go at once
  EXPECT_EQ(b.reserve(1'000'000), milliseconds(1));
  EXPECT_EQ(b.reserve(1'000'000), milliseconds(2));
  // After idling, the burst is available again but not more.
  clock.advance(milliseconds(100));
  EXPECT_EQ(b.reserve(1'000'000), milliseconds(100));
  EXPECT_EQ(b.reserve(1'000'000), milliseconds(101));
}

TEST(TokenBucket, LongRunThroughputMatchesTheRate) {
  ManualClock clock;
  TokenBucket b(8, 64 * 1024, clock);  // 1 GB/s
  Duration last{0};
  for (int i = 0; i < 1000; ++i) last = b.reserve(1'000'000);  // 1 GB in total
  EXPECT_NEAR(to_seconds(last), 1.0, 0.01);
}

TEST(TokenBucket, TransferLargerThanTheBurstIsAllowedButDelaysTheNext) {
  ManualClock clock;
  TokenBucket b(8, 1000, clock);
  EXPECT_EQ(b.reserve(10'000'000), Duration{0});
  EXPECT_GE(b.reserve(1), milliseconds(9));
}

}  // namespace
}  // namespace dualpath::store
