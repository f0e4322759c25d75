#pragma once
// BackendFactory: makes the compute backend (compute/compute_backend.h) of each request: the CPU
// reference transformer (weights drawn once from the seed and shared read-only) or the modeled
// backend (CostModel time on a dilated clock shared by the node's backends). One backend per
// request, because a backend is driven by one thread and a node serves several requests at once.
//
// Threads: thread-safe after create (make() only reads shared immutable state).

#include <cstdint>
#include <memory>
#include <optional>
#include <string>


#include "common/clock.h"
#include "compute/compute_backend.h"
#include "compute/cpu_weights.h"
#include "dualpath/result.h"
#include "model/cost_model.h"
#include "model/hardware_spec.h"

namespace dualpath::engine {


struct BackendSpec {
  std::string compute = "cpu";  // "cpu" (a compute/ CPU preset) or "modeled" (a model/ preset)
  std::string model = "tiny";
  // cpu: "trained" (the built-in trained weights, tiny only), "random" (drawn from weights_seed),
  // or a Hugging Face llama checkpoint directory (the same path on every node's host).
  std::string weights = "random";
  bool is_checkpoint() const { return weights != "trained" && weights != "random"; }
  uint64_t weights_seed = 1;
  double kv_scale = 1.0;
  double time_dilation = 1.0;
  // modeled: what the CostModel prices (the config's [hardware] and [efficiency], as the
  // simulator reads them; empty name = the h800 preset) and the EP group sizes: how many PE GPUs
  // run a forward pass together, how many DE GPUs share the weights.
  model::HardwareSpec hardware;
  model::Efficiency efficiency;
  int prefill_ep_gpus = 1;
  int decode_ep_gpus = 1;
};

class BackendFactory {
 public:
  // Errors name the key: live.compute, model.preset.
  static Result<std::unique_ptr<BackendFactory>> create(const BackendSpec& spec);

  // `digest_kv` = false: a modeled prefill's token does not read the cached KV (the oracle mode,
  // where no KV is loaded); the CPU model always reads it.
  Result<std::unique_ptr<compute::ComputeBackend>> make(bool digest_kv = true) const;
  compute::KvShape kv_shape() const { return shape_; }
  int32_t vocab() const { return vocab_; }

 private:
  BackendFactory() = default;

  BackendSpec spec_;
  compute::KvShape shape_;
  int32_t vocab_ = 0;
  std::shared_ptr<const compute::CpuWeights> weights_;  // cpu; shared with every CpuBackend
  std::optional<model::CostModel> cost_;                // modeled
  std::unique_ptr<DilatedClock> clock_;                 // modeled; outlives every backend
};

}  // namespace dualpath::engine
