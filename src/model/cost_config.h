#pragma once
// The [hardware] and [efficiency] sections of a dualpath TOML file: the inputs of the CostModel,
// read by the simulator (sim/sim_config.h) and by the live system's modeled backend
// (engine/engine_config.h), so that one file prices one cluster the same way in both.
//
//   [hardware]   preset = "h800"  snic_gbps = 400  snics_per_node = 1  cnic_gbps = 400
//                dram_gbps = 4000  gpus_per_node = 8  hbm_gb = 80
//   [efficiency] linear_mfu  attention_mfu  layer_overhead_ms  intra_node_layer_overhead_ms
//                request_overhead_ms  decode_step_overhead_ms  decode_mbu  decode_mfu
//                storage_efficiency
//                                                          (defaults: model::Efficiency)
//
// Bandwidths are in Gb/s like NIC datasheets (DRAM too: 4000 Gb/s = 500 GB/s). Errors are
// recorded in the Config (they name the key; Config::finish() reports them).

#include "common/config.h"
#include "model/cost_model.h"
#include "model/hardware_spec.h"

namespace dualpath::model {

// Reads [hardware] into `hw`: a preset first (when given), then each override.
void apply_hardware_config(Config& file, HardwareSpec& hw);
// Reads [efficiency] into `eff`.
void apply_efficiency_config(Config& file, Efficiency& eff);

}  // namespace dualpath::model
