#include "common/token_bucket.h"

#include <gtest/gtest.h>

namespace dualpath {
namespace {

using std::chrono::milliseconds;

TEST(TokenBucket, UnlimitedStartsEverythingNow) {
  TokenBucket b(0, 1 << 20);
  EXPECT_TRUE(b.unlimited());
  EXPECT_EQ(b.reserve(int64_t{1} << 40, milliseconds(5)), milliseconds(5));
  EXPECT_TRUE(b.ready(Duration{0}));
}

TEST(TokenBucket, ReserveSpacesTransfersAtTheRate) {
  TokenBucket b(1e9, 1'000'000);  // 1 GB/s: 1 MB takes 1 ms
  EXPECT_EQ(b.reserve(1'000'000, Duration{0}), Duration{0});  // the burst lets the first go
  EXPECT_EQ(b.reserve(1'000'000, Duration{0}), milliseconds(1));
  EXPECT_EQ(b.reserve(1'000'000, Duration{0}), milliseconds(2));
  // After idling, the burst is available again but not more.
  EXPECT_EQ(b.reserve(1'000'000, milliseconds(100)), milliseconds(100));
  EXPECT_EQ(b.reserve(1'000'000, milliseconds(100)), milliseconds(101));
}

TEST(TokenBucket, LongRunThroughputMatchesTheRate) {
  TokenBucket b(1e9, 64 * 1024);
  Duration last{0};
  for (int i = 0; i < 1000; ++i) last = b.reserve(1'000'000, Duration{0});  // 1 GB in total
  EXPECT_NEAR(to_seconds(last), 1.0, 0.01);
}

TEST(TokenBucket, TransferLargerThanTheBurstGoesButDelaysTheNext) {
  TokenBucket b(1e9, 1000);
  EXPECT_EQ(b.reserve(10'000'000, Duration{0}), Duration{0});
  EXPECT_GE(b.reserve(1, Duration{0}), milliseconds(9));
}

TEST(TokenBucket, OverdrawnSenderWaitsForTheDebtToBePaid) {
  TokenBucket b(1e9, 1'000'000);  // 1 GB/s, 1 MB burst
  EXPECT_TRUE(b.ready(Duration(0)));
  b.consume(4'000'000, Duration(0));  // overdraw by 3 MB
  EXPECT_FALSE(b.ready(milliseconds(2)));
  Duration at = b.ready_at(milliseconds(2));
  EXPECT_GT(at, milliseconds(2));
  EXPECT_LE(at, milliseconds(3) + Duration(10));
  EXPECT_TRUE(b.ready(at));
}

}  // namespace
}  // namespace dualpath
