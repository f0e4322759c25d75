// Engine tests with real parts: node processes (dp_engine_node) spawned by a LocalCluster, UCX
// over shared memory, block files in a per-test temporary directory, the tiny CPU transformer.
#include <gtest/gtest.h>

#include <cmath>

#include "engine/demo.h"
#include "engine/engine_config.h"
#include "engine/local_cluster.h"
#include "store/temp_dir.h"

namespace dualpath::engine {
namespace {

using store::TempDir;

ClusterOptions test_cluster(const std::string& dir, int decode_nodes) {
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

TEST(Engine, OneSessionAllPathsAgree) {
  DemoOptions demo;
  demo.sessions = 1;
  demo.turns = 4;
  demo.first_prompt_tokens = 200;
  std::vector<DemoReport> reports;
  for (PathChoice path : {PathChoice::kRecompute, PathChoice::kPe, PathChoice::kDe}) {
    TempDir dir;
    auto cluster = LocalCluster::start(test_cluster(dir.path(), 1));
    ASSERT_TRUE(cluster.is_ok()) << cluster.status().to_string();
    demo.path = path;
    auto report = run_demo(**cluster, demo, {});
    ASSERT_TRUE(report.is_ok()) << report.status().to_string();
    reports.push_back(std::move(report).value());
    fprintf(stderr, "%s", reports.back().table().c_str());
  }
  for (size_t i = 1; i < reports.size(); ++i) {
    ASSERT_EQ(reports[i].turns.size(), reports[0].turns.size());
    for (size_t t = 0; t < reports[0].turns.size(); ++t) {
      EXPECT_EQ(reports[i].turns[t].result.output_tokens, reports[0].turns[t].result.output_tokens)
          << "path " << i << " turn " << t;
    }
  }
}

}  // namespace
}  // namespace dualpath::engine
