#pragma once
// HardwareSpec: one node's GPUs and NICs (PAPER.md §2, §13.3). Bandwidths in bytes per second.

#include <string>
#include <string_view>
#include <vector>

#include "dualpath/result.h"

namespace dualpath::model {

struct HardwareSpec {
  std::string name;
  int gpus_per_node = 8;
  double bf16_flops = 0;          // dense tensor peak per GPU, FLOP/s
  double fp8_flops = 0;
  double hbm_bytes = 0;           // per GPU
  double hbm_bytes_per_s = 0;     // per GPU
  double cnic_bytes_per_s = 0;    // one CNIC per GPU, per direction (B in PAPER.md §6)
  int snics_per_node = 1;         // s
  double snic_bytes_per_s = 0;    // one storage NIC, per direction
  double dram_bytes_per_s = 0;    // per node, half-duplex: reads + writes share it (M)
  double pcie_bytes_per_s = 0;    // GPU<->NIC PCIe, per direction

  double node_snic_bytes_per_s() const { return snics_per_node * snic_bytes_per_s; }
  Status validate() const;

  bool operator==(const HardwareSpec&) const = default;
};

const std::vector<std::string>& hardware_preset_names();
Result<HardwareSpec> hardware_preset(std::string_view name);

}  // namespace dualpath::model
