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
  // Ours beside vLLM's lists: per request its turn, cached tokens and read path.
  ASSERT_EQ(vllm["dualpath_cached_tokens"].size(), 9u);
  int64_t cached = 0;
  for (const auto& c : vllm["dualpath_cached_tokens"]) cached += c.get<int64_t>();
  EXPECT_EQ(cached, runs[1].cached_tokens);
  EXPECT_EQ(vllm["dualpath_rounds"].size(), 9u);
  EXPECT_EQ(vllm["dualpath_read_paths"].size(), 9u);
  EXPECT_EQ(vllm["endpoint_type"], "openai-chat");
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

// TraceReplay's prompt rule: each prompt is its plan's length, a turn's kept context is the
// session's text so far (so the server can hit it), and content-addressed requests share the text
// of their shared leading block ids and nothing after.
TEST(ServeBench, TracePromptsReproduceThePlansPrefixStructure) {
  sim::AgentPlan agent;
  agent.turns = {{0, 100, 5}, {105, 160, 7}, {60, 90, 3}};  // the last keeps only 60 tokens
  TracePrompts prompts(agent, 1, 0);
  std::vector<std::string> p;
  for (int t = 0; t < 3; ++t) p.push_back(prompts.next(t));
  for (int t = 0; t < 3; ++t) EXPECT_EQ(p[t].size(), static_cast<size_t>(agent.turns[t].prompt_tokens));
  EXPECT_EQ(p[1].substr(0, 100), p[0]) << "turn 1 keeps turn 0's prompt";
  EXPECT_NE(p[1].substr(100, 5), bench_text(1, 5)) << "then the stand-in reply, then new text";
  EXPECT_EQ(p[2].substr(0, 60), p[1].substr(0, 60)) << "turn 2 keeps 60 tokens";
  EXPECT_NE(p[2].substr(60), p[1].substr(60, 30)) << "and nothing after them";
  TracePrompts again(agent, 1, 0), other(agent, 1, 1);
  EXPECT_EQ(again.next(0), p[0]);
  EXPECT_NE(other.next(0), p[0]) << "sessions do not share text";

  sim::AgentPlan a, b;
  a.prefix_block_tokens = b.prefix_block_tokens = 10;
  a.turns = {{0, 25, 1}};
  a.prefix_blocks = {4, 5, 6};
  b.turns = {{0, 30, 1}};
  b.prefix_blocks = {4, 5, 9};
  const std::string ta = TracePrompts(a, 1, 0).next(0), tb = TracePrompts(b, 1, 1).next(0);
  EXPECT_EQ(ta.size(), 25u);
  EXPECT_EQ(tb.size(), 30u);
  EXPECT_EQ(ta.substr(0, 20), tb.substr(0, 20)) << "blocks 4 and 5 are the same text";
  EXPECT_NE(ta.substr(20, 5), tb.substr(20, 5)) << "block 6 is not block 9";
  // The trace's rule: b hits a's two full leading blocks (20 of its 30 tokens), a nothing.
  EXPECT_DOUBLE_EQ(trace_hit_ratio({a, b}), 20.0 / 55.0);
}

