#include "compute/cpu_model.h"

#include <gtest/gtest.h>

#include <vector>

#include "compute/test_util.h"
#include "model/model_spec.h"

namespace dualpath::compute {
namespace {

using testing::max_abs_diff;
using testing::random_tokens;
using testing::tiny_weights;

std::vector<std::span<const float>> views(const std::vector<std::vector<float>>& kv) {
  return {kv.begin(), kv.end()};
}

// Greedy decoding through a growing per-layer KV, `steps` tokens after a prefill result.
std::vector<int32_t> generate(const CpuModel& model,
                              std::vector<std::vector<float>> kv,
                              std::span<const float> first_logits,
                              int steps,
                              std::vector<std::vector<float>>* step_logits = nullptr) {
  std::vector<int32_t> out = {greedy_token(first_logits)};
  for (int s = 1; s < steps; ++s) {
    auto r = model.decode(views(kv), out.back());
    EXPECT_TRUE(r.is_ok()) << r.status().to_string();
    if (!r.is_ok()) break;
    for (size_t l = 0; l < kv.size(); ++l) {
      kv[l].insert(kv[l].end(), r->new_kv[l].begin(), r->new_kv[l].end());
    }
    if (step_logits != nullptr) step_logits->push_back(r->logits);
    out.push_back(greedy_token(r->logits));
  }
  return out;
}

TEST(CpuModelConfig, PresetsStoreTheKvBytesOfTheModelPresetsOfTheSameName) {
  for (const std::string& name : cpu_model_preset_names()) {
    auto cpu = cpu_model_preset(name);
    auto spec = model::model_preset(name);
    ASSERT_TRUE(cpu.is_ok() && spec.is_ok()) << name;
    ASSERT_TRUE(cpu->validate().is_ok());
    EXPECT_EQ(cpu->kv_bytes_per_token_per_layer(), spec->kv_bytes_per_token_per_layer) << name;
    EXPECT_EQ(cpu->layers, spec->layers) << name;
    EXPECT_EQ(cpu->q_heads, spec->q_heads) << name;
    EXPECT_EQ(cpu->head_dim, spec->head_dim) << name;
  }
  EXPECT_EQ(cpu_model_preset("tiny")->kv_bytes_per_token_per_layer(), 512);
  EXPECT_EQ(cpu_model_preset("small")->kv_bytes_per_token_per_layer(), 2048);
  auto bad = cpu_model_preset("huge");
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("tiny"), std::string::npos);
}

TEST(CpuModel, SameSeedGivesBitIdenticalWeightsAndLogits) {
  auto a = tiny_weights(7), b = tiny_weights(7), c = tiny_weights(8);
  EXPECT_EQ(a->embed, b->embed);
  EXPECT_EQ(a->layers[3].w_down, b->layers[3].w_down);
  EXPECT_NE(a->layers[3].w_down, c->layers[3].w_down);
  const auto tokens = random_tokens(37, 512, 1);
  auto ra = CpuModel(a).prefill({}, tokens, 0);
  auto rb = CpuModel(b).prefill({}, tokens, 0);
  auto rc = CpuModel(c).prefill({}, tokens, 0);
  ASSERT_TRUE(ra.is_ok() && rb.is_ok() && rc.is_ok());
  EXPECT_EQ(ra->logits, rb->logits);
  EXPECT_EQ(ra->new_kv, rb->new_kv);
  EXPECT_GT(max_abs_diff(ra->logits, rc->logits), 1e-2f);
}

TEST(CpuModel, PerLayerApiIsBitIdenticalToWholePromptApi) {
  CpuModel model(tiny_weights());
  auto first = model.prefill({}, random_tokens(100, 512, 2), 0);
  ASSERT_TRUE(first.is_ok());
  const auto cached = views(first->new_kv);
  const auto tokens = random_tokens(57, 512, 3);
  auto whole = model.prefill(cached, tokens, 100, LogitsMode::kAll);
  ASSERT_TRUE(whole.is_ok()) << whole.status().to_string();

  auto pass = model.begin(tokens, 100);
  ASSERT_TRUE(pass.is_ok());
  for (int l = 0; l < model.config().layers; ++l) {
    std::vector<float> out(tokens.size() * 128);
    ASSERT_TRUE(pass->forward_layer(l, cached[l], out).is_ok());
    EXPECT_EQ(out, whole->new_kv[l]) << "layer " << l;
  }
  auto logits = pass->finish(LogitsMode::kAll);
  ASSERT_TRUE(logits.is_ok());
  EXPECT_EQ(*logits, whole->logits);
}

TEST(CpuModel, CachedKvInSegmentsGivesTheSameBitsAsOneSpan) {
  CpuModel model(tiny_weights());
  const auto prefix = random_tokens(130, 512, 4);
  auto first = model.prefill({}, prefix, 0);
  ASSERT_TRUE(first.is_ok());
  const auto tokens = random_tokens(5, 512, 5);
  auto a = model.begin(tokens, 130);
  auto b = model.begin(tokens, 130);
  ASSERT_TRUE(a.is_ok() && b.is_ok());
  for (int l = 0; l < 4; ++l) {
    std::span<const float> all = first->new_kv[l];
    // 64-token Layer Blocks, as the store hands them out: 64 + 64 + 2 tokens.
    const std::span<const float> segs[3] = {
        all.subspan(0, 64 * 128), all.subspan(64 * 128, 64 * 128), all.subspan(128 * 128)};
    std::vector<float> oa(5 * 128), ob(5 * 128);
    ASSERT_TRUE(a->forward_layer(l, all, oa).is_ok());
    ASSERT_TRUE(b->forward_layer(l, KvFloatSegments(segs), ob).is_ok());
    EXPECT_EQ(oa, ob);
  }
  EXPECT_EQ(*a->finish(), *b->finish());
}

// Issue 5's correctness invariant at the model level: a prompt prefilled in three chunks, each
// over the KV the model produced for the earlier ones, gives the logits of the whole prompt
// computed from scratch (within 1e-4) and the same greedy continuation.
TEST(CpuModel, PrefixKvReuseOverThreeChunksEqualsRecomputingTheWholePrompt) {
  CpuModel model(tiny_weights());
  constexpr int64_t kChunk = 700;
  const auto prompt = random_tokens(3 * kChunk, 512, 6);
  auto whole = model.prefill({}, prompt, 0);
  ASSERT_TRUE(whole.is_ok()) << whole.status().to_string();

  std::vector<std::vector<float>> kv(4);
  std::vector<float> logits;
  for (int64_t c = 0; c < 3; ++c) {
    std::span<const int32_t> chunk(prompt.data() + c * kChunk, kChunk);
    auto r = model.prefill(views(kv), chunk, c * kChunk);
    ASSERT_TRUE(r.is_ok()) << r.status().to_string();
    for (int l = 0; l < 4; ++l) kv[l].insert(kv[l].end(), r->new_kv[l].begin(), r->new_kv[l].end());
    logits = r->logits;
  }
  EXPECT_LT(max_abs_diff(logits, whole->logits), 1e-4f);
  for (int l = 0; l < 4; ++l) EXPECT_LT(max_abs_diff(kv[l], whole->new_kv[l]), 1e-4f) << l;
  const auto from_chunks = generate(model, kv, logits, 6);
  const auto from_scratch = generate(model, whole->new_kv, whole->logits, 6);
  EXPECT_EQ(from_chunks, from_scratch);
}

// Stronger than the 1e-4 the engines need, and by design (docs/compute.md "Numerics"): a query's
// result does not depend on the chunk or attention block it fell into.
TEST(CpuModel, ChunkedPrefillIsBitIdenticalToTheWholePrompt) {
  CpuModel model(tiny_weights());
  const auto prompt = random_tokens(300, 512, 12);
  auto whole = model.prefill({}, prompt, 0);
  auto head = model.prefill({}, std::span<const int32_t>(prompt).first(123), 0);
  ASSERT_TRUE(whole.is_ok() && head.is_ok());
  auto tail =
      model.prefill(views(head->new_kv), std::span<const int32_t>(prompt).subspan(123), 123);
  ASSERT_TRUE(tail.is_ok());
  EXPECT_EQ(tail->logits, whole->logits);
  for (int l = 0; l < 4; ++l) {
    std::vector<float> kv = head->new_kv[l];
    kv.insert(kv.end(), tail->new_kv[l].begin(), tail->new_kv[l].end());
    EXPECT_EQ(kv, whole->new_kv[l]) << "layer " << l;
  }
}

TEST(CpuModel, PerturbedCachedKvChangesTheLogits) {
  CpuModel model(tiny_weights());
  const auto prefix = random_tokens(64, 512, 8);
  const auto tokens = random_tokens(3, 512, 9);
  auto first = model.prefill({}, prefix, 0);
  ASSERT_TRUE(first.is_ok());
  auto clean = model.prefill(views(first->new_kv), tokens, 64);
  ASSERT_TRUE(clean.is_ok());
  for (int l = 0; l < 4; ++l) {
    for (int64_t which : {0, 128 * 10 + 70}) {  // a K value of token 0, a V value of token 10
      auto kv = first->new_kv;
      kv[l][which] += 1.0f;
      auto dirty = model.prefill(views(kv), tokens, 64);
      ASSERT_TRUE(dirty.is_ok());
      EXPECT_GT(max_abs_diff(clean->logits, dirty->logits), 1e-6f)
          << "layer " << l << " float " << which;
    }
  }
}

TEST(CpuModel, DecodeStepsGiveThePrefillLogitsOfTheWholeSequence) {
  CpuModel model(tiny_weights());
  const auto prompt = random_tokens(50, 512, 10);
  auto pre = model.prefill({}, prompt, 0);
  ASSERT_TRUE(pre.is_ok());
  std::vector<std::vector<float>> step_logits;
  const auto generated = generate(model, pre->new_kv, pre->logits, 8, &step_logits);
  ASSERT_EQ(step_logits.size(), 7u);

  std::vector<int32_t> seq = prompt;
  seq.insert(seq.end(), generated.begin(), generated.end() - 1);
  auto all = model.prefill({}, seq, 0, LogitsMode::kAll);
  ASSERT_TRUE(all.is_ok());
  const size_t vocab = 512;
  for (size_t s = 0; s < step_logits.size(); ++s) {
    std::span<const float> row(all->logits.data() + (prompt.size() + s) * vocab, vocab);
    EXPECT_LT(max_abs_diff(step_logits[s], row), 1e-4f) << "step " << s;
    EXPECT_EQ(greedy_token(row), generated[s + 1]) << "step " << s;
  }
}

TEST(CpuModel, RejectsLayersOutOfOrderWrongKvSizesAndBadTokens) {
  CpuModel model(tiny_weights());
  const auto tokens = random_tokens(4, 512, 11);
  auto pass = model.begin(tokens, 2);
  ASSERT_TRUE(pass.is_ok());
  std::vector<float> cached(2 * 128), out(4 * 128);
  EXPECT_EQ(pass->forward_layer(1, cached, out).code(), StatusCode::kFailedPrecondition);
  std::vector<float> short_cached(128);
  EXPECT_TRUE(pass->forward_layer(0, short_cached, out).is_invalid_argument());
  std::vector<float> short_out(3 * 128);
  EXPECT_TRUE(pass->forward_layer(0, cached, short_out).is_invalid_argument());
  EXPECT_EQ(pass->finish().status().code(), StatusCode::kFailedPrecondition);
  ASSERT_TRUE(pass->forward_layer(0, cached, out).is_ok());

  const int32_t bad[1] = {512};
  auto r = model.begin(bad, 0);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("vocabulary"), std::string::npos);
  EXPECT_TRUE(model.begin({}, 0).status().is_invalid_argument());
}

}  // namespace
}  // namespace dualpath::compute
