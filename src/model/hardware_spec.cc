#include "model/hardware_spec.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "common/config.h"
#include "dualpath/units.h"

namespace dualpath::model {

Status HardwareSpec::validate() const {
  // Positive, finite and not absurd (1e-300 Gb/s would stall a simulation for ever): between
  // 1e6 and 1e18 base units (bytes, bytes/s, FLOP/s), reported in the key's own unit.
  auto positive = [&](double v, std::string_view key, double unit, std::string_view fix) -> Status {
    if (v >= 1e6 && v <= 1e18) return Status::ok();
    return Status::invalid_argument(
        fmt::format("hardware '{}': {} = {:g} must be between {:g} and {:g}; {}", name, key,
                    v / unit, 1e6 / unit, 1e18 / unit, fix));
  };
  if (gpus_per_node <= 0)
    return Status::invalid_argument(
        fmt::format("hardware '{}': gpus_per_node = {} must be >= 1", name, gpus_per_node));
  if (snics_per_node <= 0)
    return Status::invalid_argument(
        fmt::format("hardware '{}': snics_per_node = {} must be >= 1", name, snics_per_node));
  constexpr double kGbps = 1e9 / 8;
  DP_RETURN_IF_ERROR(
      positive(snic_bytes_per_s, "snic_gbps", kGbps, "give the storage NIC speed in Gb/s"));
  DP_RETURN_IF_ERROR(
      positive(cnic_bytes_per_s, "cnic_gbps", kGbps, "give the compute NIC speed in Gb/s"));
  DP_RETURN_IF_ERROR(
      positive(dram_bytes_per_s, "dram_gbps", kGbps, "give the node's DRAM bandwidth in Gb/s"));
  DP_RETURN_IF_ERROR(positive(hbm_bytes, "hbm_gb", 1e9, "give the GPU memory in GB"));
  DP_RETURN_IF_ERROR(positive(fp8_flops, "fp8_tflops", 1e12, "give the GPU's FP8 peak in TFLOP/s"));
  DP_RETURN_IF_ERROR(
      positive(bf16_flops, "bf16_tflops", 1e12, "give the GPU's BF16 peak in TFLOP/s"));
  DP_RETURN_IF_ERROR(
      positive(hbm_bytes_per_s, "hbm_tbps", 1e12, "give the HBM bandwidth in TB/s"));
  return Status::ok();
}

const std::vector<std::string>& hardware_preset_names() {
  static const std::vector<std::string> kNames = {"h800", "h100"};
  return kNames;
}

Result<HardwareSpec> hardware_preset(std::string_view name) {
  if (name == "h800" || name == "h100") {
    // PAPER.md §13.3 (public): 989 TFLOP/s BF16, 1,979 FP8, 80 GB at 3.35 TB/s, 8 GPUs per node,
    // one 400 Gb/s CNIC per GPU, one 400 Gb/s SNIC per node, ~500 GB/s DRAM, PCIe Gen5 x16.
    HardwareSpec h;
    h.name = std::string(name);
    h.gpus_per_node = 8;
    h.bf16_flops = 989e12;
    h.fp8_flops = 1979e12;
    h.hbm_bytes = 80e9;
    h.hbm_bytes_per_s = 3.35e12;
    h.cnic_bytes_per_s = gbps_to_bytes_per_s(400);
    h.snics_per_node = 1;
    h.snic_bytes_per_s = gbps_to_bytes_per_s(400);
    h.dram_bytes_per_s = 500e9;
    h.pcie_bytes_per_s = 55e9;
    return h;
  }
  std::string hint = closest_match(name, hardware_preset_names());
  return Status::invalid_argument(fmt::format(
      "unknown hardware '{}'; use one of {}{}", name, fmt::join(hardware_preset_names(), ", "),
      hint.empty() ? "" : fmt::format(" (did you mean '{}'?)", hint)));
}

}  // namespace dualpath::model
