// Concurrent parts of the live system, small enough for ThreadSanitizer (the `tsan` label): the
// live benchmark's agent threads against the scheduler service and node processes serving
// several requests at once on their control workers, with the modeled backend.
#include <gtest/gtest.h>

#include "bench/demo.h"
#include "bench/live_bench.h"
#include "bench/overlap_bench.h"
#include "serve/test_cluster.h"
#include "store/temp_dir.h"

namespace dualpath::bench {
namespace {

using serve::Cluster;
using serve::ClusterOptions;
using serve::fast_modeled_cluster;
using store::TempDir;

// The live benchmark's replay: every mode runs the same turns, the PE and auto paths read each
// hit block from storage exactly once, and the oracle (which persists nothing) is told the same
// hits and moves no KV bytes at all.
TEST(LiveBench, EveryModeReplaysTheSameTurnsAndReadsEachHitOnce) {
  // context (kept), prompt, generation; 64-token blocks.
  const std::vector<workload::TurnShape> shapes = {
      {0, 300, 20}, {320, 520, 20}, {540, 700, 10}, {710, 900, 5}};
  std::vector<sim::AgentPlan> agents(2);
  for (auto& a : agents) a.turns = shapes;
  std::vector<LiveBenchResult> results;
  for (sched::PathRequest path : {sched::PathRequest(sched::ReadPath::kPe), sched::PathRequest(), sched::PathRequest(sched::ReadPath::kOracle)}) {
    TempDir dir;
    auto options = fast_modeled_cluster(dir.path(), 2);
    if (path == sched::PathRequest(sched::ReadPath::kOracle)) {
      options.config.scheduler.mode = serve::ServeMode::kOracle;
    }
    auto cluster = Cluster::start(options);
    ASSERT_TRUE(cluster.is_ok()) << cluster.status().to_string();
    LiveBenchOptions lo;
    lo.path = path == sched::PathRequest(sched::ReadPath::kOracle) ? sched::PathRequest() : path;
    auto r = run_live_bench(**cluster, agents, lo);
    ASSERT_TRUE(r.is_ok()) << r.status().to_string();
    auto shape = engine::model_kv_shape((*cluster)->config().engine);
    ASSERT_TRUE(shape.is_ok());
    const int64_t kv_per_token = shape->layers * shape->bytes_per_token_per_layer;
    EXPECT_EQ(r->turns, 8);
    // Hits: each turn's kept context less its last token (generated, so its KV is computed by
    // the next prefill), whole blocks: 0 + 256 + 512 + 704 per agent.
    EXPECT_EQ(r->hit_tokens, 2 * (0 + 256 + 512 + 704)) << "path " << sched::path_request_name(path);
    EXPECT_EQ(r->prompt_tokens, 2 * (300 + 520 + 700 + 900));
    if (path == sched::PathRequest(sched::ReadPath::kOracle)) {
      EXPECT_EQ(r->bytes.storage_read + r->bytes.pe_h2d + r->bytes.de_to_pe +
                    r->bytes.pd_transfer + r->bytes.de_h2d + r->bytes.persist,
                0);
    } else {
      EXPECT_EQ(r->bytes.storage_read, r->hit_tokens * kv_per_token);
      EXPECT_EQ(r->bytes.pe_h2d + r->bytes.de_to_pe, r->bytes.storage_read);
      EXPECT_EQ(r->storage_read_by_node[0] + r->storage_read_by_node[1] +
                    r->storage_read_by_node[2],
                r->bytes.storage_read);
    }
    if (path == sched::PathRequest(sched::ReadPath::kPe)) {
      EXPECT_EQ(r->pe_path_turns, 8);
    }
    EXPECT_GT(r->jct_s, r->jct_real_s);  // emulated time runs 20x faster than real time
    EXPECT_EQ(r->failed_turns, 0);
  }
}

// The overlap benchmark runs each path over the same hits and keeps a timeline of every layer
// (its timing is a benchmark's business, not a test's).
TEST(OverlapBench, TimesEveryPathOverTheSameHits) {
  TempDir dir;
  auto cluster = Cluster::start(fast_modeled_cluster(dir.path(), 1));
  ASSERT_TRUE(cluster.is_ok()) << cluster.status().to_string();
  OverlapOptions o;
  o.hit_tokens = 512;
  o.append_tokens = 64;
  o.repeats = 2;
  auto r = run_overlap_bench(**cluster, o);
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  ASSERT_EQ(r->paths.size(), 3u);
  for (const auto& p : r->paths) {
    EXPECT_EQ(static_cast<int64_t>(p.timeline.size()), r->layers) << p.path;
    EXPECT_EQ(p.loop_s.size(), 2u);
    EXPECT_GT(p.loop_median_s, 0) << p.path;
  }
  EXPECT_EQ(r->paths[0].path, "oracle");
  EXPECT_DOUBLE_EQ(r->paths[0].ratio_to_compute_only, 1.0);
}

// Four sessions at once over two decode nodes by the auto path, with the decode nodes' DRAM
// tier on (issue 35: its copies run on a thread of their own), give the tokens of the same
// sessions run one turn at a time without it (the modeled backend's tokens digest the KV they
// consume).
TEST(EngineConcurrency, ConcurrentSessionsGiveTheTokensOfSequentialOnes) {
  std::vector<DemoReport> reports;
  for (bool concurrent : {true, false}) {
    TempDir dir;
    ClusterOptions options = fast_modeled_cluster(dir.path(), 2);
    if (concurrent) options.config.cache.de_dram_bytes = 64e6 / options.config.engine.kv_scale;
    auto cluster = Cluster::start(options);
    ASSERT_TRUE(cluster.is_ok()) << cluster.status().to_string();
    DemoOptions demo;
    demo.sessions = 4;
    demo.turns = 4;
    demo.first_prompt_tokens = 256;
    demo.path = sched::PathRequest();
    demo.concurrent = concurrent;
    auto report = run_demo(**cluster, demo, {});
    ASSERT_TRUE(report.is_ok()) << report.status().to_string();
    reports.push_back(std::move(report).value());
  }
  ASSERT_EQ(reports[0].turns.size(), reports[1].turns.size());
  int64_t from_dram = 0;
  for (size_t i = 0; i < reports[0].turns.size(); ++i) {
    EXPECT_EQ(reports[0].turns[i].result.output_tokens, reports[1].turns[i].result.output_tokens)
        << "turn " << i;
    EXPECT_EQ(reports[0].turns[i].result.hit_tokens, reports[1].turns[i].result.hit_tokens);
    EXPECT_EQ(reports[1].turns[i].result.bytes.de_dram, 0);
    from_dram += reports[0].turns[i].result.bytes.de_dram;
  }
  EXPECT_GT(from_dram, 0) << "no turn took its hit from a decode node's DRAM tier";
}

}  // namespace
}  // namespace dualpath::bench
