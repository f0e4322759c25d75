#include "control/convert.h"

#include <gtest/gtest.h>

namespace dualpath::control {
namespace {

sched::TurnPlan split_plan() {
  sched::TurnPlan p;
  p.request_id = 9;
  p.path = sched::ReadPath::kSplit;
  p.prompt_tokens = 300;
  p.gen_tokens = 20;
  p.hit_tokens = 256;
  p.pe_read = {0, 128};
  p.de_read = {128, 256};
  p.de_pushes_layers = true;
  return p;
}

std::vector<int32_t> prompt(int n) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) t[static_cast<size_t>(i)] = i % 200;
  return t;
}

TEST(Convert, BothNodesReadTheirPartOfTheSamePlanFromOneTurnSpec) {
  const auto tokens = prompt(300);
  compute::SamplingParams sampling;
  sampling.temperature = 0.7;
  sampling.seed = 42;
  const pb::TurnSpec spec = turn_spec(split_plan(), 77, tokens, sampling, "tenant-a");
  pb::PrepareRequest pm;
  *pm.mutable_turn() = spec;
  pm.set_engine(1);
  auto prep = prepare_request(pm, 64);
  ASSERT_TRUE(prep.is_ok()) << prep.status().to_string();
  EXPECT_EQ(prep->request_id, 77u);
  EXPECT_TRUE(prep->read_hits);
  EXPECT_EQ(prep->read_from_tokens, 128);
  EXPECT_EQ(prep->hit_tokens, 256);
  EXPECT_EQ(prep->engine, 1);
  EXPECT_DOUBLE_EQ(prep->sampling.temperature, 0.7);
  EXPECT_EQ(prep->cache_namespace, "tenant-a");
  pb::PrefillRequest fm;
  *fm.mutable_turn() = spec;
  fm.set_de_index(3);
  fm.set_de_dram_offset(4096);
  auto pre = prefill_request(fm, 64);
  ASSERT_TRUE(pre.is_ok()) << pre.status().to_string();
  EXPECT_EQ(pre->path, sched::ReadPath::kSplit);
  EXPECT_EQ(pre->pe_read_tokens, 128);
  EXPECT_EQ(pre->de_index, 3);
  EXPECT_EQ(pre->tokens, tokens);
}

// The DE DRAM tier (issue 35): the plan [0, 64) from the DE's DRAM, [64, 128) read by the PE,
// [128, 256) by the DE; each node gets its part, and a plan that leaves a block unloaded is
// refused.
TEST(Convert, ADramPartLeadsThePlanAndAGapInTheHitIsRefused) {
  const auto tokens = prompt(300);
  sched::TurnPlan plan = split_plan();
  plan.de_dram = {0, 64};
  plan.pe_read = {64, 128};
  const pb::TurnSpec spec = turn_spec(plan, 5, tokens, {}, "");
  pb::PrepareRequest pm;
  *pm.mutable_turn() = spec;
  auto prep = prepare_request(pm, 64);
  ASSERT_TRUE(prep.is_ok()) << prep.status().to_string();
  EXPECT_EQ(prep->dram_tokens, 64);
  EXPECT_EQ(prep->read_from_tokens, 128);
  pb::PrefillRequest fm;
  *fm.mutable_turn() = spec;
  auto pre = prefill_request(fm, 64);
  ASSERT_TRUE(pre.is_ok()) << pre.status().to_string();
  EXPECT_EQ(pre->pe_read_from_tokens, 64);
  EXPECT_EQ(pre->pe_read_tokens, 64);

  // The PE's part not where the DRAM part ends: blocks [64, 128) would be nobody's.
  pb::PrepareRequest gap = pm;
  gap.mutable_turn()->mutable_pe_read()->set_begin_tokens(128);
  gap.mutable_turn()->mutable_pe_read()->set_end_tokens(128);
  auto r = prepare_request(gap, 64);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("read ranges"), std::string::npos);
  // An empty DRAM range is no DRAM part, whatever its bounds.
  pb::PrepareRequest empty = pm;
  empty.mutable_turn()->mutable_de_dram()->set_begin_tokens(64);
  empty.mutable_turn()->mutable_pe_read()->set_begin_tokens(0);
  prep = prepare_request(empty, 64);
  ASSERT_TRUE(prep.is_ok()) << prep.status().to_string();
  EXPECT_EQ(prep->dram_tokens, 0);
}

