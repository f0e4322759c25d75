#include "workload/weka_reader.h"
#include "workload/test_trace_file.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "workload/dataset_stats.h"
#include "workload/shape.h"

namespace dualpath::workload {
namespace {

namespace fs = std::filesystem;

std::string real_trace_path() {
  const char* shared = std::getenv("DUALPATH_SHARED_DIR");
  if (shared == nullptr) return {};
  return std::string(shared) + "/traces/weka_claude_code/weka_traces_compact.jsonl";
}

using TempFile = TestTraceFile;

TEST(WekaReaderTest, RealFileMatchesSourceMd) {
  const std::string path = real_trace_path();
  if (path.empty() || !fs::exists(path)) GTEST_SKIP() << "no WEKA trace at '" << path << "'";
  auto ds = read_weka(path);
  ASSERT_TRUE(ds.is_ok()) << ds.status().to_string();
  // SOURCE.md: 710 sessions, 63 sub-agents, 49,334 requests.
  EXPECT_EQ(ds->trajectories.size(), 710u + 63u);
  const DatasetStats st = stats(*ds);
  std::printf(
      "weka: %lld trajectories, %lld turns, hit rate %.4f, mean prompt %.0f, max_len %lld\n",
      static_cast<long long>(st.trajectories), static_cast<long long>(st.turns_total), st.hit_rate,
      st.prompt_per_turn_mean, static_cast<long long>(ds->max_len_tokens));
  EXPECT_EQ(st.turns_total, 49334);
  // SOURCE.md: block hit ratio within session 96.3 % (sub-agents in the parent's namespace); a
  // separate sub-agent trajectory hits only on what it has seen itself; measured 96.30 %.
  EXPECT_NEAR(st.hit_rate, 0.963, 0.002);
  EXPECT_NEAR(st.prompt_per_turn_mean, 122379, 200);  // SOURCE.md mean input tokens
  EXPECT_EQ(ds->max_len_tokens, st.max_total_tokens);
  // Every replayed prompt is exactly the recorded `in`: check the first trace's first turns.
  const auto shapes = shape(ds->trajectories[0]);
  EXPECT_EQ(shapes[0].prompt_tokens, 71175);
  EXPECT_EQ(shapes[1].prompt_tokens, 72762);
  EXPECT_EQ(shapes[1].context_tokens, 1112 * 64);
  EXPECT_EQ(shapes[0].gen_tokens, 169);
  EXPECT_EQ(ds->trajectories[0].turns[1].think_time_s, 12.0);

  WekaOptions no_sub;
  no_sub.include_subagents = false;
  no_sub.max_sessions = 20;
  auto few = read_weka(path, no_sub);
  ASSERT_TRUE(few.is_ok());
  EXPECT_EQ(few->trajectories.size(), 20u);
}

TEST(WekaReaderTest, KeepTokensFollowPrefixTrieSemantics) {
  // Request 2 shares the first 2 blocks of request 1 then diverges (a compaction): keep = 128.
  // Request 3 returns to request 1's blocks 0..3: its leading ids were all seen, keep = 256.
  // The sub-agent is its own trajectory with its own seen-set.
  TempFile f(R"({"id":"x","block_size":64,"requests":[)"
             R"({"type":"n","in":300,"out":20,"think_time":1.5,"hash_ranges":[[0,4]]},)"
             R"({"type":"s","in":200,"out":0,"think_time":0,"hash_ranges":[[0,2],[9,1]]},)"
             R"({"type":"subagent","agent_id":"agent_001","requests":[)"
             R"({"type":"n","in":130,"out":5,"hash_ranges":[[0,2]]}]},)"
             R"({"type":"n","in":400,"out":30,"hash_ids":[0,1,2,3,4,5]}]})"
             "\n\n");
  auto ds = read_weka(f.path());
  ASSERT_TRUE(ds.is_ok()) << ds.status().to_string();
  ASSERT_EQ(ds->trajectories.size(), 2u);
  const auto& t = ds->trajectories[0].turns;
  ASSERT_EQ(t.size(), 3u);
  EXPECT_EQ(t[0].keep_tokens, 0);
  EXPECT_EQ(t[0].append_tokens, 300);
  EXPECT_EQ(t[0].think_time_s, 1.5);
  EXPECT_EQ(t[1].keep_tokens, 128);
  EXPECT_EQ(t[1].append_tokens, 72);
  EXPECT_EQ(t[1].gen_tokens, 1);     // out 0 -> 1
  EXPECT_EQ(t[2].keep_tokens, 256);  // 4 leading blocks seen before
  const auto s = shape(ds->trajectories[0]);
  EXPECT_EQ(s[2].context_tokens, 201);  // but the replay has seen only 200 + 1 tokens last turn
  EXPECT_EQ(t[2].append_tokens, 199);
  EXPECT_EQ(s[2].prompt_tokens, 400);
  EXPECT_EQ(ds->trajectories[1].id, "x/agent_001");
  EXPECT_EQ(ds->trajectories[1].turns[0].keep_tokens, 0);
  EXPECT_EQ(ds->max_len_tokens, 430);
}

TEST(WekaReaderTest, MissingFileIsNotFoundAndNamesThePath) {
  auto ds = read_weka("/nonexistent/dir/trace.jsonl");
  ASSERT_FALSE(ds.is_ok());
  EXPECT_TRUE(ds.status().is_not_found());
  EXPECT_NE(ds.status().message().find("/nonexistent/dir/trace.jsonl"), std::string::npos);
}

TEST(WekaReaderTest, MalformedLinesNameFileAndLine) {
  const std::string good = R"({"id":"a","requests":[{"in":10,"out":1,"hash_ranges":[]}]})";
  struct Case {
    std::string line;
    std::string expect;
  };
  const Case cases[] = {
      {"{not json", "not valid JSON"},
      {R"([1,2,3])", "'requests'"},
      {R"({"requests":[{"out":1}]})", "'in'"},
      {R"({"requests":[{"in":5,"out":-1}]})", "'out'"},
      {R"({"requests":[{"in":5,"out":1,"hash_ranges":[[1]]}]})", "hash_ranges"},
      {R"({"requests":[{"in":5,"out":1,"think_time":"x"}]})", "think_time"},
      {R"({"requests":[{"type":"subagent"}]})", "subagent"},
      {R"({"requests":5})", "not an array"},
  };
  for (const Case& c : cases) {
    TempFile f(good + "\n" + c.line + "\n");
    auto ds = read_weka(f.path());
    ASSERT_FALSE(ds.is_ok()) << c.line;
    EXPECT_TRUE(ds.status().is_invalid_argument()) << c.line;
    EXPECT_NE(ds.status().message().find(f.path() + ":2:"), std::string::npos)
        << ds.status().message();
    EXPECT_NE(ds.status().message().find(c.expect), std::string::npos) << ds.status().message();
  }
  TempFile empty("\n");
  EXPECT_TRUE(read_weka(empty.path()).status().is_invalid_argument());
}

}  // namespace
}  // namespace dualpath::workload
