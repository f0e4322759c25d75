#pragma once
// CpuModel: the reference llama-style transformer (fp32, deterministic) that really consumes and
// produces KV, so that the KV an engine loads from storage decides its output (issue 5 item 1).
//
// KV layout (the store's Layer Block layout, [token][bytes] within one layer):
//   one token, one layer = K (kv_heads * head_dim floats, RoPE applied) then V (same size);
//   a layer's KV for a sequence = those rows in token order, as one span or as several segments
//   of whole tokens (e.g. the Layer Blocks of consecutive Full Blocks, no copy).
// Positions are implicit: a pass over n new tokens after `cached_tokens` cached ones puts them at
// positions cached_tokens .. cached_tokens + n - 1.
//
// Two ways to run a prefill, bit-identical by construction (prefill() is begin + every
// forward_layer + finish):
//   auto pass = model.begin(tokens, cached);           // embeds the new tokens
//   for l: pass->forward_layer(l, cached_kv[l], out[l])  // layer by layer, as the KV arrives
//   auto logits = pass->finish();
// A decode step is a pass of one token.
//
// Threads: CpuModel is immutable after construction and thread-safe; any number of passes may
// run at once on different threads. A CpuPass is thread-compatible (one engine thread at a time).
// Weights are shared read-only: many CpuModel instances may hold the same CpuWeights.

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "compute/cpu_model_config.h"
#include "compute/cpu_weights.h"
#include "dualpath/result.h"

namespace dualpath::compute {

// A layer's cached KV as segments of whole tokens, in token order.
using KvFloatSegments = std::span<const std::span<const float>>;

enum class LogitsMode {
  kLast,  // the last new token's logits: [vocab]
  kAll,   // every new token's logits: [n][vocab]
};

// The index of the largest logit; the lowest index wins a tie. -1 for an empty span.
int32_t greedy_token(std::span<const float> logits);

struct ForwardResult {
  std::vector<std::vector<float>> new_kv;  // per layer: [n][2 * kv_dim]
  std::vector<float> logits;               // per LogitsMode
};

// One forward pass over n new tokens. Move-only; holds its activations and scratch.
class CpuPass {
 public:
  CpuPass(CpuPass&&) noexcept;
  CpuPass& operator=(CpuPass&&) noexcept;
  CpuPass(const CpuPass&) = delete;
  CpuPass& operator=(const CpuPass&) = delete;
  ~CpuPass();

  int64_t new_tokens() const { return n_; }
  int64_t cached_tokens() const { return cached_; }
  // The layer forward_layer expects next (layers() once every layer ran).
  int next_layer() const { return next_layer_; }

  // Runs layer `layer` (0, 1, ... in order) over the cached KV of that layer (cached_tokens rows)
  // and writes the new tokens' KV of that layer into `new_kv_out` (new_tokens rows).
  // Errors: kFailedPrecondition for a layer out of order; kInvalidArgument when the cached KV or
  // the output does not hold exactly the expected number of floats (nothing is computed then).
  Status forward_layer(int layer, KvFloatSegments cached_kv, std::span<float> new_kv_out);
  Status forward_layer(int layer, std::span<const float> cached_kv, std::span<float> new_kv_out);
  Result<std::vector<float>> forward_layer(int layer, std::span<const float> cached_kv);

  // After the last layer: the final norm and LM head. kFailedPrecondition before that, or when
  // called twice.
  Result<std::vector<float>> finish(LogitsMode mode = LogitsMode::kLast);

 private:
  friend class CpuModel;
  struct Scratch;
  CpuPass(std::shared_ptr<const CpuWeights> weights, int64_t n, int64_t cached);

  // Co-owned with the CpuModel that began the pass (and its other passes), so a pass stays valid
  // if the model object goes first.
  std::shared_ptr<const CpuWeights> weights_;
  int64_t n_ = 0;
  int64_t cached_ = 0;
  int next_layer_ = 0;
  bool finished_ = false;
  std::unique_ptr<Scratch> s_;
};

class CpuModel {
 public:
  // `weights` is shared read-only with every other holder (other models, passes).
  explicit CpuModel(std::shared_ptr<const CpuWeights> weights);

  const CpuModelConfig& config() const { return weights_->config; }
  const std::shared_ptr<const CpuWeights>& weights() const { return weights_; }

  // Starts a pass over `new_tokens` (at least one, each in [0, vocab)) that follow
  // `cached_tokens` >= 0 tokens whose KV the caller will pass layer by layer.
  Result<CpuPass> begin(std::span<const int32_t> new_tokens, int64_t cached_tokens) const;

  // The whole prompt in one call: `cached_kv_per_layer` has config().layers entries (each
  // cached_tokens rows; may all be empty when cached_tokens is 0).
  Result<ForwardResult> prefill(std::span<const std::span<const float>> cached_kv_per_layer,
                                std::span<const int32_t> new_tokens,
                                int64_t cached_tokens,
                                LogitsMode mode = LogitsMode::kLast) const;

  // One decode step: `token` at position kv_per_layer[l].size() / row floats (the context).
  // Returns the token's KV per layer and its logits.
  Result<ForwardResult> decode(std::span<const std::span<const float>> kv_per_layer,
                               int32_t token) const;

 private:
  std::shared_ptr<const CpuWeights> weights_;
};

}  // namespace dualpath::compute
