#include "sim/plan.h"

#include <gtest/gtest.h>

#include "sim/sim_config.h"

namespace dualpath::sim {
namespace {

TEST(SimConfig, ParsesPdLayouts) {
  auto pd = parse_pd("48P96D");
  ASSERT_TRUE(pd.is_ok());
  EXPECT_EQ(pd->first, 48);
  EXPECT_EQ(pd->second, 96);
  EXPECT_FALSE(parse_pd("2P").is_ok());
  EXPECT_FALSE(parse_pd("0P4D").is_ok());
  EXPECT_FALSE(parse_pd("xPyD").is_ok());
}

TEST(SimConfig, UnknownModeSuggestsTheClosest) {
  auto m = parse_mode("dual");
  ASSERT_FALSE(m.is_ok());
  EXPECT_NE(m.status().message().find("dualpath"), std::string::npos) << m.status().message();
}

TEST(SimConfig, ConfigFileErrorsNameTheKey) {
  auto f = Config::from_string("[hardware]\nsnic_gbps = 0\n", "bad.toml");
  ASSERT_TRUE(f.is_ok());
  SimConfig cfg = *default_sim_config("ds660b");
  EXPECT_TRUE(apply_config(*f, cfg).is_ok());
  Status s = f->finish();
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("hardware.snic_gbps"), std::string::npos) << s.message();
}

TEST(Plan, RecommendsASplitAndSimulatesEveryCandidate) {
  SimConfig cfg = *default_sim_config("ds27b");
  cfg.agents = 24;
  cfg.dataset = "32k";
  auto rec = recommend_pd(cfg, 3, 1.0 / 7, 3.5);
  ASSERT_TRUE(rec.is_ok()) << rec.status().to_string();
  ASSERT_EQ(rec->candidates.size(), 2u);
  ASSERT_GE(rec->best, 0);
  for (const auto& c : rec->candidates) {
    EXPECT_GT(c.result.jct_s, 0);
    EXPECT_TRUE(c.in_bottleneck_free_range);
  }
}

TEST(Plan, SkipsSplitsThatCannotHoldTheWeightsAndSaysWhy) {
  SimConfig cfg = *default_sim_config("ds660b");  // weights need EP groups of two nodes
  cfg.agents = 16;
  cfg.dataset = "32k";
  auto rec = recommend_pd(cfg, 4, 1.0 / 7, 3.5);
  ASSERT_TRUE(rec.is_ok()) << rec.status().to_string();
  ASSERT_EQ(rec->candidates.size(), 3u);
  EXPECT_NE(rec->candidates[0].infeasible.find("pe_ep_nodes"), std::string::npos);  // 1P3D
  EXPECT_TRUE(rec->candidates[1].infeasible.empty());                              // 2P2D
  // 3P1D: 3 prefill nodes in groups of 2 leave a 1-node group (and 1 decode node is too few).
  EXPECT_NE(rec->candidates[2].infeasible.find("last group of 1 node"), std::string::npos)
      << rec->candidates[2].infeasible;
  EXPECT_EQ(rec->best, 1);
  EXPECT_GT(rec->candidates[1].result.jct_s, 0);
  // Three nodes leave no split with two nodes on each side: an error naming the reason.
  auto none = recommend_pd(cfg, 3, 1.0 / 7, 3.5);
  ASSERT_FALSE(none.is_ok());
  EXPECT_NE(none.status().message().find("no split of 3 nodes"), std::string::npos)
      << none.status().message();
}

}  // namespace
}  // namespace dualpath::sim
