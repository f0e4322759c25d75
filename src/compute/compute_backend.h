#pragma once
// ComputeBackend: what an engine needs from "the GPU", so the engine code is the same for the CPU
// reference transformer (CpuBackend) and for emulated GPU time (ModeledBackend). DESIGN.md
// compute/, issue 5.
//
// One forward pass over a batch of sequences, layer by layer, so the engine can keep layer l+1's
// KV in flight while layer l computes:
//   begin_prefill(batch)                      // new tokens and cached counts per sequence
//   for l in 0..layers-1:
//     prefill_layer(l, cached_kv[i] for each sequence, new_kv_out[i] for each sequence)
//   finish_prefill() -> next token (and logits, where the backend has them) per sequence
// A decode iteration is one call, decode_step(batch), with every layer's KV of each sequence.
//
// KV layout, in bytes, as the store keeps it (store/block_layout.h, Layer Block = [token][bytes]):
// a sequence's KV of one layer is its tokens' rows in order, kv_shape().bytes_per_token_per_layer
// bytes each; it may come in several segments of whole tokens (the Layer Blocks of consecutive
// Full Blocks), never copied by the caller. What a row holds is the backend's business (CpuBackend:
// fp32 K then V; ModeledBackend: deterministic filler); engines only move and store the bytes.
//
// Threads: a backend is thread-compatible, driven by one engine thread; a pass must be finished
// (or a new begin_prefill issued, which abandons it) before decode_step. Inputs are read during
// the call only; the backend keeps no pointer into caller memory between calls.

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "dualpath/result.h"

namespace dualpath::compute {

struct KvShape {
  int layers = 0;
  int64_t bytes_per_token_per_layer = 0;
};

// One layer's KV of one sequence: segments of whole token rows, in token order.
using KvLayerView = std::span<const std::span<const std::byte>>;

struct PrefillSequence {
  std::span<const int32_t> new_tokens;  // at least one
  int64_t cached_tokens = 0;            // KV rows the engine will pass for each layer
};

struct DecodeSequence {
  int32_t token = 0;                          // the last sampled token, now fed back
  int64_t context_tokens = 0;                 // tokens before it (its position)
  std::span<const KvLayerView> kv_per_layer;  // layers entries, context_tokens rows each
  std::span<std::byte> new_kv_out;            // [layer][bytes_per_token_per_layer]: the token's KV
};

struct NextToken {
  int32_t token = 0;          // greedy
  std::vector<float> logits;  // [vocab] for backends with a real LM head; empty otherwise
};

class ComputeBackend {
 public:
  virtual ~ComputeBackend() = default;

  virtual std::string_view name() const = 0;
  virtual KvShape kv_shape() const = 0;

  // Starts a forward pass over `batch` (at least one sequence). Abandons an unfinished pass.
  // kInvalidArgument for an empty batch, a sequence without new tokens or a bad token id.
  virtual Status begin_prefill(std::span<const PrefillSequence> batch) = 0;

  // Computes layer `layer` (0, 1, ... in order) for every sequence of the pass: cached_kv[i] is
  // sequence i's cached KV of this layer (cached_tokens rows), new_kv_out[i] receives its new
  // tokens' KV of this layer (exactly new_tokens rows). Blocks for the layer's compute time.
  // kFailedPrecondition for a layer out of order or no pass; kInvalidArgument for a size
  // mismatch (nothing is written then).
  virtual Status prefill_layer(int layer,
                               std::span<const KvLayerView> cached_kv,
                               std::span<const std::span<std::byte>> new_kv_out) = 0;

  // After the last layer: each sequence's next token. Ends the pass.
  virtual Result<std::vector<NextToken>> finish_prefill() = 0;

  // One decode iteration for `batch`: writes each sequence's new KV row per layer and returns
  // its next token. Blocks for the iteration's compute time.
  virtual Result<std::vector<NextToken>> decode_step(std::span<const DecodeSequence> batch) = 0;
};

}  // namespace dualpath::compute
