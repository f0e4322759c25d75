#include "compute/cpu_model_config.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace dualpath::compute {

int64_t CpuModelConfig::params() const {
  const int64_t d = d_model;
  const int64_t per_layer =
      2 * d + d * q_dim() + 2 * d * kv_dim() + static_cast<int64_t>(q_dim()) * d + 3 * d * ffn_dim;
  return 2 * d * vocab + d + layers * per_layer;
}

Status CpuModelConfig::validate() const {
  if (d_model <= 0 || layers <= 0 || q_heads <= 0 || kv_heads <= 0 || head_dim <= 0 ||
      ffn_dim <= 0 || vocab <= 0) {
    return Status::invalid_argument(fmt::format(
        "cpu model '{}': every dimension must be positive (d_model {}, layers {}, q_heads {}, "
        "kv_heads {}, head_dim {}, ffn_dim {}, vocab {})",
        name, d_model, layers, q_heads, kv_heads, head_dim, ffn_dim, vocab));
  }
  if (q_heads % kv_heads != 0) {
    return Status::invalid_argument(
        fmt::format("cpu model '{}': q_heads {} is not a multiple of kv_heads {} (GQA groups)",
                    name, q_heads, kv_heads));
  }
  if (head_dim % 2 != 0) {
    return Status::invalid_argument(fmt::format(
        "cpu model '{}': head_dim {} must be even (RoPE rotates pairs)", name, head_dim));
  }
  if (!(rope_theta > 0.0f) || !(norm_eps > 0.0f)) {
    return Status::invalid_argument(
        fmt::format("cpu model '{}': rope_theta {} and norm_eps {} must be positive", name,
                    rope_theta, norm_eps));
  }
  return Status::ok();
}

const std::vector<std::string>& cpu_model_preset_names() {
  static const std::vector<std::string> kNames = {"tiny", "small"};
  return kNames;
}

Result<CpuModelConfig> cpu_model_preset(std::string_view name) {
  CpuModelConfig c;
  c.name = std::string(name);
  if (name == "tiny") {
    // ffn 688 = 8/3 * 256 rounded to a multiple of 16 (llama's SwiGLU width rule).
    c.d_model = 256, c.layers = 4, c.q_heads = 8, c.kv_heads = 2, c.head_dim = 32;
    c.ffn_dim = 688, c.vocab = 512;
    return c;
  }
  if (name == "small") {
    c.d_model = 1024, c.layers = 8, c.q_heads = 16, c.kv_heads = 4, c.head_dim = 64;
    c.ffn_dim = 2752, c.vocab = 2048;
    return c;
  }
  return Status::invalid_argument(fmt::format("unknown cpu model preset '{}'; known: {}", name,
                                              fmt::join(cpu_model_preset_names(), ", ")));
}

}  // namespace dualpath::compute
