#include "compute/cpu_backend.h"

#include <fmt/format.h>

#include <cstdint>

namespace dualpath::compute {
namespace {

// The engine's buffers hold the floats the model wrote (or their copies from storage), so viewing
// them as float is reading floats back; alignment is the one thing to check.
Result<std::span<const float>> as_floats(std::span<const std::byte> bytes, std::string_view what) {
  if (reinterpret_cast<uintptr_t>(bytes.data()) % alignof(float) != 0 ||
      bytes.size() % sizeof(float) != 0) {
    return Status::invalid_argument(fmt::format(
        "cpu backend: {} ({} bytes at {}) is not whole, 4-byte aligned floats; align KV "
        "buffers to at least 4 bytes",
        what, bytes.size(), static_cast<const void*>(bytes.data())));
  }
  return std::span<const float>(reinterpret_cast<const float*>(bytes.data()),
                                bytes.size() / sizeof(float));
}

Result<std::span<float>> as_floats(std::span<std::byte> bytes, std::string_view what) {
  DP_ASSIGN_OR_RETURN(auto c, as_floats(std::span<const std::byte>(bytes), what));
  return std::span<float>(const_cast<float*>(c.data()), c.size());
}

Result<std::vector<std::span<const float>>> segments_as_floats(KvLayerView view,
                                                               std::string_view what) {
  std::vector<std::span<const float>> out;
  out.reserve(view.size());
  for (const auto& seg : view) {
    DP_ASSIGN_OR_RETURN(auto f, as_floats(seg, what));
    out.push_back(f);
  }
  return out;
}

}  // namespace

CpuBackend::CpuBackend(std::shared_ptr<const CpuWeights> weights) : model_(std::move(weights)) {}

KvShape CpuBackend::kv_shape() const {
  return {model_.config().layers, model_.config().kv_bytes_per_token_per_layer()};
}

Status CpuBackend::begin_prefill(std::span<const PrefillSequence> batch) {
  passes_.clear();
  if (batch.empty())
    return Status::invalid_argument("cpu backend: begin_prefill of an empty batch");
  for (size_t i = 0; i < batch.size(); ++i) {
    auto pass = model_.begin(batch[i].new_tokens, batch[i].cached_tokens);
    if (!pass.is_ok()) {
      passes_.clear();
      return pass.status().with_context(fmt::format("sequence {} of the batch", i));
    }
    passes_.push_back(std::move(pass).value());
  }
  return Status::ok();
}

Status CpuBackend::prefill_layer(int layer,
                                 std::span<const KvLayerView> cached_kv,
                                 std::span<const std::span<std::byte>> new_kv_out) {
  if (passes_.empty()) {
    return Status::failed_precondition("cpu backend: prefill_layer without begin_prefill");
  }
  if (cached_kv.size() != passes_.size() || new_kv_out.size() != passes_.size()) {
    return Status::invalid_argument(
        fmt::format("cpu backend layer {}: {} cached-KV views and {} outputs for a batch of {}",
                    layer, cached_kv.size(), new_kv_out.size(), passes_.size()));
  }
  for (size_t i = 0; i < passes_.size(); ++i) {
    DP_ASSIGN_OR_RETURN(auto cached, segments_as_floats(cached_kv[i], "cached KV"));
    DP_ASSIGN_OR_RETURN(auto out, as_floats(new_kv_out[i], "new KV output"));
    DP_RETURN_IF_ERROR(passes_[i].forward_layer(layer, KvFloatSegments(cached), out),
                       "sequence {} of the batch", i);
  }
  return Status::ok();
}

Result<std::vector<NextToken>> CpuBackend::finish_prefill() {
  if (passes_.empty()) {
    return Status::failed_precondition("cpu backend: finish_prefill without begin_prefill");
  }
  std::vector<NextToken> out;
  for (size_t i = 0; i < passes_.size(); ++i) {
    auto logits = passes_[i].finish(LogitsMode::kLast);
    if (!logits.is_ok()) {
      return logits.status().with_context(fmt::format("sequence {} of the batch", i));
    }
    NextToken next;
    next.logits = std::move(logits).value();
    next.token = greedy_token(next.logits);
    out.push_back(std::move(next));
  }
  passes_.clear();
  return out;
}

Result<std::vector<NextToken>> CpuBackend::decode_step(std::span<const DecodeSequence> batch) {
  passes_.clear();
  const CpuModelConfig& c = model_.config();
  const auto row_bytes = static_cast<size_t>(c.kv_bytes_per_token_per_layer());
  std::vector<NextToken> out;
  for (size_t i = 0; i < batch.size(); ++i) {
    const DecodeSequence& seq = batch[i];
    if (static_cast<int>(seq.kv_per_layer.size()) != c.layers ||
        seq.new_kv_out.size() != row_bytes * c.layers) {
      return Status::invalid_argument(fmt::format(
          "cpu backend decode, sequence {}: KV for {} layers and a {}-byte output; the model "
          "needs {} layers and {} bytes",
          i, seq.kv_per_layer.size(), seq.new_kv_out.size(), c.layers, row_bytes * c.layers));
    }
    const int32_t tokens[1] = {seq.token};
    auto pass = model_.begin(tokens, seq.context_tokens);
    if (!pass.is_ok()) return pass.status().with_context(fmt::format("decode sequence {}", i));
    for (int l = 0; l < c.layers; ++l) {
      DP_ASSIGN_OR_RETURN(auto cached, segments_as_floats(seq.kv_per_layer[l], "context KV"));
      DP_ASSIGN_OR_RETURN(auto kv_out,
                          as_floats(seq.new_kv_out.subspan(l * row_bytes, row_bytes), "new KV"));
      DP_RETURN_IF_ERROR(pass->forward_layer(l, KvFloatSegments(cached), kv_out),
                         "decode sequence {}", i);
    }
    NextToken next;
    DP_ASSIGN_OR_RETURN(next.logits, pass->finish(LogitsMode::kLast));
    next.token = greedy_token(next.logits);
    out.push_back(std::move(next));
  }
  return out;
}

}  // namespace dualpath::compute
