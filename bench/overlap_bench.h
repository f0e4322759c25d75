#pragma once
// The layerwise overlap benchmark (`dualpath bench overlap`; issue 5 "Overlap"): one request
// whose hit KV loads layer by layer while the previous layer computes, on the modeled backend,
// against the same request with no loads at all (the oracle path: compute only).
//
//   1. turn 0 recomputes a prompt of `hit_tokens` (+1) tokens and persists its blocks;
//   2. turn 1 appends `append_tokens` and is prefilled `repeats` times by each path: oracle
//      (compute only), de (layer l's hit KV pushed from the DE buffer into PE HBM while layer
//      l-1 computes) and pe (the same from the PE buffer; its storage read comes first and is
//      reported apart);
//   3. each path's layer-loop time (the sum of the per-layer load waits and computes) is
//      compared with the oracle's: the overlap is good when it is within a few percent.
//
// The per-layer timeline of the median run of each path is kept for printing. Layer 0's load
// wait is one layer's load time with nothing to hide behind (the pipeline's fill).
//
// Threads: blocking; uses the cluster from one thread.

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "serve/cluster.h"

namespace dualpath::bench {

using engine::HopBytes;
using Json = nlohmann::json;
using serve::TurnRequest;
using serve::TurnResult;

struct OverlapOptions {
  int64_t hit_tokens = 16384;
  int64_t append_tokens = 512;
  int repeats = 5;
  uint64_t seed = 1;
};

struct OverlapPathResult {
  std::string path;
  std::vector<double> loop_s;         // per repeat: sum over layers of load wait + compute
  double loop_median_s = 0;
  double ratio_to_compute_only = 0;   // loop_median_s / the oracle's
  double layer0_load_s = 0;           // the median run's first load wait
  double max_layer_load_s = 0;        // the median run's largest load wait
  double compute_per_layer_s = 0;     // the median run's mean compute per layer
  std::vector<std::pair<double, double>> timeline;  // (load wait, compute) per layer, median run
};

struct OverlapResult {
  int64_t layers = 0;
  int64_t hit_tokens = 0;
  int64_t prompt_tokens = 0;
  int64_t layer_load_bytes = 0;  // hit KV bytes of one layer
  std::vector<OverlapPathResult> paths;  // oracle, de, pe

  Json to_json() const;
  // The comparison, then the per-layer timeline of each path side by side.
  std::string table() const;
};

// kInvalidArgument naming the flag: a CPU-model config, hits not whole blocks, no repeats.
Status validate_overlap_options(const OverlapOptions& options, const engine::EngineConfig& cfg);

Result<OverlapResult> run_overlap_bench(serve::Cluster& cluster, const OverlapOptions& options);

}  // namespace dualpath::bench
