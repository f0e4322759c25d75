#pragma once
// Clusters for the engine tests: node processes (dp_engine_node), UCX over shared memory, block
// files in the test's temporary directory.

#include <string>

#include "engine/local_cluster.h"

namespace dualpath::engine {

// The tiny CPU transformer, 64 MiB buffers and arenas.
inline ClusterOptions test_cluster(const std::string& dir, int decode_nodes) {
  ClusterOptions o;
  o.node_program = DP_ENGINE_NODE_PATH;
  o.node_args = {};
  o.config.model = "tiny";
  o.config.decode_nodes = decode_nodes;
  o.config.data_paths = {dir};
  o.config.pe_dram_buffer_bytes = 64ull << 20;
  o.config.de_dram_buffer_bytes = 64ull << 20;
  o.config.hbm_bytes = 64ull << 20;
  o.config.request_timeout = std::chrono::seconds(30);
  return o;
}

// model/'s tiny preset priced by the CostModel, emulated time 20x faster than real time.
inline ClusterOptions fast_modeled_cluster(const std::string& dir, int decode_nodes) {
  ClusterOptions options = test_cluster(dir, decode_nodes);
  options.config.compute = "modeled";
  options.config.model = "tiny";
  options.config.time_dilation = 0.05;
  return options;
}

}  // namespace dualpath::engine
