#pragma once
// EngineConfig: what the live engines, node processes and the local driver read from a dualpath
// TOML config (the file `dualpath sim` reads too; the simulator ignores [store], [live],
// [transport] and [emulation]):
//
//   [model]     preset = "tiny"                    # a compute/ CPU preset: tiny or small
//   [cluster]   prefill_nodes = 1  decode_nodes = 2
//   [store]     block_tokens = 64  data_paths = ["/mnt/kv0"]   capacity_gb = 0
//   [live]      pe_dram_buffer_mb = 256  de_dram_buffer_mb = 256  hbm_mb = 256
//               weights = "trained"  weights_seed = 1  request_timeout_ms = 30000
//               pipeline_depth = 3
//               engines_per_node = 1
//               compute = "cpu"  kv_scale = 1  time_dilation = 1   # "modeled": not run yet
//   [transport] tls = "sm,self" ... (transport/transport_config.h)
//   [emulation] snic_gbps = 0                      # per node storage NIC; 0 = unlimited
//   [hardware] [efficiency]                        # modeled: what the CostModel prices, read
//                                                  # as the simulator reads them
//   [cluster]   pe_ep_nodes  de_ep_nodes  (hardware.gpus_per_node GPUs each)
//
// With compute = "modeled" and no emulation.snic_gbps, each node's storage NIC is emulated at
// the rate the simulator gives it, in the live system's units: hardware.snic_gbps x
// snics_per_node x efficiency.storage_efficiency x kv_scale / time_dilation. A PE node computes
// at most hardware.gpus_per_node prefills at once (one per GPU).
//
// Errors name the key (store.block_tokens, live.de_dram_buffer_mb, model.preset,
// store.data_paths) and say what to change. Thread-compatible (a value type).

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "common/config.h"
#include "dualpath/result.h"
#include "dualpath/units.h"
#include "engine/backend_factory.h"
#include "model/cost_model.h"
#include "model/hardware_spec.h"
#include "transport/transport_config.h"

namespace dualpath::engine {

// Nodes of one role the live system runs (each a process with its UCX worker and buffers): the
// paper's largest cluster, 48P96D, with room (`bench control` runs the scheduler at that scale).
inline constexpr int kMaxLiveNodes = 128;

struct EngineConfig {
  std::string model = "tiny";
  // "cpu": the reference transformer (model is a compute/ CPU preset). "modeled": CostModel time
  // on a dilated clock for any model/ preset; read here, not yet run by the engines.
  std::string compute = "cpu";
  double kv_scale = 1.0;       // modeled: KV bytes per token scaled by this
  double time_dilation = 1.0;  // modeled: real seconds per emulated second
  // What the nodes run at: kv_scale and time_dilation under modeled compute, 1 on the CPU model
  // (real KV, real time).
  double live_kv_scale() const { return compute == "modeled" ? kv_scale : 1.0; }
  double live_time_dilation() const { return compute == "modeled" ? time_dilation : 1.0; }
  // "trained" (the built-in trained weights: tiny, the default), "random" (drawn from
  // weights_seed: small's only choice), or a Hugging Face llama checkpoint directory (its
  // config.json gives the shape; model.preset is then unused).
  std::string weights;  // empty: trained for tiny, random otherwise
  uint64_t weights_seed = 1;
  int prefill_nodes = 1;
  int decode_nodes = 1;
  int64_t block_tokens = 64;
  std::vector<std::string> data_paths;  // empty: the driver makes a temporary directory
  int64_t store_capacity_bytes = 0;
  // Tests of fault handling only: each node's store fails this share of its block reads, writes,
  // fsyncs and renames at random (store/io_faults.h). 0 in production.
  double store_fault_rate = 0;
  uint64_t pe_dram_buffer_bytes = 256ull << 20;
  uint64_t de_dram_buffer_bytes = 256ull << 20;
  uint64_t hbm_bytes = 256ull << 20;
  // HBM layer slots per prefill on a PE. 3 (the default): while layer l computes, layer l+1's
  // hit KV loads into one slot and layer l-1's KV leaves for the DE buffer from another. 2 also
  // works, but then loading l+1 must wait for l-1's PD transfer (measured by `dualpath bench
  // overlap`: the PE path's layers took 1.17x compute-only with 2, vs 1.04x for the DE path,
  // whose PD transfer is only the miss tokens).
  int pipeline_depth = 3;
  // Engines (GPUs) per node process, each with its own HBM arena and traffic manager; they
  // share the node's DRAM buffer, storage NIC and UCX worker.
  int engines_per_node = 1;
  Duration request_timeout = std::chrono::seconds(30);
  double snic_gbps = 0;
  bool snic_from_hardware = false;  // modeled without emulation.snic_gbps: derived (above)
  model::HardwareSpec hardware;     // modeled: [hardware] (h800 and its overrides)
  model::Efficiency efficiency;     // modeled: [efficiency]
  int pe_ep_nodes = 1;
  int de_ep_nodes = 1;
  transport::TransportConfig transport;

  // The storage NIC rate each node's limiter enforces, Gb/s of real time (0 = unlimited).
  double emulated_snic_gbps() const;
  // Prefills each PE engine computes at once: with the modeled backend, the node's GPUs split
  // among its engines (at least one each); the CPU model has no limit.
  int compute_slots() const {
    return compute == "modeled" ? std::max(1, hardware.gpus_per_node / engines_per_node) : 0;
  }

  // Cross-field checks that need the model: a DRAM buffer or HBM arena smaller than one Full
  // Block, and data paths that do not exist. Errors name the key.
  Status validate() const;

  BackendSpec backend_spec() const;
};

// Reads the sections above from `file` (other sections are left for the simulator: call
// file.finish() once every reader has run).
Status apply_engine_config(Config& file, EngineConfig& cfg);

// Loads a whole file (or the defaults for an empty path) and validates it; unknown keys outside
// the simulator's sections are errors.
Result<EngineConfig> load_engine_config(const std::string& path);

// KV bytes per token per layer, layers and vocabulary of the config's model and backend.
struct ModelKvShape {
  int64_t layers = 0;
  int64_t bytes_per_token_per_layer = 0;
  int64_t vocab = 0;
};
Result<ModelKvShape> model_kv_shape(const EngineConfig& config);

}  // namespace dualpath::engine
