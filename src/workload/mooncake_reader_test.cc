#include "workload/mooncake_reader.h"
#include "workload/test_trace_file.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <unistd.h>

namespace dualpath::workload {
namespace {

namespace fs = std::filesystem;

std::string shared_trace(const char* file) {
  const char* shared = std::getenv("DUALPATH_SHARED_DIR");
  if (shared == nullptr) return {};
  return std::string(shared) + "/traces/mooncake_fast25/" + file;
}

using TempFile = TestTraceFile;

TEST(MooncakeReader, RealTracesMatchTheCountsAndHitRatiosOfSourceMd) {
  const std::string conv = shared_trace("conversation_trace.jsonl");
  if (conv.empty() || !fs::exists(conv)) GTEST_SKIP() << "shared/traces not found";
  auto t = read_mooncake(conv);
  ASSERT_TRUE(t.is_ok()) << t.status().message();
  EXPECT_EQ(t->requests.size(), 12031u);
  EXPECT_EQ(t->distinct_blocks, 182790u);
  EXPECT_NEAR(t->requests.back().arrival_s, 3537, 1.0);
  // SOURCE.md: prefix-token hit ratio 37.3 % (conversation), 65.0 % (synthetic).
  EXPECT_NEAR(static_prefix_hit_ratio(*t), 0.373, 0.002);
  auto s = read_mooncake(shared_trace("synthetic_trace.jsonl"));
  ASSERT_TRUE(s.is_ok()) << s.status().message();
  EXPECT_EQ(s->requests.size(), 3993u);
  EXPECT_NEAR(static_prefix_hit_ratio(*s), 0.650, 0.002);
}

TEST(MooncakeReader, SharedIdsAreOneDenseBlockAndArrivalsAreSorted) {
  TempFile f(
      "{\"timestamp\": 2000, \"input_length\": 1024, \"output_length\": 5, \"hash_ids\": [7, 9]}\n"
      "\n"
      "{\"timestamp\": 1000, \"input_length\": 600, \"output_length\": 0, \"hash_ids\": [7, 8]}\n");
  auto t = read_mooncake(f.path());
  ASSERT_TRUE(t.is_ok()) << t.status().message();
  ASSERT_EQ(t->requests.size(), 2u);
  EXPECT_DOUBLE_EQ(t->requests[0].arrival_s, 1.0);
  EXPECT_EQ(t->distinct_blocks, 3u);
  EXPECT_EQ(t->requests[0].block_ids[0], t->requests[1].block_ids[0]);
  EXPECT_EQ(t->requests[0].full_blocks(512), 1);
  // The second request's first block (id 7) was a full block of the first: 512 of 1624 tokens.
  EXPECT_NEAR(static_prefix_hit_ratio(*t), 512.0 / 1624.0, 1e-12);
}

TEST(MooncakeReader, BadLinesNameTheFileLineAndField) {
  const std::pair<const char*, const char*> cases[] = {
      {"{\"timestamp\": 0, \"input_length\": 10", "not valid JSON"},
      {"[1, 2]", "not a JSON object"},
      {"{\"input_length\": 10, \"output_length\": 1, \"hash_ids\": [1]}", "'timestamp'"},
      {"{\"timestamp\": -5, \"input_length\": 10, \"output_length\": 1, \"hash_ids\": [1]}",
       "'timestamp'"},
      {"{\"timestamp\": 0, \"input_length\": \"10\", \"output_length\": 1, \"hash_ids\": [1]}",
       "'input_length'"},
      {"{\"timestamp\": 0, \"input_length\": 10, \"output_length\": -1, \"hash_ids\": [1]}",
       "'output_length'"},
      {"{\"timestamp\": 0, \"input_length\": 10, \"output_length\": 1, \"hash_ids\": 3}",
       "'hash_ids'"},
      {"{\"timestamp\": 0, \"input_length\": 1000, \"output_length\": 1, \"hash_ids\": [1]}",
       "needs ceil(1000 / 512) = 2"},
      {"{\"timestamp\": 0, \"input_length\": 10, \"output_length\": 1, \"hash_ids\": [-1]}",
       "'hash_ids' entry"},
  };
  for (auto [text, want] : cases) {
    TempFile f(std::string("{\"timestamp\": 0, \"input_length\": 1, \"output_length\": 1, "
                           "\"hash_ids\": [0]}\n") +
               text + "\n");
    auto t = read_mooncake(f.path());
    ASSERT_FALSE(t.is_ok()) << text;
    EXPECT_NE(t.status().message().find(f.path() + ":2:"), std::string::npos)
        << t.status().message();
    EXPECT_NE(t.status().message().find(want), std::string::npos) << t.status().message();
  }
}

TEST(MooncakeReader, MissingAndEmptyFilesAreClearErrors) {
  auto missing = read_mooncake("/nonexistent/trace.jsonl");
  ASSERT_FALSE(missing.is_ok());
  EXPECT_NE(missing.status().message().find("does not exist"), std::string::npos);
  TempFile empty("\n\n");
  auto e = read_mooncake(empty.path());
  ASSERT_FALSE(e.is_ok());
  EXPECT_NE(e.status().message().find("no requests"), std::string::npos);
}

}  // namespace
}  // namespace dualpath::workload
