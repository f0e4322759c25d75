#include "workload/scale.h"

#include <gtest/gtest.h>

#include "workload/shape.h"
#include "workload/table2.h"

namespace dualpath::workload {
namespace {

Dataset hand_made() {
  Dataset ds;
  ds.name = "hand";
  ds.max_len_tokens = 1000;
  ds.trajectories.push_back(
      Trajectory{"a", {Turn{100, 10, 0, -1}, Turn{100, 10, 0, -1}, Turn{100, 10, 0, -1}}});
  return ds;
}

TEST(ScaleTest, MultipliesAppendAndGen) {
  auto s = scale(hand_made(), 1.5, 0.04);
  ASSERT_TRUE(s.is_ok());
  const auto& turns = s->trajectories[0].turns;
  ASSERT_EQ(turns.size(), 3u);
  EXPECT_EQ(turns[0].append_tokens, 150);
  EXPECT_EQ(turns[0].gen_tokens, 1);  // 0.4 rounds to 0, and a turn generates at least 1
}

TEST(ScaleTest, TruncatesAtMaxLen) {
  // x3: each turn is 300 + 30; the third would end at 990 + ... = 990 <= 1000; x4: 440 per turn,
  // the third would end at 1320 > 1000, so it is dropped.
  auto s3 = scale(hand_made(), 3, 3);
  ASSERT_TRUE(s3.is_ok());
  EXPECT_EQ(s3->trajectories[0].turns.size(), 3u);
  auto s4 = scale(hand_made(), 4, 4);
  ASSERT_TRUE(s4.is_ok());
  EXPECT_EQ(s4->trajectories[0].turns.size(), 2u);
  EXPECT_EQ(final_length(s4->trajectories[0]), 880);
  // The first turn alone too long: kept, cut to MaxLen.
  auto s20 = scale(hand_made(), 20, 1);
  ASSERT_TRUE(s20.is_ok());
  ASSERT_EQ(s20->trajectories[0].turns.size(), 1u);
  EXPECT_EQ(final_length(s20->trajectories[0]), 1000);
}

TEST(ScaleTest, Table2DatasetStaysWithinMaxLenAndGrowsAppend) {
  auto ds = generate_table2("64k", 1);
  ASSERT_TRUE(ds.is_ok());
  const DatasetStats base = stats(*ds);
  for (double f : {1.5, 2.0, 3.0}) {
    auto s = scale(*ds, f, 1.0);
    ASSERT_TRUE(s.is_ok());
    const DatasetStats st = stats(*s);
    EXPECT_LE(st.max_total_tokens, ds->max_len_tokens);
    EXPECT_GT(st.append_per_turn_mean, base.append_per_turn_mean * (f - 0.1));
    EXPECT_LT(st.turns_mean, base.turns_mean);  // truncation drops turns
  }
  auto same = scale(*ds, 1.0, 1.0);
  ASSERT_TRUE(same.is_ok());
  EXPECT_EQ(stats(*same).turns_total, base.turns_total);
}

TEST(ScaleTest, BadFactorIsAnError) {
  EXPECT_TRUE(scale(hand_made(), 0, 1).status().is_invalid_argument());
  EXPECT_TRUE(scale(hand_made(), 1, -2).status().is_invalid_argument());
}

}  // namespace
}  // namespace dualpath::workload