// make_trace_replay: the simulator's sessions for the spec (scaled, capped), bad flags named.
TEST(ServeBench, TraceReplayTakesTheSimulatorsSessionsScaledAndCapped) {
  auto base = sim::default_sim_config("ds660b");
  ASSERT_TRUE(base.is_ok());
  TraceSpec spec;
  spec.dataset = "table2:32k";
  spec.sessions = 3;
  spec.max_turns = 4;
  spec.length_scale = 0.1;
  auto t = make_trace_replay(*base, spec, 0.5);
  ASSERT_TRUE(t.is_ok()) << t.status().to_string();
  ASSERT_EQ(t->plans.size(), 3u);
  spec.length_scale = 1;
  auto full = make_trace_replay(*base, spec, 0.5);
  ASSERT_TRUE(full.is_ok());
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(t->plans[i].turns.size(), 4u);
    EXPECT_EQ(t->plans[i].start_s, 0.0) << "all at once";
    // Turn 1 is the trajectory's first: its append is the scaled one.
    EXPECT_NEAR(static_cast<double>(t->plans[i].turns[1].prompt_tokens - t->plans[i].turns[1].context_tokens),
                0.1 * static_cast<double>(full->plans[i].turns[1].prompt_tokens -
                                          full->plans[i].turns[1].context_tokens),
                1.0);
  }
  EXPECT_TRUE(t->sim.has_value());
  EXPECT_EQ(t->time_dilation, 0.5);
  spec.sessions_per_s = 2;
  auto poisson = make_trace_replay(*base, spec, 1);
  ASSERT_TRUE(poisson.is_ok());
  EXPECT_GT(poisson->plans.back().start_s, poisson->plans.front().start_s);
  spec.length_scale = 0;
  auto bad = make_trace_replay(*base, spec, 1);
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("--length-scale"), std::string::npos);
  spec.length_scale = 1;
  spec.dataset = "12k";
  EXPECT_FALSE(make_trace_replay(*base, spec, 1).is_ok());
}

// A trace through the API of a real cluster (the tiny CPU model): every turn answered with the
// trace's output length (ignore_eos), later turns hitting what earlier ones stored, and the
// simulator's prediction for the same sessions beside it.
TEST(ServeBench, ATraceGoesThroughTheApiWithItsLengthsAndHits) {
  store::TempDir dir;
  serve::ServeConfig cfg = serve::test_cluster(dir.path(), 2).config;
  auto base = sim::default_sim_config("ds660b");
  ASSERT_TRUE(base.is_ok());
  base->block_tokens = static_cast<int>(cfg.engine.block_tokens);
  TraceSpec spec;
  spec.dataset = "32k";
  spec.sessions = 2;
  spec.max_turns = 3;
  spec.length_scale = 0.02;  // 32k contexts -> ~700 tokens: the tiny model's context
  auto t = make_trace_replay(*base, spec, 1);
  ASSERT_TRUE(t.is_ok()) << t.status().to_string();
  ServeBenchOptions o;
  o.trace = std::move(t).value();
  o.concurrency = 2;
  o.node_program = DP_NODE_PROGRAM;
  auto r = run_serve_bench(cfg, serve::ServeMode::kFull, o);
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_EQ(r->errors, 0) << (r->error_samples.empty() ? "" : r->error_samples[0]);
  EXPECT_EQ(r->requests, 6);
  EXPECT_EQ(r->output_len_mismatches, 0) << "ignore_eos: every reply as long as the trace's";
  int64_t planned_prompt = 0;
  for (const auto& p : o.trace->plans) {
    for (const auto& turn : p.turns) planned_prompt += turn.prompt_tokens;
  }
  // One byte, one token, and the begin token the completions endpoint puts first.
  EXPECT_EQ(r->prompt_tokens, planned_prompt + r->requests) << "the trace's lengths";
  ASSERT_EQ(r->per_round.size(), 3u);
  EXPECT_GT(r->per_round[2].hit_ratio, 0.3) << "turn 2 keeps turn 1's context";
  ASSERT_TRUE(r->sim.has_value());
  EXPECT_EQ(r->sim->turns, 6);
  const Json j = r->to_json();
  ASSERT_TRUE(j["sim"].is_object());
  const Json vllm = vllm_result_json(*r, {"m", "m", 2});
  EXPECT_EQ(vllm["endpoint_type"], "openai") << "a trace's turns are completions";
  EXPECT_EQ(vllm["dualpath_read_paths"].size(), 6u);
  EXPECT_TRUE(j["sim"].contains("live_emulated"));
  EXPECT_NE(trace_vs_sim_table({*r}, trace_hit_ratio(o.trace->plans)).find("TTFT p99"),
            std::string::npos);
}

}  // namespace
}  // namespace dualpath::bench
