#include "workload/shape.h"

#include <gtest/gtest.h>

#include <string>

#include "workload/dataset_stats.h"

namespace dualpath::workload {
namespace {

Turn turn(int64_t append, int64_t gen, int64_t keep = -1) {
  Turn t;
  t.append_tokens = append;
  t.gen_tokens = gen;
  t.keep_tokens = keep;
  return t;
}

TEST(ShapeTest, ContextGrowsByPromptAndGen) {
  Trajectory tr{"t", {turn(100, 10), turn(20, 5), turn(30, 7)}};
  const auto s = shape(tr);
  ASSERT_EQ(s.size(), 3u);
  EXPECT_EQ(s[0].context_tokens, 0);
  EXPECT_EQ(s[0].prompt_tokens, 100);
  EXPECT_EQ(s[1].context_tokens, 110);
  EXPECT_EQ(s[1].prompt_tokens, 130);
  EXPECT_EQ(s[2].context_tokens, 135);
  EXPECT_EQ(s[2].prompt_tokens, 165);
  EXPECT_EQ(s[2].gen_tokens, 7);
  EXPECT_EQ(final_length(tr), 172);
}

TEST(ShapeTest, KeepTokensCutsTheContext) {
  // Turn 2 keeps only 64 of the 110 tokens seen (a compaction); turn 3's keep exceeds what was
  // seen, so the whole context is reused.
  Trajectory tr{"t", {turn(100, 10), turn(20, 5, 64), turn(30, 7, 10000)}};
  const auto s = shape(tr);
  EXPECT_EQ(s[1].context_tokens, 64);
  EXPECT_EQ(s[1].prompt_tokens, 84);
  EXPECT_EQ(s[2].context_tokens, 89);
  EXPECT_EQ(s[2].prompt_tokens, 119);
}

TEST(DatasetStatsTest, DefinitionsOnAHandMadeDataset) {
  Dataset ds;
  ds.trajectories = {Trajectory{"a", {turn(100, 10), turn(20, 10)}},  // contexts 0, 110
                     Trajectory{"b", {turn(1000, 2)}}};               // context 0
  const DatasetStats st = stats(ds);
  EXPECT_EQ(st.trajectories, 2);
  EXPECT_EQ(st.turns_total, 3);
  EXPECT_DOUBLE_EQ(st.turns_mean, 1.5);
  EXPECT_DOUBLE_EQ(st.append_mean, (60.0 + 1000.0) / 2);  // per-trajectory means, then mean
  EXPECT_DOUBLE_EQ(st.gen_mean, (10.0 + 2.0) / 2);
  EXPECT_DOUBLE_EQ(st.total_mean, (140.0 + 1002.0) / 2);
  EXPECT_DOUBLE_EQ(st.context_mean, 110.0 / 3);  // turn-weighted
  EXPECT_DOUBLE_EQ(st.hit_rate, 1.0 - 1120.0 / (100 + 130 + 1000));
  EXPECT_EQ(st.max_prompt_tokens, 1000);
  EXPECT_EQ(st.max_total_tokens, 1002);
}

TEST(DatasetStatsTest, TurnCountPercentilesAreNearestRank) {
  Dataset ds;
  for (int n = 10; n >= 1; --n) {  // trajectories of 10, 9, ..., 1 turns, not in order
    Trajectory tr;
    tr.id = std::to_string(n);
    tr.turns.assign(static_cast<size_t>(n), turn(5, 1));
    ds.trajectories.push_back(tr);
  }
  ds.trajectories.push_back(Trajectory{"empty", {}});  // skipped, as by every other statistic
  const DatasetStats st = stats(ds);
  EXPECT_EQ(st.turns_p50, 5);
  EXPECT_EQ(st.turns_p90, 9);
  EXPECT_EQ(st.max_turns, 10);
}

}  // namespace
}  // namespace dualpath::workload
