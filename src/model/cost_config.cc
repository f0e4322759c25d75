#include "model/cost_config.h"

#include "dualpath/units.h"

namespace dualpath::model {

void apply_hardware_config(Config& f, HardwareSpec& hw) {
  if (f.has("hardware.preset")) {
    auto h = hardware_preset(f.choice("hardware.preset", hw.name, hardware_preset_names()));
    if (h.is_ok()) hw = *h;
  }
  hw.snic_bytes_per_s = gbps_to_bytes_per_s(f.positive_number(
      "hardware.snic_gbps", bytes_per_s_to_gbps(hw.snic_bytes_per_s), "one storage NIC, Gb/s"));
  hw.snics_per_node = static_cast<int>(
      f.integer("hardware.snics_per_node", hw.snics_per_node, 1, 64, "storage NICs per node"));
  hw.cnic_bytes_per_s = gbps_to_bytes_per_s(f.positive_number(
      "hardware.cnic_gbps", bytes_per_s_to_gbps(hw.cnic_bytes_per_s), "one compute NIC, Gb/s"));
  hw.dram_bytes_per_s = gbps_to_bytes_per_s(f.positive_number(
      "hardware.dram_gbps", bytes_per_s_to_gbps(hw.dram_bytes_per_s), "node DRAM, Gb/s"));
  hw.gpus_per_node = static_cast<int>(
      f.integer("hardware.gpus_per_node", hw.gpus_per_node, 1, 64, "GPUs per node"));
  hw.hbm_bytes = f.positive_number("hardware.hbm_gb", hw.hbm_bytes / 1e9, "GPU memory, GB") * 1e9;
}

void apply_efficiency_config(Config& f, Efficiency& eff) {
  eff.linear_mfu = f.positive_number("efficiency.linear_mfu", eff.linear_mfu);
  eff.attention_mfu = f.positive_number("efficiency.attention_mfu", eff.attention_mfu);
  eff.layer_overhead_s =
      f.non_negative_number("efficiency.layer_overhead_ms", eff.layer_overhead_s * 1e3) / 1e3;
  eff.intra_node_layer_overhead_s =
      f.non_negative_number("efficiency.intra_node_layer_overhead_ms",
                            eff.intra_node_layer_overhead_s * 1e3) / 1e3;
  eff.request_overhead_s = f.non_negative_number("efficiency.request_overhead_ms",
                                                 eff.request_overhead_s * 1e3) / 1e3;
  eff.decode_step_overhead_s = f.non_negative_number("efficiency.decode_step_overhead_ms",
                                                     eff.decode_step_overhead_s * 1e3) / 1e3;
  eff.decode_mbu = f.positive_number("efficiency.decode_mbu", eff.decode_mbu);
  eff.decode_mfu = f.non_negative_number("efficiency.decode_mfu", eff.decode_mfu);
  eff.storage_efficiency =
      f.positive_number("efficiency.storage_efficiency", eff.storage_efficiency);
}

}  // namespace dualpath::model
