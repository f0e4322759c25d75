#include "engine/backend_factory.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "compute/cpu_backend.h"
#include "compute/cpu_model_config.h"
#include "compute/checkpoint.h"
#include "compute/cpu_weights.h"
#include "compute/modeled_backend.h"
#include "model/hardware_spec.h"
#include "model/model_spec.h"

namespace dualpath::engine {

namespace {
// The modeled backend emits token ids below this (compute::ModeledOptions' default).
constexpr int32_t kModeledVocab = 32000;
// The GPU the modeled backend's CostModel prices (the paper's cluster, PAPER.md §9).
constexpr const char* kModeledHardware = "h800";
}  // namespace


Result<std::unique_ptr<BackendFactory>> BackendFactory::create(const BackendSpec& spec) {
  std::unique_ptr<BackendFactory> f(new BackendFactory());
  f->spec_ = spec;
  if (spec.compute == "cpu" && spec.is_checkpoint()) {
    // A Hugging Face llama directory: its config.json gives the shape, model.preset is unused.
    DP_ASSIGN_OR_RETURN(f->weights_, compute::load_checkpoint_dir(spec.weights),
                        "live.weights");
    const auto& c = f->weights_->config;
    f->shape_ = {c.layers, c.kv_bytes_per_token_per_layer()};
    f->vocab_ = c.vocab;
  } else if (spec.compute == "cpu") {
    auto preset = compute::cpu_model_preset(spec.model);
    if (!preset.is_ok()) {
      return Status::invalid_argument(
          fmt::format("model.preset = '{}' is not a CPU model; use one of {} (or live.compute = "
                      "\"modeled\" for a model/ preset)",
                      spec.model, fmt::join(compute::cpu_model_preset_names(), ", ")));
    }
    if (spec.weights == "trained") {
      DP_ASSIGN_OR_RETURN(f->weights_, compute::builtin_weights(*preset));
    } else {
      DP_ASSIGN_OR_RETURN(f->weights_, compute::random_weights(*preset, spec.weights_seed));
    }
    f->shape_ = {preset->layers, preset->kv_bytes_per_token_per_layer()};
    f->vocab_ = preset->vocab;
  } else if (spec.compute == "modeled") {
    auto model = model::model_preset(spec.model);
    if (!model.is_ok()) {
      return Status::invalid_argument(
          fmt::format("model.preset = '{}': {}", spec.model, model.status().message()));
    }
    model::HardwareSpec hw = spec.hardware;
    if (hw.name.empty()) {
      DP_ASSIGN_OR_RETURN(hw, model::hardware_preset(kModeledHardware));
    }
    DP_RETURN_IF_ERROR(hw.validate());
    DP_RETURN_IF_ERROR(spec.efficiency.validate());
    f->cost_.emplace(*model, hw, spec.efficiency);
    f->clock_ = std::make_unique<DilatedClock>(spec.time_dilation);
    DP_ASSIGN_OR_RETURN(auto probe, f->make());
    f->shape_ = probe->kv_shape();
    f->vocab_ = kModeledVocab;
  } else {
    return Status::invalid_argument(
        fmt::format("live.compute = '{}' is not cpu or modeled", spec.compute));
  }
  return f;
}

Result<std::unique_ptr<compute::ComputeBackend>> BackendFactory::make(bool digest_kv) const {
  if (weights_) return std::unique_ptr<compute::ComputeBackend>(new compute::CpuBackend(weights_));
  compute::ModeledOptions o;
  o.kv_scale = spec_.kv_scale;
  o.prefill_ep_size = spec_.prefill_ep_gpus;
  o.decode_ep_size = spec_.decode_ep_gpus;
  o.digest_kv = digest_kv;
  o.vocab = kModeledVocab;
  o.seed = spec_.weights_seed;
  DP_ASSIGN_OR_RETURN(auto backend, compute::ModeledBackend::create(*cost_, *clock_, o));
  return std::unique_ptr<compute::ComputeBackend>(std::move(backend));
}

}  // namespace dualpath::engine
