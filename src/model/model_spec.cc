#include "model/model_spec.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "common/config.h"

namespace dualpath::model {
namespace {

// Sum over j in [0, n) of min(c + 1 + j, cap): the number of keys each new token sees when the
// attention is capped (DSA top-k, sliding window). Closed form, O(1).
double capped_sum(int64_t cached, int64_t n, int64_t cap) {
  if (n <= 0) return 0.0;
  double first = static_cast<double>(cached) + 1.0;  // keys seen by the first new token
  double last = static_cast<double>(cached + n);
  double c = static_cast<double>(cap);
  if (last <= c) return (first + last) * static_cast<double>(n) / 2.0;
  if (first >= c) return c * static_cast<double>(n);
  // Tokens with key count below the cap: first .. c-1, then the rest at c.
  double below = c - first;  // count of tokens strictly below the cap
  double sum_below = (first + (c - 1.0)) * below / 2.0;
  return sum_below + c * (static_cast<double>(n) - below);
}

double uncapped_sum(int64_t cached, int64_t n) {
  if (n <= 0) return 0.0;
  double first = static_cast<double>(cached) + 1.0;
  double last = static_cast<double>(cached + n);
  return (first + last) * static_cast<double>(n) / 2.0;
}

}  // namespace

double ModelSpec::attention_flops_for(int64_t cached, int64_t n) const {
  switch (attention) {
    case AttentionKind::kGqa:
      return 4.0 * q_heads * head_dim * attention_layers * uncapped_sum(cached, n);
    case AttentionKind::kMlaDense:
      return 2.0 * q_heads * mla_pair_dim * layers * uncapped_sum(cached, n);
    case AttentionKind::kMlaSparse:
      return 2.0 * q_heads * mla_pair_dim * layers * capped_sum(cached, n, topk) +
             2.0 * indexer_heads * indexer_dim * layers * uncapped_sum(cached, n);
    case AttentionKind::kGqaSliding:
      return 4.0 * q_heads * head_dim *
             (attention_layers * uncapped_sum(cached, n) +
              sliding_layers * capped_sum(cached, n, sliding_window));
  }
  return 0.0;
}

double ModelSpec::attention_flops_per_token(int64_t ctx) const {
  // One query token that sees `ctx` keys: the n = 1 case with cached = ctx - 1.
  return attention_flops_for(std::max<int64_t>(ctx - 1, 0), 1);
}

double ModelSpec::flops_per_token(int64_t ctx) const {
  return 2.0 * static_cast<double>(active_params) + attention_flops_per_token(ctx);
}

uint64_t ModelSpec::fingerprint() const {
  // FNV-1a over the layout-defining fields; stable across runs and platforms.
  uint64_t h = 1469598103934665603ull;
  auto mix = [&](uint64_t v) {
    for (int i = 0; i < 8; ++i) {
      h ^= (v >> (8 * i)) & 0xff;
      h *= 1099511628211ull;
    }
  };
  for (char c : name) mix(static_cast<unsigned char>(c));
  mix(static_cast<uint64_t>(layers));
  mix(static_cast<uint64_t>(kv_bytes_per_token_per_layer));
  mix(static_cast<uint64_t>(indexer_bytes_per_token_per_layer));
  return h;
}

Status ModelSpec::validate() const {
  if (layers <= 0)
    return Status::invalid_argument(fmt::format("model '{}': layers = {} must be > 0", name, layers));
  if (kv_bytes_per_token_per_layer <= 0)
    return Status::invalid_argument(fmt::format(
        "model '{}': kv_bytes_per_token_per_layer = {} must be > 0", name,
        kv_bytes_per_token_per_layer));
  if (sharded_params > total_params)
    return Status::invalid_argument(fmt::format(
        "model '{}': sharded_params = {} must not exceed total_params = {}", name, sharded_params,
        total_params));
  if (active_params <= 0 || total_params < active_params)
    return Status::invalid_argument(fmt::format(
        "model '{}': active_params = {} and total_params = {} must satisfy 0 < active <= total",
        name, active_params, total_params));
  return Status::ok();
}

double ModelSpec::replicated_weight_bytes() const {
  return static_cast<double>(sharded_params < 0 ? 0 : total_params - sharded_params) *
         weight_bytes_per_param;
}

double ModelSpec::weight_bytes_per_gpu(int group_gpus) const {
  double replicated = replicated_weight_bytes();
  return replicated + (weight_bytes() - replicated) / std::max(group_gpus, 1);
}

namespace {

// Routed-expert parameters: MoE layers x experts x (gate, up, down) x hidden x expert width.
int64_t routed_expert_params(int moe_layers, int experts, int hidden, int expert_width) {
  return static_cast<int64_t>(moe_layers) * experts * 3 * hidden * expert_width;
}

ModelSpec ds_v32_like(std::string name, int layers, int64_t active, int64_t total, int topk,
                      int q_heads, int idx_heads, int idx_dim, int idx_bytes) {
  ModelSpec m;
  m.name = std::move(name);
  m.attention = AttentionKind::kMlaSparse;
  m.layers = layers;
  m.attention_layers = layers;
  m.active_params = active;
  m.total_params = total;
  m.weight_bytes_per_param = 1.0;  // FP8 weights
  // FP8 MLA: 512 FP8 latent + 16 B scales + 64 BF16 rope dims = 656 B (PAPER.md §13.2).
  m.kv_bytes_per_token_per_layer = 656;
  m.indexer_bytes_per_token_per_layer = idx_bytes;
  m.q_heads = q_heads;
  m.mla_pair_dim = 1088;  // 576 (QK: 512 latent + 64 rope) + 512 (PV), absorbed MLA
  m.topk = topk;
  m.indexer_heads = idx_heads;
  m.indexer_dim = idx_dim;
  return m;
}

ModelSpec gqa(std::string name, int layers, int q_heads, int kv_heads, int head_dim,
              int64_t params, double weight_bytes, int kv_elem_bytes) {
  ModelSpec m;
  m.name = std::move(name);
  m.attention = AttentionKind::kGqa;
  m.layers = layers;
  m.attention_layers = layers;
  m.active_params = params;
  m.total_params = params;
  m.weight_bytes_per_param = weight_bytes;
  m.kv_bytes_per_token_per_layer = 2 * kv_heads * head_dim * kv_elem_bytes;
  m.q_heads = q_heads;
  m.head_dim = head_dim;
  return m;
}

}  // namespace

const std::vector<std::string>& model_preset_names() {
  static const std::vector<std::string> kNames = {"ds660b", "ds27b",      "qwen32b", "tiny",
                                                  "small",  "dsv3",       "gptoss120b",
                                                  "qwen3_235b"};
  return kNames;
}

Result<ModelSpec> model_preset(std::string_view name) {
  if (name == "ds660b") {
    // DeepSeek-V3.2: 61 layers, ~37B activated of 671B, DSA top-k 2048, indexer 64 x 128 with
    // FP8 keys + a 4-byte scale (132 B/token/layer), stored and loaded with the MLA cache.
    ModelSpec m =
        ds_v32_like("ds660b", 61, 37'000'000'000, 671'000'000'000, 2048, 128, 64, 128, 132);
    // 58 MoE layers of 256 routed experts (hidden 7168, width 2048): 654 B of the 671 B; the
    // other 17 B are on every GPU.
    m.sharded_params = routed_expert_params(58, 256, 7168, 2048);
    // Hidden 7168, 8 routed experts per token, FP8 dispatch (1 B) + BF16 combine (2 B); with EP
    // over two nodes about half of the experts are on the other node, behind the CNIC.
    m.ep_bytes_per_token_per_layer = 7168 * 8 * 3 / 2;
    return m;
  }
  if (name == "ds27b") {
    // PAPER.md §9 A.2: hidden 2560, 30 layers, 32 heads, 72 routed experts (6 active, 2 shared),
    // indexer 32 x 64, top-k 1024. Parameter counts derived from that shape (docs/calibration.md).
    ModelSpec m = ds_v32_like("ds27b", 30, 4'200'000'000, 27'000'000'000, 1024, 32, 32, 64, 68);
    // 29 MoE layers (1 initial dense layer) of 72 routed experts, hidden 2560, width 1536.
    m.sharded_params = routed_expert_params(29, 72, 2560, 1536);
    return m;
  }
  if (name == "qwen32b") return gqa("qwen32b", 64, 40, 8, 128, 32'500'000'000, 2.0, 2);
  if (name == "tiny") {
    // The live system's CPU model: d=256, 4 layers, 8 query heads of 32, 2 KV heads (GQA), fp32.
    // Parameter count = the CPU model's (src/compute/cpu_model_config.h), so both backends agree.
    return gqa("tiny", 4, 8, 2, 32, 3'033'344, 4.0, 4);
  }
  if (name == "small") return gqa("small", 8, 16, 4, 64, 92'816'384, 4.0, 4);
  if (name == "dsv3") {
    ModelSpec m = ds_v32_like("dsv3", 61, 37'000'000'000, 671'000'000'000, 0, 128, 0, 0, 0);
    m.sharded_params = routed_expert_params(58, 256, 7168, 2048);
    m.attention = AttentionKind::kMlaDense;
    return m;
  }
  if (name == "gptoss120b") {
    // 36 layers alternating full and 128-token sliding attention; 64 query heads of 64, 8 KV
    // heads; FP8 KV. Only the 18 full-attention layers' KV is cached for reuse (PAPER.md §13.1).
    ModelSpec m = gqa("gptoss120b", 18, 64, 8, 64, 5'100'000'000, 1.0, 1);
    m.total_params = 117'000'000'000;
    m.attention = AttentionKind::kGqaSliding;
    m.sliding_layers = 18;
    m.sliding_window = 128;
    return m;
  }
  if (name == "qwen3_235b") {
    ModelSpec m = gqa("qwen3_235b", 94, 64, 4, 128, 22'000'000'000, 1.0, 1);
    m.total_params = 235'000'000'000;
    return m;
  }
  std::string hint = closest_match(name, model_preset_names());
  return Status::invalid_argument(fmt::format(
      "unknown model '{}'; use one of {}{}", name, fmt::join(model_preset_names(), ", "),
      hint.empty() ? "" : fmt::format(" (did you mean '{}'?)", hint)));
}

}  // namespace dualpath::model
