#include "engine/backend_factory.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "compute/cpu_backend.h"
#include "compute/cpu_model_config.h"
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

Json BackendSpec::to_json() const {
  const model::HardwareSpec& h = hardware;
  const model::Efficiency& e = efficiency;
  return Json{{"compute", compute},
              {"model", model},
              {"weights_seed", weights_seed},
              {"kv_scale", kv_scale},
              {"time_dilation", time_dilation},
              {"decode_ep_gpus", decode_ep_gpus},
              {"hardware",
               {{"name", h.name},
                {"gpus_per_node", h.gpus_per_node},
                {"bf16_flops", h.bf16_flops},
                {"fp8_flops", h.fp8_flops},
                {"hbm_bytes", h.hbm_bytes},
                {"hbm_bytes_per_s", h.hbm_bytes_per_s},
                {"cnic_bytes_per_s", h.cnic_bytes_per_s},
                {"snics_per_node", h.snics_per_node},
                {"snic_bytes_per_s", h.snic_bytes_per_s},
                {"dram_bytes_per_s", h.dram_bytes_per_s},
                {"pcie_bytes_per_s", h.pcie_bytes_per_s}}},
              {"efficiency",
               {{"linear_mfu", e.linear_mfu},
                {"attention_mfu", e.attention_mfu},
                {"layer_overhead_s", e.layer_overhead_s},
                {"decode_step_overhead_s", e.decode_step_overhead_s},
                {"decode_mbu", e.decode_mbu},
                {"storage_efficiency", e.storage_efficiency}}}};
}

Result<BackendSpec> BackendSpec::from_json(const Json& j) {
  BackendSpec s;
  try {
    s.compute = j.value("compute", s.compute);
    s.model = j.value("model", s.model);
    s.weights_seed = j.value("weights_seed", s.weights_seed);
    s.kv_scale = j.value("kv_scale", s.kv_scale);
    s.time_dilation = j.value("time_dilation", s.time_dilation);
    s.decode_ep_gpus = j.value("decode_ep_gpus", s.decode_ep_gpus);
    if (const auto it = j.find("hardware"); it != j.end()) {
      model::HardwareSpec& h = s.hardware;
      const Json& hj = *it;
      h.name = hj.value("name", h.name);
      h.gpus_per_node = hj.value("gpus_per_node", h.gpus_per_node);
      h.bf16_flops = hj.value("bf16_flops", h.bf16_flops);
      h.fp8_flops = hj.value("fp8_flops", h.fp8_flops);
      h.hbm_bytes = hj.value("hbm_bytes", h.hbm_bytes);
      h.hbm_bytes_per_s = hj.value("hbm_bytes_per_s", h.hbm_bytes_per_s);
      h.cnic_bytes_per_s = hj.value("cnic_bytes_per_s", h.cnic_bytes_per_s);
      h.snics_per_node = hj.value("snics_per_node", h.snics_per_node);
      h.snic_bytes_per_s = hj.value("snic_bytes_per_s", h.snic_bytes_per_s);
      h.dram_bytes_per_s = hj.value("dram_bytes_per_s", h.dram_bytes_per_s);
      h.pcie_bytes_per_s = hj.value("pcie_bytes_per_s", h.pcie_bytes_per_s);
    }
    if (const auto it = j.find("efficiency"); it != j.end()) {
      model::Efficiency& e = s.efficiency;
      const Json& ej = *it;
      e.linear_mfu = ej.value("linear_mfu", e.linear_mfu);
      e.attention_mfu = ej.value("attention_mfu", e.attention_mfu);
      e.layer_overhead_s = ej.value("layer_overhead_s", e.layer_overhead_s);
      e.decode_step_overhead_s = ej.value("decode_step_overhead_s", e.decode_step_overhead_s);
      e.decode_mbu = ej.value("decode_mbu", e.decode_mbu);
      e.storage_efficiency = ej.value("storage_efficiency", e.storage_efficiency);
    }
  } catch (const Json::exception& ex) {
    return Status::invalid_argument(fmt::format("bad backend spec in the node setup: {}", ex.what()));
  }
  return s;
}

Result<std::unique_ptr<BackendFactory>> BackendFactory::create(const BackendSpec& spec) {
  std::unique_ptr<BackendFactory> f(new BackendFactory());
  f->spec_ = spec;
  if (spec.compute == "cpu") {
    auto preset = compute::cpu_model_preset(spec.model);
    if (!preset.is_ok()) {
      return Status::invalid_argument(
          fmt::format("model.preset = '{}' is not a CPU model; use one of {} (or live.compute = "
                      "\"modeled\" for a model/ preset)",
                      spec.model, fmt::join(compute::cpu_model_preset_names(), ", ")));
    }
    DP_ASSIGN_OR_RETURN(f->weights_, compute::random_weights(*preset, spec.weights_seed));
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
  o.decode_ep_size = spec_.decode_ep_gpus;
  o.digest_kv = digest_kv;
  o.vocab = kModeledVocab;
  o.seed = spec_.weights_seed;
  DP_ASSIGN_OR_RETURN(auto backend, compute::ModeledBackend::create(*cost_, *clock_, o));
  return std::unique_ptr<compute::ComputeBackend>(std::move(backend));
}

}  // namespace dualpath::engine
