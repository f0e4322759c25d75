#include "sched/turn_plan.h"

#include <gtest/gtest.h>

namespace dualpath::sched {
namespace {

TEST(PlanHitTokens, KeepsWholeCachedBlocksAndLeavesOnePromptTokenToCompute) {
  EXPECT_EQ(plan_hit_tokens(300, 1000, 64), 256);   // whole blocks of the cached prefix
  EXPECT_EQ(plan_hit_tokens(1024, 1024, 64), 960);  // all cached: the last block is computed
  EXPECT_EQ(plan_hit_tokens(1024, 1025, 64), 1024);
  EXPECT_EQ(plan_hit_tokens(5000, 1000, 64), 960);  // never more than the prompt
  EXPECT_EQ(plan_hit_tokens(63, 1000, 64), 0);
  EXPECT_EQ(plan_hit_tokens(-5, 1000, 64), 0);
  EXPECT_EQ(plan_hit_tokens(100, 0, 64), 0);
}

TEST(MakeSchedRequest, PricesTheDeHbmNeedInWholeBlocksCappedByTheBudget) {
  TurnInputs t;
  t.id = 7;
  t.prompt_tokens = 100;
  t.gen_tokens = 30;
  t.cached_tokens = 80;
  SchedRequest r = make_sched_request(t, {64, 10.0, 0});
  EXPECT_EQ(r.id, 7);
  EXPECT_EQ(r.hit_tokens, 64);
  EXPECT_DOUBLE_EQ(r.hbm_need_bytes, 192 * 10.0);  // 130 tokens in 3 blocks of 64
  r = make_sched_request(t, {64, 10.0, 1000.0});
  EXPECT_DOUBLE_EQ(r.hbm_need_bytes, 1000.0);
  t.path = ReadPath::kRecompute;
  EXPECT_EQ(make_sched_request(t, {64, 10.0, 0}).hit_tokens, 0);
}

TEST(PlanTurn, EachPathReadsItsRangeOfTheHitOnce) {
  SchedRequest r;
  r.id = 3;
  r.prompt_tokens = 1000;
  r.gen_tokens = 10;
  r.hit_tokens = 896;
  Placement p;
  p.request_id = 3;
  p.path = ReadPath::kPe;
  p.pe_read_tokens = 896;
  TurnPlan plan = plan_turn(r, p);
  EXPECT_EQ(plan.pe_read, (ReadRange{0, 896}));
  EXPECT_TRUE(plan.de_read.empty());
  EXPECT_FALSE(plan.de_pushes_layers);
  EXPECT_EQ(plan.hit_tokens, 896);

  p.path = ReadPath::kDe;
  p.pe_read_tokens = 0;
  p.de_read_tokens = 896;
  plan = plan_turn(r, p);
  EXPECT_TRUE(plan.pe_read.empty());
  EXPECT_EQ(plan.de_read, (ReadRange{0, 896}));
  EXPECT_TRUE(plan.de_pushes_layers);

  p.path = ReadPath::kSplit;
  p.pe_read_tokens = 512;
  p.de_read_tokens = 384;
  plan = plan_turn(r, p);
  EXPECT_EQ(plan.pe_read, (ReadRange{0, 512}));
  EXPECT_EQ(plan.de_read, (ReadRange{512, 896}));
  EXPECT_EQ(plan.pe_read.tokens() + plan.de_read.tokens(), plan.hit_tokens);

  p.path = ReadPath::kOracle;
  p.pe_read_tokens = p.de_read_tokens = 0;
  plan = plan_turn(r, p);
  EXPECT_TRUE(plan.no_io);
  EXPECT_EQ(plan.hit_tokens, 896);  // taken to be in HBM
  EXPECT_TRUE(plan.pe_read.empty() && plan.de_read.empty());

  p.path = ReadPath::kRecompute;
  plan = plan_turn(r, p);
  EXPECT_EQ(plan.hit_tokens, 0);
  EXPECT_FALSE(plan.no_io);
  EXPECT_NE(to_string(plan).find("path recompute"), std::string::npos);
}

}  // namespace
}  // namespace dualpath::sched
