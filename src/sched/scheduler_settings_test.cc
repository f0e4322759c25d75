#include "sched/scheduler_settings.h"

#include <gtest/gtest.h>

namespace dualpath::sched {
namespace {

TEST(ModeTable, NamesRoundTripAndTheLiveSystemRefusesTheAblations) {
  for (const std::string& name : mode_names()) {
    auto m = parse_mode(name);
    ASSERT_TRUE(m.is_ok()) << name;
    EXPECT_EQ(mode_name(*m), name);
  }
  EXPECT_TRUE(parse_mode("layerwise").is_ok());
  auto live = parse_mode("layerwise", /*live=*/true);
  ASSERT_FALSE(live.is_ok());
  EXPECT_NE(live.status().message().find("simulator ablations"), std::string::npos);
  auto typo = parse_mode("ful");
  ASSERT_FALSE(typo.is_ok());
  EXPECT_NE(typo.status().message().find("did you mean 'full'"), std::string::npos);
  EXPECT_EQ(mode_policy(Mode::kBasic).engines, EnginePolicy::kRoundRobin);
  EXPECT_EQ(mode_policy(Mode::kFull).paths, PathPolicy::kShortestQueue);
  EXPECT_EQ(mode_policy(Mode::kOracle).paths, PathPolicy::kNoIo);
  EXPECT_TRUE(uses_paper_scheduler(Mode::kSplit));
  EXPECT_FALSE(reads_on_both_sides(Mode::kLayerwise));
  EXPECT_TRUE(reads_on_both_sides(Mode::kDualPath));
}

TEST(SchedulerSettings, OneReaderReadsTheSharedKeysAndNamesABadValue) {
  auto file = Config::from_string(
      "[scheduler]\nmode = \"split\"\nalpha_s = 2\nbeta_s = 4\nz_factor = 1.1\n"
      "fetch_interval_ms = 20\nquota_ms = 250\npe_policy = \"tail\"\nsplit_min_tokens = 512\n",
      "t.toml");
  ASSERT_TRUE(file.is_ok());
  SchedulerSettings s;
  ASSERT_TRUE(read_scheduler_settings(*file, s).is_ok());
  ASSERT_TRUE(file->finish().is_ok()) << file->finish().to_string();
  EXPECT_EQ(s.mode, Mode::kSplit);
  EXPECT_DOUBLE_EQ(s.alpha_s, 2);
  EXPECT_DOUBLE_EQ(s.beta_s, 4);
  EXPECT_DOUBLE_EQ(s.z_factor, 1.1);
  EXPECT_DOUBLE_EQ(s.fetch_interval_s, 0.02);
  EXPECT_DOUBLE_EQ(s.quota_s, 0.25);
  EXPECT_EQ(s.pe_policy, PePolicy::kTail);
  EXPECT_EQ(s.split_min_tokens, 512);

  auto bad = Config::from_string("[scheduler]\nmode = \"dualpath\"\n", "b.toml");
  ASSERT_TRUE(bad.is_ok());
  SchedulerSettings live;
  ASSERT_TRUE(read_scheduler_settings(*bad, live, /*live=*/true).is_ok());
  const Status st = bad->finish();
  ASSERT_FALSE(st.is_ok());
  EXPECT_NE(st.message().find("scheduler.mode"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("dualpath"), std::string::npos) << st.message();

  SchedulerSettings out_of_range;
  out_of_range.fetch_interval_s = 0;
  EXPECT_FALSE(out_of_range.validate().is_ok());
}

TEST(MakeClusterSchedulerParams, DerivesAlphaFromTheStorageNicAndBetaFromTheCostModel) {
  SchedulerSettings s;
  SchedulerInputs in;
  in.prefill_tokens_per_s = 8000;
  in.snic_bytes_per_s = 1e9;
  in.kv_bytes_per_token = 1e5;
  in.block_tokens = 256;
  in.de_hbm_bytes = 5e9;
  ClusterSchedulerParams p = make_cluster_scheduler_params(s, in);
  EXPECT_EQ(p.pe.alpha_tokens, 30000);  // 1 GB/s x 3 s / 100 kB
  EXPECT_EQ(p.pe.beta_tokens, 40000);   // 8000 tokens/s x 5 s
  EXPECT_EQ(p.block_tokens, 256);
  EXPECT_DOUBLE_EQ(p.de_hbm_bytes, 5e9);
  in.gpus_per_engine = 8;
  EXPECT_EQ(make_cluster_scheduler_params(s, in).pe.beta_tokens, 320000);
  in.snic_bytes_per_s = 0;  // unlimited: never a long read queue
  EXPECT_GT(make_cluster_scheduler_params(s, in).pe.alpha_tokens, int64_t{1} << 60);

  const model::CostModel cost(*model::model_preset("ds660b"), *model::hardware_preset("h800"));
  in.cost = &cost;
  in.snic_bytes_per_s = 1e9;
  in.gpus_per_engine = 1;
  in.pe_group_gpus = 16;
  p = make_cluster_scheduler_params(s, in);
  const PeParams direct = derive_pe_params(cost, 30000, 300, 0.3, 16, 1e9, 1e5, 3, 5);
  EXPECT_EQ(p.pe.beta_tokens, direct.beta_tokens);
  EXPECT_EQ(p.pe.alpha_tokens, direct.alpha_tokens);
}

}  // namespace
}  // namespace dualpath::sched
