#pragma once
// CostModel: GPU time of prefill batches and decode iterations, from a ModelSpec, a HardwareSpec
// and a few named efficiency factors (docs/calibration.md says where each comes from). Shared by
// the simulator and the live system's modeled backend: one formula, one place.
//
// Prefill (one engine = one GPU; DP attention, EP MoE, PAPER.md §8.4):
//   pass(batch on an EP group) = layers * layer overhead              fixed per forward pass
//                                (layer_overhead_s if the group spans nodes, else
//                                intra_node_layer_overhead_s)
//                              + max over GPUs of attention(its pairs) DP attention, unequal
//                              + linear(total new tokens / group size) MoE/FFN, EP-balanced
//   attention(cached, new)    = attention FLOPs / (attention_mfu * BF16 peak)
//   linear(tokens)            = 2 * active_params * tokens / (linear_mfu * peak of the weights)
// Decode (one DE GPU, one iteration of `batch` requests with `context` tokens in all):
//   step = decode_step_overhead_s + (weights / ep + KV read) / (decode_mbu * HBM bandwidth)
//        + 2 * active_params * batch / (linear_mfu * peak)
//   (the memory and FLOP terms overlap: max of the two; with decode_mfu > 0 they add, the FLOPs
//   at decode_mfu * peak)
// Thread-compatible; pure.

#include <cstdint>
#include <span>

#include "model/hardware_spec.h"
#include "model/model_spec.h"

namespace dualpath::model {

// The named efficiency factors. Defaults are the values fitted once or taken from published
// rates (docs/calibration.md).
struct Efficiency {
  // Fraction of tensor peak reached by projections, FFN and MoE in prefill. Not fitted to the
  // paper: DeepSeek's published V3/R1 serving rate, 73.7K input tokens/s per H800 node with 56.3 %
  // cache hits = 4.03K computed tokens/s per GPU = 298 TFLOP/s of FP8 linear work (2 x 37B per
  // token) = 0.15 of peak, all of it charged to the linear layers (docs/calibration.md).
  double linear_mfu = 0.15;
  // Fraction of BF16 peak reached by attention. Not fitted: FlashMLA's measured 640 TFLOP/s
  // sparse prefill on H800 (PAPER.md §13.3) = 0.647 of 989.
  double attention_mfu = 0.647;
  // Fixed cost per layer per forward pass (kernel launches, EP dispatch/combine latency, the
  // sync before MoE). Fitted to the shape of PAPER.md Fig. 3 right (batch 1, 5, 10, 20 of 30K+300
  // tokens: 1, 2.58, 2.92, 3.01; least squares).
  double layer_overhead_s = 0.00445;
  // The same fixed cost when the EP group stays inside one node (NVLink all-to-all, no RDMA
  // round trips between nodes). Fitted under the previous factors to DS 27B's worst DualPath/Oracle
  // JCT ratio on 1P1D in Fig. 7 (PAPER.md §10.1: 1.85x); kept (docs/calibration.md, Known
  // deviations: no value reaches 1.85x under the current storage efficiency).
  double intra_node_layer_overhead_s = 0.002;
  // Fixed cost per request per layer of a prefill pass (per-request metadata, its attention and
  // indexer launches, its KV gather), on the GPU that runs the request's attention. Not fitted:
  // 0 (none). A what-if knob: docs/calibration.md shows what a non-zero value does to the paper's
  // checks and to the batching curve of Fig. 3 right.
  double request_overhead_s = 0.0;
  // Fixed cost of one decode iteration (EP all-to-all latency over all layers, sampling).
  // Fitted to Table 3's TPOT (2P4D, 0.4 APS: 39 ms); still 38.5-39.1 ms offline after the
  // recalibration of the prefill factors (docs/calibration.md).
  double decode_step_overhead_s = 0.025;
  // Fraction of HBM bandwidth reached by decode reads. Not fitted: FlashMLA's 3,000 of 3,350 GB/s.
  double decode_mbu = 0.9;
  // Fraction of tensor peak a decode step's FLOPs reach when they are charged on top of its HBM
  // reads instead of overlapping them (step = overhead + memory + FLOPs / (decode_mfu * peak)).
  // Not fitted: 0 (none: the step is max(memory, FLOPs at linear_mfu)). A what-if knob:
  // docs/calibration.md shows what a non-zero value does to the paper's online checks.
  double decode_mfu = 0.0;
  // Fraction of a storage NIC's line rate the storage client sustains for KV reads and writes.
  // Fitted, with the Basic KV budget (sim/sim_config.h), to the ablation (PAPER.md §10.5, Fig. 12
  // right: -17.21 / -38.19 / -45.62 % JCT vs Basic at 1,024 and 2,048 agents; least squares).
  double storage_efficiency = 0.95;

  Status validate() const;

  bool operator==(const Efficiency&) const = default;
};

// What one node's storage NICs deliver to the storage client: line rate x storage_efficiency,
// bytes per second. The simulator's SNIC servers and the live system's emulated limiter both run
// at it.
double usable_snic_bytes_per_s(const HardwareSpec& hw, const Efficiency& eff);

struct PrefillWork {
  int64_t cached_tokens = 0;  // KV available (storage hit or an earlier chunk)
  int64_t new_tokens = 0;     // tokens computed now (bsz in PAPER.md §8.4)
};

class CostModel {
 public:
  CostModel(ModelSpec model, HardwareSpec hw, Efficiency eff = {});

  const ModelSpec& model() const { return model_; }
  const HardwareSpec& hardware() const { return hw_; }
  const Efficiency& efficiency() const { return eff_; }

  double attention_s(const PrefillWork& w) const;
  double attention_s(std::span<const PrefillWork> batch) const;
  double linear_s(double new_tokens) const;
  // The fixed cost of a forward pass of an EP group of `group_gpus` GPUs: per layer, the
  // cross-node overhead if the group spans more than one node, else the intra-node one.
  double pass_overhead_s(int group_gpus) const;
  // One GPU of an EP group of `group_gpus` running `batch` (its peers perfectly balanced).
  double prefill_s(std::span<const PrefillWork> batch, int group_gpus) const;
  // A forward pass of an EP group: the slowest GPU's attention plus the shared MoE time.
  double group_pass_s(double max_attention_s, double total_new_tokens, int group_size) const;

  // One decode iteration on one DE GPU; `ep_size` DE GPUs share the weights.
  double decode_step_s(int batch, double context_tokens_sum, int ep_size) const;

  // KV bytes per GPU HBM available to a non-layerwise prefill batch: HBM minus the weights
  // share minus `reserved_bytes` (activations, workspace).
  double hbm_kv_budget_bytes(int ep_size, double reserved_bytes) const;

  // Cache-compute ratio in GB per PFLOP (PAPER.md §1, §13.1): the KV of a `ctx`-token prefix
  // over the FLOPs of `append` new tokens. Counts the attention cache only, as the paper does.
  double cache_compute_ratio(int64_t ctx, int64_t append = 429) const;

  // Prompt tokens per second one GPU of an EP group of `group_gpus` sustains on requests of this
  // shape (for beta, PAPER §8.5).
  double prefill_tokens_per_s(int64_t cached, int64_t new_tokens, int batch,
                              int group_gpus) const;

 private:
  double linear_peak() const;
  ModelSpec model_;
  HardwareSpec hw_;
  Efficiency eff_;
};

}  // namespace dualpath::model
