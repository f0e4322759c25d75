#pragma once
// CpuModelConfig: the shape of the CPU reference transformer (llama-style: RMSNorm, RoPE, GQA,
// SwiGLU), and its presets `tiny` and `small`, whose KV bytes per token per layer equal those of
// the model/ presets of the same name (a test holds them together).

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "dualpath/result.h"

namespace dualpath::compute {

struct CpuModelConfig {
  std::string name;
  int d_model = 0;
  int layers = 0;
  int q_heads = 0;
  int kv_heads = 0;  // q_heads must be a multiple (GQA groups)
  int head_dim = 0;  // even (RoPE rotates pairs)
  int ffn_dim = 0;   // SwiGLU hidden width
  int vocab = 0;
  float rope_theta = 10000.0f;
  float norm_eps = 1e-5f;

  int q_dim() const { return q_heads * head_dim; }
  int kv_dim() const { return kv_heads * head_dim; }
  // One token's KV in one layer: K (kv_dim floats, after RoPE) then V (kv_dim floats).
  int64_t kv_floats_per_token_per_layer() const { return 2LL * kv_dim(); }
  int64_t kv_bytes_per_token_per_layer() const {
    return kv_floats_per_token_per_layer() * static_cast<int64_t>(sizeof(float));
  }
  // Parameters (embedding and LM head included).
  int64_t params() const;

  // OK when every dimension is positive, q_heads % kv_heads == 0 and head_dim is even.
  Status validate() const;
};

const std::vector<std::string>& cpu_model_preset_names();
// "tiny": d 256, 4 layers, 8 query heads of 32, 2 KV heads, ffn 688, vocab 512 (512 B
// KV/token/layer). "small": d 1024, 8 layers, 16 heads of 64, 4 KV heads, ffn 2752, vocab 2048
// (2048 B).
Result<CpuModelConfig> cpu_model_preset(std::string_view name);

}  // namespace dualpath::compute
