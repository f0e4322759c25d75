#include "engine/engine_config.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "compute/checkpoint.h"
#include "model/cost_config.h"

namespace dualpath::engine {

BackendSpec EngineConfig::backend_spec() const {
  BackendSpec b;
  b.compute = compute;
  b.model = model;
  b.weights = weights.empty() ? (compute == "cpu" && model == "tiny" ? "trained" : "random")
                              : weights;
  b.weights_seed = weights_seed;
  b.kv_scale = kv_scale;
  b.time_dilation = time_dilation;
  b.hardware = hardware;
  b.efficiency = efficiency;
  b.prefill_ep_gpus = std::min(pe_ep_nodes, prefill_nodes) * hardware.gpus_per_node;
  b.decode_ep_gpus = std::min(de_ep_nodes, decode_nodes) * hardware.gpus_per_node;
  return b;
}

double EngineConfig::emulated_snic_gbps() const {
  if (!snic_from_hardware) return snic_gbps;
  return bytes_per_s_to_gbps(model::usable_snic_bytes_per_s(hardware, efficiency)) * kv_scale /
         time_dilation;
}

Result<ModelKvShape> model_kv_shape(const EngineConfig& config) {
  const BackendSpec spec = config.backend_spec();
  if (spec.compute == "cpu" && spec.is_checkpoint()) {
    // The shape from config.json alone: the weights load in the nodes, once.
    const std::string path = (std::filesystem::path(spec.weights) / "config.json").string();
    std::ifstream in(path);
    if (!in) {
      return Status::not_found(fmt::format(
          "live.weights = \"{}\": no config.json there; give a Hugging Face llama checkpoint "
          "directory",
          spec.weights));
    }
    std::stringstream text;
    text << in.rdbuf();
    DP_ASSIGN_OR_RETURN(compute::CpuModelConfig c, compute::config_from_hf_json(text.str(), path));
    return ModelKvShape{c.layers, c.kv_bytes_per_token_per_layer(), c.vocab};
  }
  DP_ASSIGN_OR_RETURN(auto factory, BackendFactory::create(spec));
  return ModelKvShape{factory->kv_shape().layers, factory->kv_shape().bytes_per_token_per_layer,
                      factory->vocab()};
}

Status EngineConfig::validate() const {
  DP_ASSIGN_OR_RETURN(ModelKvShape shape, model_kv_shape(*this));
  const bool checkpoint = !weights.empty() && weights != "trained" && weights != "random";
  if (checkpoint && compute != "cpu") {
    return Status::invalid_argument(fmt::format(
        "live.weights = \"{}\" (a checkpoint directory) runs on the CPU model: set live.compute "
        "= \"cpu\"",
        weights));
  }
  if (weights == "trained" && (compute != "cpu" || model != "tiny")) {
    return Status::invalid_argument(fmt::format(
        "live.weights = \"trained\": only the built-in tiny CPU model has trained weights (this "
        "config runs {} on the {} backend); use live.weights = \"random\"",
        model, compute));
  }
  if (block_tokens <= 0) {
    return Status::invalid_argument(fmt::format(
        "store.block_tokens = {} must be positive; 64 is the paper's block size", block_tokens));
  }
  if (prefill_nodes < 1 || prefill_nodes > kMaxLiveNodes) {
    return Status::invalid_argument(fmt::format(
        "cluster.prefill_nodes = {}: the live system runs 1 to {} prefill nodes", prefill_nodes,
        kMaxLiveNodes));
  }
  if (decode_nodes < 1 || decode_nodes > kMaxLiveNodes) {
    return Status::invalid_argument(fmt::format(
        "cluster.decode_nodes = {}: the live system runs 1 to {} decode nodes", decode_nodes,
        kMaxLiveNodes));
  }
  const uint64_t full_block =
      static_cast<uint64_t>(shape.layers * block_tokens * shape.bytes_per_token_per_layer);
  for (auto [key, bytes] : {std::pair{"live.pe_dram_buffer_mb", pe_dram_buffer_bytes},
                            std::pair{"live.de_dram_buffer_mb", de_dram_buffer_bytes},
                            std::pair{"live.hbm_mb", hbm_bytes}}) {
    if (bytes < full_block) {
      return Status::invalid_argument(fmt::format(
          "{} = {:.3f} MiB is smaller than one Full Block of {} ({} bytes: {} layers x {} "
          "tokens x {} bytes); raise {}",
          key, static_cast<double>(bytes) / (1 << 20), model, full_block, shape.layers,
          block_tokens, shape.bytes_per_token_per_layer, key));
    }
  }
  for (const auto& path : data_paths) {
    std::error_code ec;
    if (!std::filesystem::is_directory(path, ec)) {
      return Status::not_found(fmt::format(
          "store.data_paths entry '{}' does not exist or is not a directory; create it or fix "
          "the path",
          path));
    }
  }
  if (engines_per_node < 1 || engines_per_node > 16) {
    return Status::invalid_argument(fmt::format(
        "live.engines_per_node = {}: a node process hosts 1 to 16 engines", engines_per_node));
  }
  if (pipeline_depth < 2) {
    return Status::invalid_argument(
        fmt::format("live.pipeline_depth = {} must be at least 2 (one layer computing, the next "
                    "loading)",
                    pipeline_depth));
  }
  return Status::ok();
}

Status apply_engine_config(Config& f, EngineConfig& c) {
  if (f.has("model.preset")) c.model = f.string("model.preset", c.model, "the model preset");
  c.prefill_nodes =
      static_cast<int>(f.integer("cluster.prefill_nodes", c.prefill_nodes, 1, 100000, "nodes"));
  c.decode_nodes =
      static_cast<int>(f.integer("cluster.decode_nodes", c.decode_nodes, 1, 100000, "nodes"));
  c.block_tokens = f.integer("store.block_tokens", c.block_tokens, 1, 1 << 20, "tokens per block");
  c.data_paths = f.string_list("store.data_paths", c.data_paths);
  c.store_capacity_bytes = static_cast<int64_t>(
      f.non_negative_number("store.capacity_gb", static_cast<double>(c.store_capacity_bytes) / 1e9,
                            "GB of block files; 0 = unlimited") *
      1e9);
  c.store_fault_rate = f.number("store.inject_fault_rate", c.store_fault_rate,
                                "share of block I/O to fail, for fault tests only (0..0.5)");
  if (c.store_fault_rate < 0 || c.store_fault_rate > 0.5) {
    f.fail("store.inject_fault_rate", "must be within 0..0.5 (0: no injected faults)");
  }
  auto mib = [&](const char* key, uint64_t bytes) {
    return static_cast<uint64_t>(
        f.positive_number(key, static_cast<double>(bytes) / (1 << 20), "MiB") * (1 << 20));
  };
  c.pe_dram_buffer_bytes = mib("live.pe_dram_buffer_mb", c.pe_dram_buffer_bytes);
  c.de_dram_buffer_bytes = mib("live.de_dram_buffer_mb", c.de_dram_buffer_bytes);
  c.hbm_bytes = mib("live.hbm_mb", c.hbm_bytes);
  c.compute = f.choice("live.compute", c.compute, {"cpu", "modeled"});
  c.kv_scale = f.positive_number("live.kv_scale", c.kv_scale, "scale of the modeled KV bytes");
  c.time_dilation =
      f.positive_number("live.time_dilation", c.time_dilation, "real seconds per emulated second");
  if (f.has("live.weights")) {
    c.weights = f.string("live.weights", "trained",
                         "\"trained\", \"random\", or a Hugging Face llama checkpoint directory");
    if (c.weights != "trained" && c.weights != "random" &&
        !std::filesystem::is_regular_file(std::filesystem::path(c.weights) / "config.json")) {
      f.fail("live.weights",
             "is neither \"trained\" nor \"random\" nor a directory with a config.json (a "
             "Hugging Face llama checkpoint); fix the path");
    }
  }
  c.weights_seed = static_cast<uint64_t>(
      f.integer("live.weights_seed", static_cast<int64_t>(c.weights_seed), 0, INT64_MAX, "seed"));
  c.pipeline_depth =
      static_cast<int>(f.integer("live.pipeline_depth", c.pipeline_depth, 2, 64, "layers"));
  c.engines_per_node = static_cast<int>(
      f.integer("live.engines_per_node", c.engines_per_node, 1, 16, "engines (GPUs) per node"));
  c.request_timeout = std::chrono::milliseconds(
      f.integer("live.request_timeout_ms",
                std::chrono::duration_cast<std::chrono::milliseconds>(c.request_timeout).count(), 1,
                3'600'000, "ms"));
  c.snic_gbps = f.non_negative_number("emulation.snic_gbps", c.snic_gbps, "Gb/s; 0 = unlimited");
  c.snic_from_hardware = c.compute == "modeled" && !f.has("emulation.snic_gbps");
  if (c.hardware.name.empty()) {
    if (auto h800 = model::hardware_preset("h800"); h800.is_ok()) c.hardware = *h800;
  }
  model::apply_hardware_config(f, c.hardware);
  model::apply_efficiency_config(f, c.efficiency);
  c.pe_ep_nodes = static_cast<int>(
      f.integer("cluster.pe_ep_nodes", c.pe_ep_nodes, 1, 1000, "nodes per prefill EP group"));
  c.de_ep_nodes = static_cast<int>(
      f.integer("cluster.de_ep_nodes", c.de_ep_nodes, 1, 1000, "nodes per decode EP group"));
  c.transport = transport::read_transport_config(f);
  if (c.transport.context.transports.empty()) c.transport.context.transports = "sm,self";
  return Status::ok();
}

Result<EngineConfig> load_engine_config(const std::string& path) {
  Config file;
  if (!path.empty()) {
    DP_ASSIGN_OR_RETURN(file, Config::from_file(path));
  }
  EngineConfig cfg;
  DP_RETURN_IF_ERROR(apply_engine_config(file, cfg));
  for (const char* section :
       {"model", "hardware", "cluster", "workload", "scheduler", "efficiency", "adaptive"}) {
    file.ignore_section(section);
  }
  DP_RETURN_IF_ERROR(file.finish());
  DP_RETURN_IF_ERROR(cfg.validate());
  return cfg;
}

}  // namespace dualpath::engine
