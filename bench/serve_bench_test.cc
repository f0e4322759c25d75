// `dualpath bench serve`'s driver against a real 1P2D cluster (node processes, UCX, block files,
// the tiny CPU model) through its HTTP API: every request answered, later turns hitting the
// earlier ones' KV, and the same greedy replies with DualPath off and on. Speed is not asserted
// (the bench program prints it).
#include "bench/serve_bench.h"

#include <gtest/gtest.h>

#include "serve/test_cluster.h"
#include "store/temp_dir.h"

namespace dualpath::bench {
namespace {

TEST(ServeBench, BasicAndFullServeTheSameSessionsWithTheSameRepliesAndHitTheirKv) {
  store::TempDir dir;
  serve::ServeConfig cfg = serve::test_cluster(dir.path(), 2).config;
  ServeBenchOptions o;
  o.sessions = 3;
  o.turns = 3;
  o.concurrency = 2;
  o.context_tokens = 700;
  o.append_tokens = 40;
  o.max_tokens = 12;
  o.node_program = DP_NODE_PROGRAM;
  std::vector<ServeBenchRun> runs;
  for (serve::ServeMode m : {serve::ServeMode::kBasic, serve::ServeMode::kFull}) {
    // The second run also sends every request to the service's interface (--direct).
    o.direct = m == serve::ServeMode::kFull;
    // vLLM's goodput: an SLO no request can meet in basic, one every request meets in full.
    o.goodput.ttft_ms = m == serve::ServeMode::kFull ? 1e9 : 1e-6;
    auto r = run_serve_bench(cfg, m, o);
    ASSERT_TRUE(r.is_ok()) << r.status().to_string();
    EXPECT_EQ(r->requests, 9) << r->mode;
    EXPECT_EQ(r->errors, 0) << (r->error_samples.empty() ? "" : r->error_samples[0]);
    EXPECT_GT(r->output_tokens, 0);
    // Turns 2 and 3 of every session hit at least the first message's whole blocks.
    const int64_t block = cfg.engine.block_tokens;
    EXPECT_GE(r->cached_tokens, 3 * 2 * (o.context_tokens / block * block)) << r->mode;
    EXPECT_GT(r->storage_read_bytes, 0);
    EXPECT_EQ(r->ttft_s.count, 9);
    EXPECT_EQ(r->ttft_first_turn_s.count, 3);
    EXPECT_EQ(r->ttft_later_turns_s.count, 6);
    EXPECT_GT(r->ttft_s.p50, 0);
    EXPECT_GE(r->e2e_s.p50, r->ttft_s.p50);
    if (m == serve::ServeMode::kBasic) {
      // The first turns read nothing: their read_path is "none" (issue 37).
      EXPECT_EQ(r->read_paths["pe"], 6) << "basic reads by the PE path only";
      EXPECT_EQ(r->read_paths["none"], 3);
    }
    runs.push_back(std::move(r).value());
  }
  for (const ServeBenchRun& r : runs) {
    ASSERT_EQ(r.per_round.size(), 3u) << r.mode;
    EXPECT_EQ(r.per_round[0].hit_ratio, 0.0) << "a session's first turn has nothing cached";
    EXPECT_GT(r.per_round[1].hit_ratio, 0.5) << r.mode;
    EXPECT_EQ(r.per_round[2].requests, 3);
    EXPECT_EQ(r.per_round[2].ttft_s.count, 3);
    ASSERT_TRUE(r.goodput_slo.has_value());
    EXPECT_EQ(r.records.size(), 9u);
  }
  EXPECT_EQ(runs[0].good_requests, 0);
  EXPECT_EQ(runs[1].good_requests, 9);
  EXPECT_GT(runs[1].request_goodput, 0);
  EXPECT_EQ(runs[1].to_json()["per_round"].size(), 3u);
  EXPECT_EQ(runs[1].to_json()["goodput"]["good_requests"], 9);
  const Json vllm = vllm_result_json(runs[1], {"m", "m", 2});
  EXPECT_EQ(vllm["completed"], 9);
  EXPECT_EQ(vllm["ttfts"].size(), 9u);
  EXPECT_GT(vllm["request_goodput"].get<double>(), 0);
  EXPECT_EQ(runs[0].session_digests, runs[1].session_digests)
      << "greedy replies differ between basic and full";
  const Json j = runs[1].to_json();
  for (const char* k : {"mode", "requests", "errors", "output_tokens_per_s", "ttft_s", "tpot_s",
                        "cached_tokens"}) {
    EXPECT_TRUE(j.contains(k)) << k;
  }
  EXPECT_TRUE(j["ttft_s"].contains("p50") && j["ttft_s"].contains("p99"));
  const std::string table = serve_bench_table(runs);
  EXPECT_NE(table.find("full/basic"), std::string::npos) << table;

  // --direct: the same 9 prompts through run_turn, token for token the API's (its own parser
  // made them from the same bodies), each timed.
  EXPECT_FALSE(runs[0].direct.has_value());
  EXPECT_FALSE(runs[0].to_json().contains("direct"));
  ASSERT_TRUE(runs[1].direct.has_value());
  const DirectRun& d = *runs[1].direct;
  EXPECT_EQ(d.requests, 9) << (d.error_samples.empty() ? "" : d.error_samples[0]);
  EXPECT_EQ(d.errors, 0);
  EXPECT_EQ(d.prompt_mismatches, 0);
  EXPECT_EQ(d.ttft_s.count, 9);
  EXPECT_GT(d.ttft_s.p50, 0);
  EXPECT_GE(d.e2e_s.p50, d.ttft_s.p50);
  ASSERT_TRUE(j.contains("direct") && j.contains("api_overhead")) << j.dump();
  for (const char* k : {"ttft_p50_ms", "ttft_p99_ratio", "tpot_p50_ms", "tpot_p99_ratio"})
    EXPECT_TRUE(j["api_overhead"].contains(k)) << k;
  EXPECT_NE(table.find("API adds"), std::string::npos) << table;
}

TEST(ServeBench, TextIsDeterministicAndExactlyAsLong) {
  EXPECT_EQ(bench_text(7, 1000), bench_text(7, 1000));
  EXPECT_NE(bench_text(7, 1000), bench_text(8, 1000));
  EXPECT_EQ(bench_text(3, 1).size(), 1u);
  EXPECT_EQ(bench_text(3, 12345).size(), 12345u);
}

}  // namespace
}  // namespace dualpath::bench
