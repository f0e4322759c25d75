#include "workload/table2.h"

#include <gtest/gtest.h>

#include <cmath>

#include "workload/shape.h"

namespace dualpath::workload {
namespace {

class Table2Test : public ::testing::TestWithParam<const char*> {};

// Issue #2 acceptance: 500 trajectories, every Table-2 column within 5 %, every trajectory within
// MaxLen; checked on several seeds because the calibration runs on each seed's own draws.
TEST_P(Table2Test, MatchesTable2WithinFivePercentAndMaxLen) {
  const Table2Target* t = find_table2_target(GetParam());
  ASSERT_NE(t, nullptr);
  for (uint64_t seed : {1u, 2u, 12345u}) {
    auto ds = generate_table2(GetParam(), seed);
    ASSERT_TRUE(ds.is_ok()) << ds.status().to_string();
    ASSERT_EQ(ds->trajectories.size(), 500u);
    EXPECT_EQ(ds->max_len_tokens, t->max_len_tokens);
    const DatasetStats st = stats(*ds);
    EXPECT_NEAR(st.turns_mean / t->turns, 1.0, 0.05) << "seed " << seed;
    EXPECT_NEAR(st.append_mean / t->append, 1.0, 0.05) << "seed " << seed;
    EXPECT_NEAR(st.gen_mean / t->gen, 1.0, 0.05) << "seed " << seed;
    EXPECT_NEAR(st.total_mean / t->total, 1.0, 0.05) << "seed " << seed;
    EXPECT_NEAR(st.context_mean / t->context, 1.0, 0.05) << "seed " << seed;
    EXPECT_LE(st.max_total_tokens, t->max_len_tokens);
    for (const Trajectory& tr : ds->trajectories) {
      ASSERT_FALSE(tr.turns.empty()) << tr.id;
      EXPECT_LE(final_length(tr), t->max_len_tokens) << tr.id;
      for (const Turn& turn : tr.turns) {
        EXPECT_GE(turn.gen_tokens, 1);
        EXPECT_GE(turn.append_tokens, 1);
        EXPECT_EQ(turn.keep_tokens, -1);
        EXPECT_EQ(turn.think_time_s, 0.0);
      }
    }
    // The paper's production trace has a hit rate of ~98.7 %; the synthetic sets are in that
    // regime.
    EXPECT_GT(st.hit_rate, 0.95);
  }
}

INSTANTIATE_TEST_SUITE_P(AllDatasets, Table2Test, ::testing::Values("32k", "48k", "64k"));

bool same(const Dataset& a, const Dataset& b) {
  if (a.trajectories.size() != b.trajectories.size()) return false;
  for (size_t i = 0; i < a.trajectories.size(); ++i) {
    const auto& x = a.trajectories[i].turns;
    const auto& y = b.trajectories[i].turns;
    if (x.size() != y.size() || a.trajectories[i].id != b.trajectories[i].id) return false;
    for (size_t k = 0; k < x.size(); ++k) {
      if (x[k].append_tokens != y[k].append_tokens || x[k].gen_tokens != y[k].gen_tokens) {
        return false;
      }
    }
  }
  return true;
}

TEST(Table2DeterminismTest, SameSeedSameDatasetDifferentSeedDifferent) {
  auto a = generate_table2("48k", 7);
  auto b = generate_table2("48k", 7);
  auto c = generate_table2("48k", 8);
  ASSERT_TRUE(a.is_ok() && b.is_ok() && c.is_ok());
  EXPECT_TRUE(same(*a, *b));
  EXPECT_FALSE(same(*a, *c));
}

// Pins the output of one seed so a change to the PRNG, the samplers or the calibration (which
// would silently change every experiment) is noticed. Update the numbers deliberately.
TEST(Table2DeterminismTest, OutputIsPinned) {
  auto ds = generate_table2("64k", 1);
  ASSERT_TRUE(ds.is_ok());
  int64_t turns = 0, tokens = 0;
  for (const auto& tr : ds->trajectories) {
    turns += static_cast<int64_t>(tr.turns.size());
    tokens += final_length(tr);
  }
  EXPECT_EQ(turns, 78503);
  EXPECT_EQ(tokens, 27974527);
}

TEST(Table2Test, NamesAreCaseInsensitiveAndUnknownNamesListTheValidOnes) {
  EXPECT_NE(find_table2_target("64K"), nullptr);
  auto bad = generate_table2("128k", 1);
  ASSERT_FALSE(bad.is_ok());
  EXPECT_TRUE(bad.status().is_invalid_argument());
  EXPECT_NE(bad.status().message().find("32k, 48k, 64k"), std::string::npos);
  EXPECT_FALSE(generate_table2("32k", 1, 0).is_ok());
}

TEST(Table2Test, SmallerDatasetsStillCalibrate) {
  auto ds = generate_table2("32k", 3, 100);
  ASSERT_TRUE(ds.is_ok()) << ds.status().to_string();
  EXPECT_EQ(ds->trajectories.size(), 100u);
}

}  // namespace
}  // namespace dualpath::workload
