#pragma once
// ModelSpec: what the cost model and the KV layout need to know about a model (DESIGN.md model/).
// Presets (PAPER.md §9, §13): ds660b (DeepSeek-V3.2), ds27b (the paper's downscaled V3.2),
// qwen32b (Qwen2.5-32B), tiny / small (the live system's CPU transformers), and the other Table-1
// rows (dsv3, gptoss120b, qwen3_235b) so that `dualpath table1` covers the whole table.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "dualpath/result.h"

namespace dualpath::model {

enum class AttentionKind {
  kGqa,         // grouped-query attention over the whole context
  kMlaDense,    // absorbed MLA over the whole context (DeepSeek-V3)
  kMlaSparse,   // MLA over the top-k selected tokens + a lightning indexer over the whole context
  kGqaSliding,  // GQA where `sliding_layers` layers see only `sliding_window` tokens (GPT-OSS)
};

struct ModelSpec {
  std::string name;
  AttentionKind attention = AttentionKind::kGqa;
  int layers = 0;
  int64_t active_params = 0;  // parameters touched per token (MoE: activated)
  int64_t total_params = 0;   // all parameters (weights resident in HBM)
  // Parameters spread over the engine group's GPUs: the routed experts under expert parallelism.
  // The rest (attention, dense layers, shared experts, embeddings) is replicated on every GPU, as
  // DP attention does. -1: all of them (the dense presets, whose group is taken to shard them).
  int64_t sharded_params = -1;
  double weight_bytes_per_param = 1.0;  // FP8 = 1, BF16 = 2

  // KV cache, bytes per token per layer, as stored and loaded.
  int kv_bytes_per_token_per_layer = 0;      // the attention cache (MLA latent+rope, or K+V)
  int indexer_bytes_per_token_per_layer = 0;  // DSA indexer keys (0 if none); loaded too

  // Attention FLOP shape. GQA: 4 * q_heads * head_dim per (query, key) pair per layer.
  // MLA: 2 * q_heads * (qk_dim + v_dim) per pair per layer (absorbed: 576 + 512 = 1088).
  int q_heads = 0;
  int head_dim = 0;
  int mla_pair_dim = 0;     // 1088 for DeepSeek MLA
  int topk = 0;             // DSA: tokens each query attends to
  int indexer_heads = 0;    // DSA lightning indexer
  int indexer_dim = 0;
  int attention_layers = 0;  // layers with full attention (= layers unless sliding)
  int sliding_layers = 0;
  int sliding_window = 0;
  // Expert-parallel dispatch + combine bytes per token per layer that cross the compute network
  // (the high-priority "model" traffic class on each CNIC; 0 for models without cross-node EP).
  int64_t ep_bytes_per_token_per_layer = 0;

  // Stored bytes per token per layer (what storage, DRAM and the CNIC move).
  int64_t stored_bytes_per_token_per_layer() const {
    return kv_bytes_per_token_per_layer + indexer_bytes_per_token_per_layer;
  }
  int64_t stored_bytes_per_token() const { return stored_bytes_per_token_per_layer() * layers; }
  // The attention cache alone (what PAPER.md Table 1 counts).
  int64_t kv_bytes_per_token() const {
    return static_cast<int64_t>(kv_bytes_per_token_per_layer) * layers;
  }
  double weight_bytes() const { return static_cast<double>(total_params) * weight_bytes_per_param; }
  // Weight bytes every GPU holds whole, whatever the group size (total - sharded).
  double replicated_weight_bytes() const;
  // Weight bytes resident on each GPU of a group of `group_gpus`: the replicated part whole, the
  // sharded part divided.
  double weight_bytes_per_gpu(int group_gpus) const;

  // FLOPs of one query token at context length ctx (the tokens before it, itself included):
  // 2 * active_params (projections, FFN/MoE) + attention.
  double flops_per_token(int64_t ctx) const;
  double attention_flops_per_token(int64_t ctx) const;
  // Sum of attention FLOPs over `n` new tokens that follow `cached` tokens (closed form).
  double attention_flops_for(int64_t cached, int64_t n) const;
  // A fingerprint over the fields that change the meaning of stored KV (salts block keys).
  uint64_t fingerprint() const;

  Status validate() const;
};

// Names accepted by model_preset(), for help texts and "did you mean" hints.
const std::vector<std::string>& model_preset_names();
Result<ModelSpec> model_preset(std::string_view name);

}  // namespace dualpath::model
