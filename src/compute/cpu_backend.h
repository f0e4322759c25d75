#pragma once
// CpuBackend: ComputeBackend over the CPU reference transformer. KV rows are fp32 K then V
// (CpuModelConfig::kv_bytes_per_token_per_layer bytes); every KV span must be 4-byte aligned.
// A batch runs its sequences one after another within each layer. Thread-compatible.

#include <memory>
#include <vector>

#include "compute/compute_backend.h"
#include "compute/cpu_model.h"

namespace dualpath::compute {

class CpuBackend final : public ComputeBackend {
 public:
  // `weights` is shared read-only with any other model or backend holding it.
  explicit CpuBackend(std::shared_ptr<const CpuWeights> weights);

  std::string_view name() const override { return "cpu"; }
  KvShape kv_shape() const override;
  const CpuModel& model() const { return model_; }

  Status begin_prefill(std::span<const PrefillSequence> batch) override;
  Status prefill_layer(int layer,
                       std::span<const KvLayerView> cached_kv,
                       std::span<const std::span<std::byte>> new_kv_out) override;
  Result<std::vector<NextToken>> finish_prefill() override;
  Result<std::vector<NextToken>> decode_step(std::span<const DecodeSequence> batch) override;

 private:
  CpuModel model_;
  std::vector<CpuPass> passes_;
};

}  // namespace dualpath::compute
