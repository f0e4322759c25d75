#pragma once
// The seed deployment guide's configuration (../shared/seeds/000_*.txt §3), accepted as the guide
// writes it and mapped onto our keys (docs/deploy.md has the table):
//
//   [storage_node]    data_paths = "/mnt/nvme0n1,/mnt/nvme1n1"  (or a list) -> store.data_paths
//                     rdma_device = "mlx5_0"  rdma_port = 1   -> the storage NIC doctor checks
//                     buffer_pool_size = "320G"               -> both DRAM buffers, unless given
//   [dualpath_engine] enable_dual_path = true                 -> scheduler.mode full (false: basic)
//                     pe_dram_buffer = "80G"  de_dram_buffer  -> live.pe/de_dram_buffer_mb
//                     rdma_transfer_chunk = "64M"             -> transport.traffic.chunk_bytes
//                     scheduler_mode = "adaptive"             -> the read-path choice by queue
//                                                                length (the only one there is)
//   [prefill_engine]  engine_type = "prefill"  gpu_ids = [0,1,2,3]  -> live.engines_per_node = 4
//   [decode_engine]   engine_type = "decode"   gpu_ids = [4,5,6,7]     (both roles the same g)
//                     max_batch_tokens = 8192                  -> no effect here (a warning)
//
// Sizes take binary suffixes ("64M", "80G"). A guide key and the native key it maps onto may not
// both be given. What has no effect here is a warning in ServeConfig::warnings, never silent.
//
// settings.json (the guide's access-layer file): its "dualpath" block maps onto the scheduler
// (`enable` -> the mode, `rebalance_interval_ms` -> scheduler.report_interval_ms: how often the
// scheduler learns the storage NICs' read queues it balances by) or is refused with the reason
// (`path_a_weight` / `path_b_weight`: our scheduler has no static path weights). Its
// "health_check" block tells doctor which endpoint a health check calls; the rest (api_base,
// api_key, model_route) belongs to the access layer and is not read.

#include <string>

#include "common/config.h"
#include "dualpath/result.h"
#include "serve/serve_config.h"

namespace dualpath::serve {

// Reads the guide's sections of `file` onto `cfg` (after the native keys: load_serve_config).
Status apply_guide_config(Config& file, ServeConfig& cfg);

struct GuideSettings {
  std::string path;
  bool health_check = false;  // health_check.enabled
  std::string health_endpoint = "/v1/models";
};

// Reads settings.json's "dualpath" and "health_check" blocks (errors name the field and the
// fix) and applies the first onto `cfg`.
Result<GuideSettings> apply_settings_json(const std::string& path, ServeConfig& cfg);

}  // namespace dualpath::serve
