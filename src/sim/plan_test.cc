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

}  // namespace
}  // namespace dualpath::sim
