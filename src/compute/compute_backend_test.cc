// The ComputeBackend contract, one suite run against both backends (STYLE.md: the fake and the
// real part pass the same TEST_P suite).

#include "compute/compute_backend.h"

#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <vector>

#include "compute/cpu_backend.h"
#include "compute/modeled_backend.h"
#include "compute/test_util.h"
#include "model/hardware_spec.h"
#include "model/model_spec.h"

namespace dualpath::compute {
namespace {

class InstantClock final : public Clock {
 public:
  Duration now() const override { return Duration(0); }
  void sleep_until(Duration) override {}
};

struct BackendCase {
  const char* name;
  std::function<std::unique_ptr<ComputeBackend>(Clock&)> make;
};

class ComputeBackendContract : public ::testing::TestWithParam<BackendCase> {
 protected:
  void SetUp() override { backend_ = GetParam().make(clock_); }
  InstantClock clock_;
  std::unique_ptr<ComputeBackend> backend_;
};

constexpr int64_t kBlockTokens = 64;

// A Full-Block-layout store for one sequence: blocks of [layer][kBlockTokens][row].
struct Blocks {
  KvShape shape;
  std::vector<std::vector<std::byte>> blocks;
  std::span<std::byte> layer_rows(int64_t block, int layer) {
    const auto n = static_cast<size_t>(kBlockTokens * shape.bytes_per_token_per_layer);
    return std::span<std::byte>(blocks[block]).subspan(static_cast<size_t>(layer) * n, n);
  }
};

// Runs one pass layer by layer; cached KV comes from `cached` (whole blocks), the new KV is
// written into `store` blocks at the right token offsets.
Result<NextToken> run_pass(ComputeBackend& b,
                           std::span<const int32_t> tokens,
                           int64_t cached,
                           Blocks* cached_blocks,
                           Blocks* store) {
  const KvShape shape = b.kv_shape();
  const auto row = static_cast<size_t>(shape.bytes_per_token_per_layer);
  const PrefillSequence seq[1] = {{tokens, cached}};
  DP_RETURN_IF_ERROR(b.begin_prefill(seq));
  std::vector<std::byte> out(tokens.size() * row);
  for (int l = 0; l < shape.layers; ++l) {
    std::vector<std::span<const std::byte>> segs;
    for (int64_t blk = 0; blk < cached / kBlockTokens; ++blk) {
      segs.push_back(cached_blocks->layer_rows(blk, l));
    }
    const KvLayerView views[1] = {KvLayerView(segs)};
    const std::span<std::byte> outs[1] = {out};
    DP_RETURN_IF_ERROR(b.prefill_layer(l, views, outs));
    for (size_t t = 0; t < tokens.size(); ++t) {
      const int64_t pos = cached + static_cast<int64_t>(t);
      if (store != nullptr && pos / kBlockTokens < static_cast<int64_t>(store->blocks.size())) {
        auto dst =
            store->layer_rows(pos / kBlockTokens, l).subspan((pos % kBlockTokens) * row, row);
        std::copy_n(out.begin() + static_cast<ptrdiff_t>(t * row), row, dst.begin());
      }
    }
  }
  DP_ASSIGN_OR_RETURN(auto next, b.finish_prefill());
  return next.at(0);
}

Blocks make_blocks(KvShape shape, int64_t n) {
  Blocks b{shape, {}};
  for (int64_t i = 0; i < n; ++i) {
    b.blocks.emplace_back(
        static_cast<size_t>(shape.layers * kBlockTokens * shape.bytes_per_token_per_layer));
  }
  return b;
}

TEST_P(ComputeBackendContract, KvFromFullBlocksGivesTheTokenOfRecomputingAndCorruptionShows) {
  ComputeBackend& b = *backend_;
  const auto prompt = testing::random_tokens(150, 512, 21);
  Blocks blocks = make_blocks(b.kv_shape(), 2);  // the first 128 tokens' KV, as stored
  auto recomputed = run_pass(b, prompt, 0, nullptr, &blocks);
  ASSERT_TRUE(recomputed.is_ok()) << recomputed.status().to_string();

  std::span<const int32_t> rest(prompt.data() + 128, prompt.size() - 128);
  auto reused = run_pass(b, rest, 128, &blocks, nullptr);
  ASSERT_TRUE(reused.is_ok()) << reused.status().to_string();
  EXPECT_EQ(reused->token, recomputed->token);
  EXPECT_LT(testing::max_abs_diff(reused->logits, recomputed->logits), 1e-4f);

  // One byte of the stored KV, in the last layer of block 1 (a V value's exponent for cpu).
  const int last = b.kv_shape().layers - 1;
  blocks.layer_rows(1, last)[5 * b.kv_shape().bytes_per_token_per_layer - 1] ^= std::byte{0x40};
  auto corrupted = run_pass(b, rest, 128, &blocks, nullptr);
  ASSERT_TRUE(corrupted.is_ok());
  EXPECT_TRUE(corrupted->token != recomputed->token || corrupted->logits != reused->logits);
}

// A decode continues as a prefill of the sequence so far would: what lets a decode move to another
// engine mid-way (a migration prefills the generated tokens there) and carry on unchanged.
TEST_P(ComputeBackendContract, DecodeStepsGiveTheTokensOfPrefillingTheSequenceSoFar) {
  ComputeBackend& b = *backend_;
  const KvShape shape = b.kv_shape();
  const auto row = static_cast<size_t>(shape.bytes_per_token_per_layer);
  std::vector<int32_t> sequence = testing::random_tokens(128, 512, 33);
  Blocks blocks = make_blocks(shape, 3);  // the prompt's 128 rows, then the decode's
  auto first = run_pass(b, sequence, 0, nullptr, &blocks);
  ASSERT_TRUE(first.is_ok()) << first.status().to_string();
  std::vector<int32_t> decoded{first->token};
  std::vector<std::byte> new_kv(static_cast<size_t>(shape.layers) * row);
  for (int step = 0; step < 3; ++step) {
    const int64_t pos = 128 + step;  // the position of the token fed back
    std::vector<std::vector<std::span<const std::byte>>> segs(static_cast<size_t>(shape.layers));
    std::vector<KvLayerView> views;
    for (int l = 0; l < shape.layers; ++l) {
      segs[l] = {blocks.layer_rows(0, l), blocks.layer_rows(1, l)};
      if (step > 0) segs[l].push_back(blocks.layer_rows(2, l).first(step * row));
      views.emplace_back(segs[l]);
    }
    const DecodeSequence seq{decoded.back(), pos, views, new_kv};
    auto next = b.decode_step(std::span(&seq, 1));
    ASSERT_TRUE(next.is_ok()) << next.status().to_string();
    for (int l = 0; l < shape.layers; ++l) {  // the token's KV joins the context
      std::copy_n(new_kv.begin() + static_cast<ptrdiff_t>(l * row), row,
                  blocks.layer_rows(2, l).begin() + static_cast<ptrdiff_t>(step * row));
    }
    sequence.push_back(decoded.back());
    decoded.push_back(next->at(0).token);
    auto prefilled = run_pass(b, sequence, 0, nullptr, nullptr);
    ASSERT_TRUE(prefilled.is_ok()) << prefilled.status().to_string();
    EXPECT_EQ(prefilled->token, decoded.back()) << "step " << step;
  }
}

TEST_P(ComputeBackendContract, LayersOutOfOrderAndEarlyFinishAreFailedPrecondition) {
  ComputeBackend& b = *backend_;
  const auto tokens = testing::random_tokens(3, 512, 22);
  std::vector<std::byte> out(3 * static_cast<size_t>(b.kv_shape().bytes_per_token_per_layer));
  const KvLayerView views[1] = {KvLayerView()};
  const std::span<std::byte> outs[1] = {out};
  EXPECT_EQ(b.prefill_layer(0, views, outs).code(), StatusCode::kFailedPrecondition);
  const PrefillSequence seq[1] = {{tokens, 0}};
  ASSERT_TRUE(b.begin_prefill(seq).is_ok());
  EXPECT_EQ(b.prefill_layer(1, views, outs).code(), StatusCode::kFailedPrecondition);
  ASSERT_TRUE(b.prefill_layer(0, views, outs).is_ok());
  EXPECT_EQ(b.finish_prefill().status().code(), StatusCode::kFailedPrecondition);
  EXPECT_TRUE(b.begin_prefill({}).is_invalid_argument());
}

TEST_P(ComputeBackendContract, MisSizedKvIsInvalidArgument) {
  ComputeBackend& b = *backend_;
  const auto row = static_cast<size_t>(b.kv_shape().bytes_per_token_per_layer);
  const auto tokens = testing::random_tokens(3, 512, 23);
  const PrefillSequence seq[1] = {{tokens, 2}};
  ASSERT_TRUE(b.begin_prefill(seq).is_ok());
  alignas(16) static std::byte cached[4 * 2048];
  std::vector<std::byte> out(3 * row);
  const std::span<const std::byte> one_row[1] = {std::span<const std::byte>(cached, row)};
  const KvLayerView short_view[1] = {KvLayerView(one_row)};
  const std::span<std::byte> outs[1] = {out};
  EXPECT_TRUE(b.prefill_layer(0, short_view, outs).is_invalid_argument());
  const std::span<const std::byte> two_rows[1] = {std::span<const std::byte>(cached, 2 * row)};
  const KvLayerView good_view[1] = {KvLayerView(two_rows)};
  const std::span<std::byte> short_out[1] = {std::span<std::byte>(out).first(2 * row)};
  EXPECT_TRUE(b.prefill_layer(0, good_view, short_out).is_invalid_argument());
  EXPECT_TRUE(b.prefill_layer(0, good_view, outs).is_ok());
}

TEST_P(ComputeBackendContract, TinyKvShapeIsTheModelPresetsShape) {
  auto spec = model::model_preset("tiny");
  EXPECT_EQ(backend_->kv_shape().layers, spec->layers);
  EXPECT_EQ(backend_->kv_shape().bytes_per_token_per_layer, spec->kv_bytes_per_token_per_layer);
}

INSTANTIATE_TEST_SUITE_P(
    Backends,
    ComputeBackendContract,
    ::testing::Values(BackendCase{"cpu",
                                  [](Clock&) -> std::unique_ptr<ComputeBackend> {
                                    return std::make_unique<CpuBackend>(testing::tiny_weights(5));
                                  }},
                      BackendCase{
                          "modeled",
                          [](Clock& clock) -> std::unique_ptr<ComputeBackend> {
                            model::CostModel cost(*model::model_preset("tiny"),
                                                  *model::hardware_preset("h800"));
                            return std::move(
                                ModeledBackend::create(cost, clock, {.vocab = 512, .seed = 7}).value());
                          }}),
    [](const ::testing::TestParamInfo<BackendCase>& p) { return std::string(p.param.name); });

}  // namespace
}  // namespace dualpath::compute
