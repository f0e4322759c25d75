#pragma once
// The flags that override the simulator's fitted calibration factors (docs/calibration.md),
// shared by `dualpath sim` (one run) and `dualpath paper` (every run of the paper's checks, to
// see how the checks move with a factor).

#include <CLI/CLI.hpp>

#include <optional>

#include "sim/sim_config.h"

namespace dualpath::app {

struct CalibrationFlags {
  // Each is set only when its flag is given; a given value is range-checked by
  // SimConfig::validate() like the same key in a TOML file (no value is a silent "unset").
  std::optional<double> linear_mfu;
  std::optional<double> attention_mfu;
  std::optional<double> storage_efficiency;
  std::optional<double> layer_overhead_ms;
  std::optional<double> intra_node_layer_overhead_ms;
  std::optional<double> request_overhead_ms;
  std::optional<double> decode_step_overhead_ms;
  std::optional<double> decode_mfu;
  std::optional<double> hbm_reserved_gb;
  std::optional<double> basic_kv_gb;

  void add_to(CLI::App* cmd) {
    cmd->add_option("--linear-mfu", linear_mfu,
                    "override the linear-layer MFU (DeepSeek's published rate)");
    cmd->add_option("--attention-mfu", attention_mfu,
                    "override the attention MFU (FlashMLA's published sparse-prefill rate)");
    cmd->add_option("--storage-efficiency", storage_efficiency,
                    "override the fitted fraction of SNIC line rate the storage client reaches");
    cmd->add_option("--layer-overhead-ms", layer_overhead_ms,
                    "override the fitted fixed cost per layer per forward pass of an EP group "
                    "that spans nodes");
    cmd->add_option("--intra-node-layer-overhead-ms", intra_node_layer_overhead_ms,
                    "override the fitted fixed cost per layer per forward pass of an EP group "
                    "inside one node");
    cmd->add_option("--request-overhead-ms", request_overhead_ms,
                    "fixed cost per request per layer of a prefill pass (default 0: none; a "
                    "what-if, see docs/calibration.md)");
    cmd->add_option("--decode-step-overhead-ms", decode_step_overhead_ms,
                    "override the fitted fixed cost of one decode iteration");
    cmd->add_option("--decode-mfu", decode_mfu,
                    "charge a decode step's FLOPs on top of its HBM reads at this fraction of "
                    "peak (default 0: they overlap; a what-if, see docs/calibration.md)");
    cmd->add_option("--hbm-reserved-gb", hbm_reserved_gb,
                    "HBM per GPU kept for activations and workspace (not KV)");
    cmd->add_option("--basic-prefill-kv-gb", basic_kv_gb,
                    "HBM per PE GPU a Basic (non-layerwise) batch may fill with KV");
  }
  // Applies the flags that were given; range errors are left to SimConfig::validate().
  void apply(sim::SimConfig& cfg) const {
    if (linear_mfu) cfg.eff.linear_mfu = *linear_mfu;
    if (attention_mfu) cfg.eff.attention_mfu = *attention_mfu;
    if (storage_efficiency) cfg.eff.storage_efficiency = *storage_efficiency;
    if (layer_overhead_ms) cfg.eff.layer_overhead_s = *layer_overhead_ms / 1e3;
    if (intra_node_layer_overhead_ms)
      cfg.eff.intra_node_layer_overhead_s = *intra_node_layer_overhead_ms / 1e3;
    if (request_overhead_ms) cfg.eff.request_overhead_s = *request_overhead_ms / 1e3;
    if (decode_step_overhead_ms) cfg.eff.decode_step_overhead_s = *decode_step_overhead_ms / 1e3;
    if (decode_mfu) cfg.eff.decode_mfu = *decode_mfu;
    if (hbm_reserved_gb) cfg.hbm_reserved_bytes = *hbm_reserved_gb * 1e9;
    if (basic_kv_gb) cfg.basic_prefill_kv_bytes = *basic_kv_gb * 1e9;
  }
  bool any() const {
    return linear_mfu || attention_mfu || storage_efficiency || layer_overhead_ms ||
           intra_node_layer_overhead_ms || request_overhead_ms || decode_step_overhead_ms ||
           decode_mfu || hbm_reserved_gb || basic_kv_gb;
  }
};

}  // namespace dualpath::app
