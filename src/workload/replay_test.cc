#include "workload/replay.h"

#include <gtest/gtest.h>

#include <set>

#include "workload/shape.h"

namespace dualpath::workload {
namespace {

Dataset tiny_dataset() {
  Dataset ds;
  ds.name = "tiny";
  for (int i = 0; i < 4; ++i) {
    Trajectory tr;
    tr.id = "t" + std::to_string(i);
    for (int k = 0; k <= i; ++k) {
      Turn t;
      t.append_tokens = 100 * (i + 1);
      t.gen_tokens = 10;
      t.think_time_s = 2.5;
      tr.turns.push_back(t);
    }
    ds.trajectories.push_back(tr);
  }
  return ds;
}

TEST(ReplayTest, SyntheticFirstRoundIsPrepended) {
  const Dataset ds = tiny_dataset();
  Agent a;
  a.trajectory = 1;  // two turns of append 200, gen 10
  a.synthetic_tokens = 64;
  ASSERT_EQ(agent_turn_count(ds, a), 3);
  const auto s = agent_shape(ds, a);
  ASSERT_EQ(s.size(), 3u);
  EXPECT_EQ(s[0].context_tokens, 0);
  EXPECT_EQ(s[0].prompt_tokens, 64);
  EXPECT_EQ(s[0].gen_tokens, 1);
  EXPECT_EQ(s[1].context_tokens, 65);  // A_1 + g_1
  EXPECT_EQ(s[1].prompt_tokens, 265);
  EXPECT_EQ(s[2].context_tokens, 275);
  // Think time is zero by default and the recorded one when asked for.
  EXPECT_EQ(agent_turn(ds, a, 1).think_time_s, 0.0);
  a.honour_think_time = true;
  EXPECT_EQ(agent_turn(ds, a, 1).think_time_s, 2.5);
  EXPECT_EQ(agent_turn(ds, a, 0).think_time_s, 0.0);
}

TEST(ReplayTest, NoSyntheticRoundReplaysTheTrajectoryAsIs) {
  const Dataset ds = tiny_dataset();
  Agent a;
  a.trajectory = 2;
  a.synthetic_tokens = 0;
  EXPECT_EQ(agent_turn_count(ds, a), 3);
  EXPECT_EQ(agent_shape(ds, a)[1].context_tokens, 310);
}

TEST(ReplayTest, KeepTokensShiftBySyntheticRound) {
  Dataset ds;
  Trajectory tr{"k", {Turn{100, 10, 0, -1}, Turn{50, 5, 0, 64}}};
  ds.trajectories.push_back(tr);
  Agent a;
  a.synthetic_tokens = 64;
  const auto s = agent_shape(ds, a);
  EXPECT_EQ(s[2].context_tokens, 64 + 65);  // the cut keeps the synthetic round and 64 tokens
}

TEST(ReplayTest, OfflineAgentsStartAtZeroAndAreDeterministic) {
  const Dataset ds = tiny_dataset();
  auto a = make_offline_agents(ds, 1000, 5);
  auto b = make_offline_agents(ds, 1000, 5);
  auto c = make_offline_agents(ds, 1000, 6);
  ASSERT_TRUE(a.is_ok() && b.is_ok() && c.is_ok());
  ASSERT_EQ(a->size(), 1000u);
  std::set<int> used;
  bool differs = false;
  for (size_t i = 0; i < a->size(); ++i) {
    EXPECT_EQ((*a)[i].start_time_s, 0.0);
    EXPECT_EQ((*a)[i].id, static_cast<int64_t>(i));
    EXPECT_EQ((*a)[i].synthetic_tokens, 64);
    EXPECT_EQ((*a)[i].trajectory, (*b)[i].trajectory);
    differs |= (*a)[i].trajectory != (*c)[i].trajectory;
    used.insert((*a)[i].trajectory);
  }
  EXPECT_TRUE(differs);
  EXPECT_EQ(used.size(), 4u);  // uniform with replacement: every trajectory shows up
}

TEST(ReplayTest, OnlineAgentsArriveAsPoisson) {
  const Dataset ds = tiny_dataset();
  auto a = make_online_agents(ds, 2.0, 5000.0, 9);
  ASSERT_TRUE(a.is_ok());
  EXPECT_NEAR(static_cast<double>(a->size()), 10000.0, 400.0);  // ~4 sigma
  double prev = 0;
  for (const Agent& ag : *a) {
    EXPECT_GT(ag.start_time_s, prev);
    EXPECT_LT(ag.start_time_s, 5000.0);
    prev = ag.start_time_s;
  }
  auto n = make_online_agents_count(ds, 2.0, 100, 9);
  ASSERT_TRUE(n.is_ok());
  ASSERT_EQ(n->size(), 100u);
  EXPECT_EQ((*n)[99].start_time_s, (*a)[99].start_time_s);  // same arrival stream
}

TEST(ReplayTest, BadArgumentsAreErrors) {
  const Dataset ds = tiny_dataset();
  EXPECT_TRUE(make_offline_agents(ds, 0, 1).status().is_invalid_argument());
  EXPECT_TRUE(make_offline_agents(Dataset{}, 10, 1).status().is_invalid_argument());
  EXPECT_TRUE(make_online_agents(ds, 0.0, 10.0, 1).status().is_invalid_argument());
  EXPECT_TRUE(make_online_agents(ds, 1.0, -1.0, 1).status().is_invalid_argument());
  EXPECT_TRUE(make_online_agents_count(ds, 1.0, 0, 1).status().is_invalid_argument());
  ReplayOptions o;
  o.synthetic_first_round_tokens = -1;
  EXPECT_TRUE(make_offline_agents(ds, 1, 1, o).status().is_invalid_argument());
}

}  // namespace
}  // namespace dualpath::workload
