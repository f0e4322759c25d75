#pragma once
// ModeledBackend: emulated GPU time (issue 5 item 2). It "computes" a prefill layer or a decode
// iteration by waiting, on a Clock, the time model::CostModel gives for it, so one CPU machine can
// play a GPU cluster: with a DilatedClock every emulated second takes `dilation` real seconds.
//
//   pass time    = CostModel::prefill_s(the batch's (cached, new) pairs, prefill_ep_size)
//   layer time   = pass time / layers (each prefill_layer waits one, from the moment it is called:
//                  a layer whose KV arrives late starts late, as on a GPU)
//   decode time  = CostModel::decode_step_s(batch, context tokens summed, decode_ep_size)
//
// KV rows are `kv_bytes_per_token_per_layer()` bytes: the ModelSpec's stored bytes (KV + indexer)
// times `kv_scale` (e.g. 1/16 to carry DS 660B's KV shape with fewer bytes), filled by
// fill_kv_row(seed, token, position, layer). The output token of a prefill is a digest of every
// KV row of the last layer, cached and new, in order (when `digest_kv`): wrong or missing cached
// bytes change it, and a prefix loaded from storage gives the same token as recomputing it. A
// decode step's token is the same digest over its context's last-layer rows and its own (kept
// incrementally across the steps of one sequence), so decoding continues exactly as a prefill of
// the sequence so far would: a decode moved to another engine, which prefills what was generated
// (a migration), carries on with the same tokens, as a real model's would. Without `digest_kv`
// both depend on (seed, last token, position) only.
//
// Thread-compatible (one engine thread); the clock is shared and thread-safe.

#include <cstdint>
#include <memory>
#include <vector>

#include "common/clock.h"
#include "compute/compute_backend.h"
#include "model/cost_model.h"

namespace dualpath::compute {

struct ModeledOptions {
  double kv_scale = 1.0;   // > 0; rows are max(1, round(stored bytes * kv_scale)) bytes
  int prefill_ep_size = 1;  // PE GPUs running a pass together (CostModel::prefill_s)
  int decode_ep_size = 1;   // DE GPUs sharing the weights (CostModel::decode_step_s)
  int32_t vocab = 32000;   // emitted token ids are in [0, vocab)
  uint64_t seed = 0;       // salts the filler bytes and the tokens
  bool digest_kv = true;   // fold the last layer's KV into the prefill token (reads it all)

  Status validate() const;
};

class ModeledBackend final : public ComputeBackend {
 public:
  // `clock` must outlive the backend.
  static Result<std::unique_ptr<ModeledBackend>> create(model::CostModel cost,
                                                        Clock& clock,
                                                        ModeledOptions options = {});

  std::string_view name() const override { return "modeled"; }
  KvShape kv_shape() const override;
  int64_t kv_bytes_per_token_per_layer() const { return row_bytes_; }
  const model::CostModel& cost_model() const { return cost_; }

  Status begin_prefill(std::span<const PrefillSequence> batch) override;
  Status prefill_layer(int layer,
                       std::span<const KvLayerView> cached_kv,
                       std::span<const std::span<std::byte>> new_kv_out) override;
  Result<std::vector<NextToken>> finish_prefill() override;
  Result<std::vector<NextToken>> decode_step(std::span<const DecodeSequence> batch) override;

  // The emulated time one prefill_layer of the current pass waits (zero without a pass).
  Duration layer_time() const { return layer_time_; }
  // The emulated time of one decode iteration of this shape.
  Duration decode_time(int batch, int64_t context_tokens_sum) const;

 private:
  ModeledBackend(model::CostModel cost, Clock& clock, ModeledOptions options);

  struct Sequence {
    std::vector<int32_t> tokens;
    int64_t cached = 0;
    uint64_t digest = 0;
  };

  model::CostModel cost_;
  Clock& clock_;
  ModeledOptions options_;
  int64_t row_bytes_ = 0;
  std::vector<Sequence> pass_;
  // Per decode batch slot: the digest of the last layer's rows [0, rows) of the sequence last
  // decoded in it (a step whose context is `rows` continues it; any other starts over).
  struct DecodeDigest {
    int64_t rows = -1;
    uint64_t digest = 0;
  };
  std::vector<DecodeDigest> decode_digest_;
  int next_layer_ = 0;
  bool in_pass_ = false;
  Duration layer_time_{0};
};

}  // namespace dualpath::compute
