#include "compute/modeled_backend.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <vector>

#include "compute/kv_filler.h"
#include "model/hardware_spec.h"
#include "model/model_spec.h"

namespace dualpath::compute {
namespace {

// Virtual time for the tests: sleep_until jumps straight to the deadline, so the backend's waits
// take no real time and now() shows exactly how long it waited. Honours Clock's contract (after
// sleep_until returns, now() >= deadline).
class JumpClock final : public Clock {
 public:
  Duration now() const override { return Duration(now_ns_.load(std::memory_order_acquire)); }
  void sleep_until(Duration deadline) override {
    // acq_rel: pairs with the acquire in now() on any thread.
    int64_t cur = now_ns_.load(std::memory_order_acquire);
    while (cur < deadline.count() &&
           !now_ns_.compare_exchange_weak(cur, deadline.count(), std::memory_order_acq_rel)) {
    }
  }
  void advance(Duration d) { now_ns_.fetch_add(d.count(), std::memory_order_acq_rel); }

 private:
  std::atomic<int64_t> now_ns_{0};
};

model::CostModel cost(const char* model) {
  return model::CostModel(*model::model_preset(model), *model::hardware_preset("h800"));
}

std::vector<int32_t> iota_tokens(int64_t n, int32_t first) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (auto& x : t) x = first++;
  return t;
}

TEST(ModeledBackend, EachLayerWaitsItsShareOfTheCostModelPassTime) {
  JumpClock clock;
  auto backend = ModeledBackend::create(cost("ds660b"), clock, {.kv_scale = 1.0 / 16});
  ASSERT_TRUE(backend.is_ok()) << backend.status().to_string();
  ModeledBackend& b = **backend;
  const int layers = 61;
  ASSERT_EQ(b.kv_shape().layers, layers);
  EXPECT_EQ(b.kv_bytes_per_token_per_layer(), 49);  // round((656 + 132) / 16)

  const auto t0 = iota_tokens(100, 1), t1 = iota_tokens(30, 5);
  const PrefillSequence batch[2] = {{t0, 4000}, {t1, 0}};
  ASSERT_TRUE(b.begin_prefill(batch).is_ok());
  const model::PrefillWork work[2] = {{4000, 100}, {0, 30}};
  const Duration layer = from_seconds(b.cost_model().prefill_s(work, 1) / layers);
  EXPECT_EQ(b.layer_time(), layer);
  EXPECT_GT(layer, Duration(0));

  const auto row = static_cast<size_t>(b.kv_bytes_per_token_per_layer());
  std::vector<std::byte> cached0(4000 * row), out0(100 * row), out1(30 * row);
  const std::span<const std::byte> seg0[1] = {cached0};
  const KvLayerView views[2] = {KvLayerView(seg0), KvLayerView()};
  const std::span<std::byte> outs[2] = {out0, out1};
  for (int l = 0; l < layers; ++l) {
    const Duration before = clock.now();
    ASSERT_TRUE(b.prefill_layer(l, views, outs).is_ok()) << l;
    EXPECT_EQ(clock.now() - before, layer) << "layer " << l;
    if (l == 10)
      clock.advance(std::chrono::milliseconds(3));  // late KV: the next layer starts late
  }
  EXPECT_EQ(clock.now(), layers * layer + std::chrono::milliseconds(3));
  auto next = b.finish_prefill();
  ASSERT_TRUE(next.is_ok());
  ASSERT_EQ(next->size(), 2u);
  EXPECT_TRUE(next->at(0).logits.empty());
  EXPECT_GE(next->at(0).token, 0);
  EXPECT_LT(next->at(0).token, 32000);
}

TEST(ModeledBackend, DecodeWaitsTheCostModelStepTimeAndWritesEveryLayer) {
  JumpClock clock;
  auto backend = ModeledBackend::create(cost("qwen32b"), clock, {.decode_ep_size = 1});
  ASSERT_TRUE(backend.is_ok());
  ModeledBackend& b = **backend;
  const auto row = static_cast<size_t>(b.kv_bytes_per_token_per_layer());
  const int layers = b.kv_shape().layers;
  std::vector<std::byte> ctx(10 * row);
  const std::span<const std::byte> seg[1] = {ctx};
  std::vector<KvLayerView> per_layer(static_cast<size_t>(layers), KvLayerView(seg));
  std::vector<std::byte> out_a(layers * row), out_b(layers * row);
  const DecodeSequence batch[2] = {{7, 10, per_layer, out_a}, {7, 10, per_layer, out_b}};
  auto r = b.decode_step(batch);
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_EQ(clock.now(), from_seconds(b.cost_model().decode_step_s(2, 22, 1)));
  EXPECT_EQ(r->at(0).token, r->at(1).token);
  EXPECT_EQ(out_a, out_b);
  std::vector<std::byte> want(row);
  fill_kv_row(want, 0, 7, 10, layers - 1);
  EXPECT_TRUE(std::equal(want.begin(), want.end(), out_a.end() - static_cast<ptrdiff_t>(row)));
}

TEST(ModeledBackend, RejectsBadOptionsAndMisSizedKv) {
  JumpClock clock;
  EXPECT_TRUE(
      ModeledBackend::create(cost("tiny"), clock, {.kv_scale = 0}).status().is_invalid_argument());
  auto backend = ModeledBackend::create(cost("tiny"), clock);
  ASSERT_TRUE(backend.is_ok());
  const auto t = iota_tokens(2, 0);
  const PrefillSequence batch[1] = {{t, 3}};
  ASSERT_TRUE((*backend)->begin_prefill(batch).is_ok());
  std::vector<std::byte> cached(2 * 512), out(2 * 512);  // one cached row short
  const std::span<const std::byte> seg[1] = {cached};
  const KvLayerView views[1] = {KvLayerView(seg)};
  const std::span<std::byte> outs[1] = {out};
  auto s = (*backend)->prefill_layer(0, views, outs);
  EXPECT_TRUE(s.is_invalid_argument()) << s.to_string();
  EXPECT_EQ(clock.now(), Duration(0));
}

}  // namespace
}  // namespace dualpath::compute
