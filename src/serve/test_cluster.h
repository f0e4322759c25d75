#pragma once
// Clusters for the tests of the live system: the scheduler service on a free loopback port, node
// processes (dp_node_program), UCX over shared memory, block files in the test's temporary
// directory.

#include <cstdint>
#include <string>
#include <vector>

#include "serve/cluster.h"

namespace dualpath::serve {

// The tiny CPU transformer, 64 MiB buffers and arenas, 1 prefill node.
inline ClusterOptions test_cluster(const std::string& dir, int decode_nodes) {
  ClusterOptions o;
  o.node_program = DP_NODE_PROGRAM;
  o.node_args = {};
  o.config.engine.model = "tiny";
  o.config.engine.prefill_nodes = 1;
  o.config.engine.decode_nodes = decode_nodes;
  o.config.engine.data_paths = {dir};
  o.config.engine.pe_dram_buffer_bytes = 64ull << 20;
  o.config.engine.de_dram_buffer_bytes = 64ull << 20;
  o.config.engine.hbm_bytes = 64ull << 20;
  o.config.engine.request_timeout = std::chrono::seconds(30);
  o.config.scheduler.port = 0;  // tests run side by side
  o.config.scheduler.fetch_interval_s = 0.005;
#ifdef DP_SANITIZED
  // Under the sanitizers, with three other suites' clusters on the two cores, a node builds its
  // runtime several times slower.
  o.ready_timeout = std::chrono::seconds(180);
#else
  o.ready_timeout = std::chrono::seconds(60);
#endif
  return o;
}

// A deterministic prompt of n tokens below the tiny vocabulary; `mul` tells prompts apart.
inline std::vector<int32_t> prompt(int n, int mul) {
  std::vector<int32_t> t;
  for (int i = 0; i < n; ++i) t.push_back((i * mul + 7) % 500);
  return t;
}

// model/'s tiny preset priced by the CostModel, emulated time 20x faster than real time.
inline ClusterOptions fast_modeled_cluster(const std::string& dir, int decode_nodes) {
  ClusterOptions options = test_cluster(dir, decode_nodes);
  options.config.engine.compute = "modeled";
  options.config.engine.model = "tiny";
  options.config.engine.time_dilation = 0.05;
  return options;
}

}  // namespace dualpath::serve
