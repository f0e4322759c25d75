#include "transport/class_arbiter.h"

#include <gtest/gtest.h>


namespace dualpath::transport {
namespace {

constexpr uint64_t kPiece = 65536;

// Serves `rounds` pieces with the given classes backlogged; returns bytes per class.
std::array<uint64_t, 2> serve(ClassArbiter& arb, std::array<bool, 2> backlogged, int rounds) {
  std::array<uint64_t, 2> bytes{};
  for (int i = 0; i < rounds; ++i) {
    auto c = arb.pick(backlogged);
    if (!c) break;
    arb.charge(*c, kPiece);
    bytes[static_cast<int>(*c)] += kPiece;
  }
  return bytes;
}

TEST(ClassArbiter, GivesTheModelClassNinetyNinePercentWhenBothAreBusy) {
  ClassArbiter arb(99, 1);
  auto bytes = serve(arb, {true, true}, 10000);
  double model_share = static_cast<double>(bytes[0]) / static_cast<double>(bytes[0] + bytes[1]);
  EXPECT_NEAR(model_share, 0.99, 0.001);
}

TEST(ClassArbiter, NeverStarvesTheKvClass) {
  ClassArbiter arb(99, 1);
  auto bytes = serve(arb, {true, true}, 200);
  EXPECT_GE(bytes[1], 2 * kPiece);
}

TEST(ClassArbiter, GivesAllCapacityToTheOnlyBusyClass) {
  ClassArbiter arb(99, 1);
  auto bytes = serve(arb, {false, true}, 100);
  EXPECT_EQ(bytes[1], 100 * kPiece);
  EXPECT_EQ(bytes[0], 0u);
}

TEST(ClassArbiter, AClassWakingFromIdleGetsNoCreditForTheIdleTime) {
  ClassArbiter arb(1, 1);           // equal weights make credit easy to see
  serve(arb, {false, true}, 1000);  // KV alone for a long time
  arb.activate(TrafficClass::kModel);
  auto bytes = serve(arb, {true, true}, 100);
  // Without the catch-up the model class would take all 100 pieces.
  EXPECT_NEAR(static_cast<double>(bytes[0]), 50.0 * kPiece, 2.0 * kPiece);
}

// The token bucket of the CNIC limiter is common/token_bucket.h, tested there.

}  // namespace
}  // namespace dualpath::transport