TEST(Convert, ATurnSpecOutOfThePlansShapeIsRefusedNamingTheField) {
  const auto tokens = prompt(300);
  pb::PrepareRequest m;
  *m.mutable_turn() = turn_spec(split_plan(), 1, tokens, {}, "");
  m.mutable_turn()->mutable_de_read()->set_end_tokens(192);  // not up to the hit
  auto r = prepare_request(m, 64);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("read ranges"), std::string::npos);

  *m.mutable_turn() = turn_spec(split_plan(), 1, tokens, {}, "");
  m.mutable_turn()->set_hit_tokens(300);  // the whole prompt: nothing left to compute
  EXPECT_FALSE(prepare_request(m, 64).is_ok());

  *m.mutable_turn() = turn_spec(split_plan(), 1, tokens, {}, "");
  m.mutable_turn()->set_tokens(5, -3);
  r = prepare_request(m, 64);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("token id -3"), std::string::npos);

  *m.mutable_turn() = turn_spec(split_plan(), 1, tokens, {}, "");
  m.mutable_turn()->set_gen_tokens(0);
  EXPECT_FALSE(prepare_request(m, 64).is_ok());

  pb::PrefillRequest p;
  *p.mutable_turn() = turn_spec(split_plan(), 1, tokens, {}, "");
  p.mutable_turn()->set_path(static_cast<pb::ReadPath>(99));
  EXPECT_FALSE(prefill_request(p, 64).is_ok());
}

TEST(Convert, SetupHelloAndRepliesRoundTrip) {
  engine::NodeSetup s;
  s.role = engine::NodeRole::kDecode;
  s.index = 2;
  s.backend.compute = "modeled";
  s.backend.model = "ds660b";
  s.backend.hardware.name = "h800";
  s.backend.hardware.snic_bytes_per_s = 1.5e9;
  s.backend.efficiency.storage_efficiency = 0.95;
  s.data_paths = {"/a", "/b"};
  s.dram_buffer_bytes = 1 << 20;
  s.hbm_bytes = 2 << 20;
  s.timeout = std::chrono::seconds(7);
  s.heartbeat = std::chrono::milliseconds(250);
  auto back = from_proto(to_proto(s));
  ASSERT_TRUE(back.is_ok()) << back.status().to_string();
  EXPECT_TRUE(*back == s);
  EXPECT_EQ(back->heartbeat, std::chrono::milliseconds(250));
  pb::NodeSetup negative = to_proto(s);
  negative.set_heartbeat_ms(-1);
  EXPECT_FALSE(from_proto(negative).is_ok());

  engine::NodeHello h;
  h.role = engine::NodeRole::kPrefill;
  h.index = 1;
  h.address = {std::byte{1}, std::byte{2}};
  h.dram = {std::byte{3}};
  h.hbm = {{std::byte{4}}, {std::byte{5}, std::byte{6}}};
  auto hb = from_proto(to_proto(h));
  ASSERT_TRUE(hb.is_ok());
  EXPECT_EQ(hb->address, h.address);
  EXPECT_EQ(hb->hbm, h.hbm);

  engine::PrefillReply pr;
  pr.first_token = 5;
  pr.logits = {0.5f, -1.0f};
  pr.bytes.storage_read = 100;
  pr.layer_timeline = {{0.1, 0.2}};
  auto prb = from_proto(to_proto(pr));
  ASSERT_TRUE(prb.is_ok());
  EXPECT_EQ(prb->logits, pr.logits);
  EXPECT_EQ(prb->bytes.storage_read, 100);

  pb::PrefillReply bad = to_proto(pr);
  bad.set_prefill_s(-1);
  EXPECT_FALSE(from_proto(bad).is_ok());
  pb::LoadReport lr;
  lr.set_read_queue_tokens(-5);
  EXPECT_FALSE(from_proto(lr).is_ok());
}

}  // namespace
}  // namespace dualpath::control
