#include "compute/cpu_model.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "compute/cpu_kernels.h"

namespace dualpath::compute {

int32_t greedy_token(std::span<const float> logits) {
  if (logits.empty()) return -1;
  return static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

// Activations of the pass (sized at begin) and the per-layer context scratch (grown on demand).
struct CpuPass::Scratch {
  std::vector<float> x;       // [n][d] the residual stream
  std::vector<float> xn;      // [n][d] normed
  std::vector<float> q;       // [n][q_dim]
  std::vector<float> k;       // [n][kv_dim]
  std::vector<float> v;       // [n][kv_dim]
  std::vector<float> attn;    // [n][q_dim]
  std::vector<float> proj;    // [n][d]
  std::vector<float> gate;    // [n][ffn]
  std::vector<float> up;      // [n][ffn]
  std::vector<float> cos;     // [n][head_dim / 2]
  std::vector<float> sin;     // [n][head_dim / 2]
  std::vector<float> kt;      // [kv_heads][head_dim][ctx]
  std::vector<float> vc;      // [kv_heads][ctx][head_dim]
  std::vector<float> scores;  // attention scratch, sized by kernels::AttentionArgs
  std::vector<float> q_block;
  std::vector<float> o_block;
  std::vector<float> row_sum;
  std::vector<kernels::KvRow> rows;  // [ctx] where each context token's K and V are
};

CpuPass::CpuPass(std::shared_ptr<const CpuWeights> weights, int64_t n, int64_t cached)
    : weights_(std::move(weights)), n_(n), cached_(cached), s_(std::make_unique<Scratch>()) {}

CpuPass::~CpuPass() = default;
CpuPass::CpuPass(CpuPass&&) noexcept = default;
CpuPass& CpuPass::operator=(CpuPass&&) noexcept = default;

Status CpuPass::forward_layer(int layer, KvFloatSegments cached_kv, std::span<float> new_kv_out) {
  const CpuModelConfig& c = weights_->config;
  if (finished_ || layer != next_layer_) {
    return Status::failed_precondition(fmt::format(
        "cpu model '{}': forward_layer({}) called but the pass expects layer {}{}; run layers "
        "0..{} in order, then finish()",
        c.name, layer, next_layer_, finished_ ? " (the pass is finished)" : "", c.layers - 1));
  }
  const int64_t row = c.kv_floats_per_token_per_layer();
  int64_t cached_floats = 0;
  for (const auto& seg : cached_kv) {
    if (static_cast<int64_t>(seg.size()) % row != 0) {
      return Status::invalid_argument(fmt::format(
          "cpu model '{}' layer {}: a cached KV segment of {} floats is not whole tokens of {} "
          "floats (K then V)",
          c.name, layer, seg.size(), row));
    }
    cached_floats += static_cast<int64_t>(seg.size());
  }
  if (cached_floats != cached_ * row) {
    return Status::invalid_argument(fmt::format(
        "cpu model '{}' layer {}: cached KV holds {} tokens but the pass began with {} cached "
        "tokens",
        c.name, layer, cached_floats / row, cached_));
  }
  if (static_cast<int64_t>(new_kv_out.size()) != n_ * row) {
    return Status::invalid_argument(fmt::format(
        "cpu model '{}' layer {}: the new-KV output holds {} floats but {} new tokens need {}",
        c.name, layer, new_kv_out.size(), n_, n_ * row));
  }

  const CpuLayerWeights& w = weights_->layers[layer];
  Scratch& s = *s_;
  const int64_t d = c.d_model;
  const int64_t kv_dim = c.kv_dim();
  const int64_t hd = c.head_dim;

  // Attention block.
  kernels::rms_norm(s.x.data(), n_, d, w.attn_norm.data(), c.norm_eps, s.xn.data());
  kernels::matmul(s.xn.data(), n_, d, w.wq.data(), c.q_dim(), s.q.data());
  kernels::matmul(s.xn.data(), n_, d, w.wk.data(), kv_dim, s.k.data());
  kernels::matmul(s.xn.data(), n_, d, w.wv.data(), kv_dim, s.v.data());
  kernels::rope(s.q.data(), n_, c.q_heads, c.head_dim, c.q_dim(), s.cos.data(), s.sin.data());
  kernels::rope(s.k.data(), n_, c.kv_heads, c.head_dim, kv_dim, s.cos.data(), s.sin.data());
  for (int64_t t = 0; t < n_; ++t) {
    float* dst = new_kv_out.data() + t * row;
    std::memcpy(dst, s.k.data() + t * kv_dim, kv_dim * sizeof(float));
    std::memcpy(dst + kv_dim, s.v.data() + t * kv_dim, kv_dim * sizeof(float));
  }

  // The context (cached rows, then the new ones) regrouped per KV head: keys transposed so a
  // query's scores run over contiguous memory, values token-major.
  const int64_t ctx = cached_ + n_;
  s.kt.resize(static_cast<size_t>(kv_dim * ctx));
  s.vc.resize(static_cast<size_t>(kv_dim * ctx));
  const int64_t block_rows = kernels::attention_block_tokens() * (c.q_heads / c.kv_heads);
  s.scores.resize(static_cast<size_t>(block_rows * ctx));
  s.q_block.resize(static_cast<size_t>(block_rows * hd));
  s.o_block.resize(s.q_block.size());
  s.row_sum.resize(static_cast<size_t>(block_rows));
  s.rows.clear();
  for (const auto& seg : cached_kv) {
    for (size_t off = 0; off < seg.size(); off += static_cast<size_t>(row)) {
      s.rows.push_back({seg.data() + off, seg.data() + off + kv_dim});
    }
  }
  for (int64_t t = 0; t < n_; ++t)
    s.rows.push_back({s.k.data() + t * kv_dim, s.v.data() + t * kv_dim});
  kernels::gather_context(s.rows.data(), ctx, c.kv_heads, c.head_dim, s.kt.data(), s.vc.data());

  kernels::attention({.q = s.q.data(),
                      .kt = s.kt.data(),
                      .v = s.vc.data(),
                      .out = s.attn.data(),
                      .scores = s.scores.data(),
                      .q_block = s.q_block.data(),
                      .o_block = s.o_block.data(),
                      .row_sum = s.row_sum.data(),
                      .n = n_,
                      .cached = cached_,
                      .ctx_stride = ctx,
                      .q_heads = c.q_heads,
                      .kv_heads = c.kv_heads,
                      .head_dim = c.head_dim});
  kernels::matmul(s.attn.data(), n_, c.q_dim(), w.wo.data(), d, s.proj.data());
  for (size_t i = 0; i < s.x.size(); ++i) s.x[i] += s.proj[i];

  // SwiGLU MLP block.
  kernels::rms_norm(s.x.data(), n_, d, w.ffn_norm.data(), c.norm_eps, s.xn.data());
  kernels::matmul(s.xn.data(), n_, d, w.w_gate.data(), c.ffn_dim, s.gate.data());
  kernels::matmul(s.xn.data(), n_, d, w.w_up.data(), c.ffn_dim, s.up.data());
  kernels::swiglu(s.gate.data(), s.up.data(), n_ * c.ffn_dim);
  kernels::matmul(s.gate.data(), n_, c.ffn_dim, w.w_down.data(), d, s.proj.data());
  for (size_t i = 0; i < s.x.size(); ++i) s.x[i] += s.proj[i];

  ++next_layer_;
  return Status::ok();
}

Status CpuPass::forward_layer(int layer,
                              std::span<const float> cached_kv,
                              std::span<float> new_kv_out) {
  const std::span<const float> one[1] = {cached_kv};
  return forward_layer(layer, KvFloatSegments(one), new_kv_out);
}

Result<std::vector<float>> CpuPass::forward_layer(int layer, std::span<const float> cached_kv) {
  std::vector<float> out(
      static_cast<size_t>(n_ * weights_->config.kv_floats_per_token_per_layer()));
  DP_RETURN_IF_ERROR(forward_layer(layer, cached_kv, std::span<float>(out)));
  return out;
}

Result<std::vector<float>> CpuPass::finish(LogitsMode mode) {
  const CpuModelConfig& c = weights_->config;
  if (finished_ || next_layer_ != c.layers) {
    return Status::failed_precondition(fmt::format(
        "cpu model '{}': finish() {}; run layers 0..{} first, and finish once", c.name,
        finished_ ? "called twice" : fmt::format("after {} of {} layers", next_layer_, c.layers),
        c.layers - 1));
  }
  finished_ = true;
  const int64_t d = c.d_model;
  const int64_t first = mode == LogitsMode::kLast ? n_ - 1 : 0;
  const int64_t rows = n_ - first;
  Scratch& s = *s_;
  kernels::rms_norm(s.x.data() + first * d, rows, d, weights_->final_norm.data(), c.norm_eps,
                    s.xn.data());
  std::vector<float> logits(static_cast<size_t>(rows * c.vocab));
  kernels::matmul(s.xn.data(), rows, d, weights_->lm_head.data(), c.vocab, logits.data());
  return logits;
}

CpuModel::CpuModel(std::shared_ptr<const CpuWeights> weights) : weights_(std::move(weights)) {}

Result<CpuPass> CpuModel::begin(std::span<const int32_t> new_tokens, int64_t cached_tokens) const {
  const CpuModelConfig& c = weights_->config;
  if (new_tokens.empty() || cached_tokens < 0) {
    return Status::invalid_argument(fmt::format(
        "cpu model '{}': a pass needs at least one new token and cached_tokens >= 0 (got {} new, "
        "{} cached)",
        c.name, new_tokens.size(), cached_tokens));
  }
  for (size_t i = 0; i < new_tokens.size(); ++i) {
    if (new_tokens[i] < 0 || new_tokens[i] >= c.vocab) {
      return Status::invalid_argument(
          fmt::format("cpu model '{}': new token {} is id {}, outside the vocabulary [0, {})",
                      c.name, i, new_tokens[i], c.vocab));
    }
  }
  const auto n = static_cast<int64_t>(new_tokens.size());
  CpuPass pass(weights_, n, cached_tokens);
  CpuPass::Scratch& s = *pass.s_;
  const size_t nd = static_cast<size_t>(n * c.d_model);
  s.x.resize(nd);
  s.xn.resize(nd);
  s.proj.resize(nd);
  s.q.resize(static_cast<size_t>(n * c.q_dim()));
  s.attn.resize(s.q.size());
  s.k.resize(static_cast<size_t>(n * c.kv_dim()));
  s.v.resize(s.k.size());
  s.gate.resize(static_cast<size_t>(n * c.ffn_dim));
  s.up.resize(s.gate.size());
  for (int64_t t = 0; t < n; ++t) {
    std::memcpy(s.x.data() + t * c.d_model,
                weights_->embed.data() + static_cast<int64_t>(new_tokens[t]) * c.d_model,
                c.d_model * sizeof(float));
  }
  // RoPE angles in double, so a position's rotation is the same float whatever chunk it is in.
  const int half = c.head_dim / 2;
  s.cos.resize(static_cast<size_t>(n * half));
  s.sin.resize(s.cos.size());
  for (int i = 0; i < half; ++i) {
    const double inv_freq = std::pow(static_cast<double>(c.rope_theta), -2.0 * i / c.head_dim);
    for (int64_t t = 0; t < n; ++t) {
      const double angle = static_cast<double>(cached_tokens + t) * inv_freq;
      s.cos[t * half + i] = static_cast<float>(std::cos(angle));
      s.sin[t * half + i] = static_cast<float>(std::sin(angle));
    }
  }
  return pass;
}

Result<ForwardResult> CpuModel::prefill(std::span<const std::span<const float>> cached_kv_per_layer,
                                        std::span<const int32_t> new_tokens,
                                        int64_t cached_tokens,
                                        LogitsMode mode) const {
  const CpuModelConfig& c = weights_->config;
  if (static_cast<int>(cached_kv_per_layer.size()) != c.layers &&
      !(cached_tokens == 0 && cached_kv_per_layer.empty())) {
    return Status::invalid_argument(
        fmt::format("cpu model '{}': prefill got cached KV for {} layers, the model has {}", c.name,
                    cached_kv_per_layer.size(), c.layers));
  }
  DP_ASSIGN_OR_RETURN(CpuPass pass, begin(new_tokens, cached_tokens));
  ForwardResult out;
  out.new_kv.resize(c.layers);
  for (int l = 0; l < c.layers; ++l) {
    const std::span<const float> cached =
        cached_kv_per_layer.empty() ? std::span<const float>() : cached_kv_per_layer[l];
    DP_ASSIGN_OR_RETURN(out.new_kv[l], pass.forward_layer(l, cached));
  }
  DP_ASSIGN_OR_RETURN(out.logits, pass.finish(mode));
  return out;
}

Result<ForwardResult> CpuModel::decode(std::span<const std::span<const float>> kv_per_layer,
                                       int32_t token) const {
  const CpuModelConfig& c = weights_->config;
  if (static_cast<int>(kv_per_layer.size()) != c.layers) {
    return Status::invalid_argument(
        fmt::format("cpu model '{}': decode got KV for {} layers, the model has {}", c.name,
                    kv_per_layer.size(), c.layers));
  }
  const int64_t context =
      static_cast<int64_t>(kv_per_layer[0].size()) / c.kv_floats_per_token_per_layer();
  const int32_t tokens[1] = {token};
  return prefill(kv_per_layer, tokens, context, LogitsMode::kLast);
}

}  // namespace dualpath::compute
