#pragma once
// CpuWeights: the fp32 parameters of the CPU reference transformer, drawn from a seed or read from
// a safetensors file. Matrices are stored [in][out] row-major (y = x W), the layout the matmul
// kernel streams; safetensors files use the Hugging Face llama names and [out][in] shapes, so a
// float32 llama checkpoint of a matching shape loads as is.

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "compute/cpu_model_config.h"
#include "compute/safetensors.h"
#include "dualpath/result.h"

namespace dualpath::compute {

struct CpuLayerWeights {
  std::vector<float> attn_norm;  // [d]
  std::vector<float> wq;         // [d][q_dim]
  std::vector<float> wk;         // [d][kv_dim]
  std::vector<float> wv;         // [d][kv_dim]
  std::vector<float> wo;         // [q_dim][d]
  std::vector<float> ffn_norm;   // [d]
  std::vector<float> w_gate;     // [d][ffn]
  std::vector<float> w_up;       // [d][ffn]
  std::vector<float> w_down;     // [ffn][d]
};

// Immutable once built: CpuModel instances share one through std::shared_ptr<const CpuWeights>.
struct CpuWeights {
  CpuModelConfig config;
  std::vector<float> embed;  // [vocab][d]
  std::vector<CpuLayerWeights> layers;
  std::vector<float> final_norm;  // [d]
  std::vector<float> lm_head;     // [d][vocab]
};

// Deterministic weights: SplitMix64 streams, one per tensor, seeded from (seed, tensor index);
// matrices uniform with variance 1/fan_in, norms 1 +- 0.1, embeddings uniform in [-1, 1).
// The same (config, seed) gives bit-identical weights on every platform.
Result<std::shared_ptr<const CpuWeights>> random_weights(const CpuModelConfig& config,
                                                         uint64_t seed);

// Reads weights for `config` from a safetensors file with the Hugging Face llama names
// (model.embed_tokens.weight, model.layers.N.self_attn.q_proj.weight, ..., model.norm.weight,
// lm_head.weight). Errors name the file and the missing or misshapen tensor.
Result<std::shared_ptr<const CpuWeights>> load_weights(const std::string& path,
                                                       const CpuModelConfig& config);

// The same from a parsed file (`origin` names it in errors).
Result<std::shared_ptr<const CpuWeights>> weights_from(SafetensorsFile file,
                                                       const std::string& origin,
                                                       const CpuModelConfig& config);

// The built-in model's trained weights, carried in the binary (models/tiny.safetensors, trained
// by scripts/train_tiny.py on the SQLite documentation): parsed once, shared. kNotFound for a
// model that has none (only `tiny` does).
Result<std::shared_ptr<const CpuWeights>> builtin_weights(const CpuModelConfig& config);
// The embedded file's bytes (empty when the build carries none) and its __metadata__.
std::span<const std::byte> builtin_weights_file();

// Writes `weights` in the format load_weights reads; the config goes in __metadata__.
Status save_weights(const std::string& path, const CpuWeights& weights);

}  // namespace dualpath::compute
