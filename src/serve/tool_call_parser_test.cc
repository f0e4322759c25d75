// HermesToolCallParser on constructed replies (the tiny byte model cannot call tools): content
// and calls apart, and the same result however the reply was cut into stream pieces.
#include "serve/tool_call_parser.h"

#include <gtest/gtest.h>

#include <random>

namespace dualpath::serve {
namespace {

struct Parsed {
  std::string content;
  std::vector<ParsedToolCall> calls;
};

Parsed parse_in_pieces(std::string_view text, size_t piece_bytes) {
  HermesToolCallParser p;
  Parsed out;
  auto take = [&](HermesToolCallParser::Piece piece) {
    out.content += piece.content;
    for (auto& c : piece.calls) out.calls.push_back(std::move(c));
  };
  for (size_t i = 0; i < text.size(); i += piece_bytes) take(p.push(text.substr(i, piece_bytes)));
  take(p.finish());
  return out;
}

Parsed parse(std::string_view text) { return parse_in_pieces(text, text.size() + 1); }

TEST(HermesToolCallParser, AReplyWithoutToolCallsComesOutUnchanged) {
  for (std::string text : {"Hello, world.", "", "  spaced  \n", "a <tool but not a tag", "<tool_ca",
                           "x < y and y > z", "\xEF\xBF\xBD tail"}) {
    for (size_t piece : {1, 2, 3, 100}) {
      const Parsed p = parse_in_pieces(text, piece);
      EXPECT_EQ(p.content, text) << "piece " << piece;
      EXPECT_TRUE(p.calls.empty());
    }
  }
}

TEST(HermesToolCallParser, ACallBecomesAToolCallAndTheTextBeforeItTheContent) {
  const Parsed p = parse(
      "Let me look that up.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": "
      "{\"city\": \"Paris\", \"unit\": \"c\"}}\n</tool_call>");
  EXPECT_EQ(p.content, "Let me look that up.");
  ASSERT_EQ(p.calls.size(), 1u);
  EXPECT_EQ(p.calls[0].name, "get_weather");
  EXPECT_EQ(p.calls[0].arguments, R"({"city":"Paris","unit":"c"})");
}

TEST(HermesToolCallParser, TwoCallsAndNoContentGiveEmptyContent) {
  const Parsed p = parse(
      "<tool_call>\n{\"name\": \"a\", \"arguments\": {}}\n</tool_call>\n<tool_call>\n"
      "{\"name\": \"b\", \"arguments\": \"{\\\"x\\\": 1}\"}\n</tool_call>\n");
  EXPECT_EQ(p.content, "");
  ASSERT_EQ(p.calls.size(), 2u);
  EXPECT_EQ(p.calls[0].name, "a");
  EXPECT_EQ(p.calls[0].arguments, "{}");
  EXPECT_EQ(p.calls[1].name, "b");
  EXPECT_EQ(p.calls[1].arguments, R"({"x":1})");  // arguments given as a JSON string
}

TEST(HermesToolCallParser, ABlockThatIsNotACallStaysContentVerbatim) {
  for (std::string block :
       {"<tool_call>not json</tool_call>", "<tool_call>{\"arguments\": {}}</tool_call>",
        "<tool_call>{\"name\": 5}</tool_call>",
        "<tool_call>{\"name\": \"f\", \"arguments\": [1]}</tool_call>"}) {
    const Parsed p = parse("before " + block);
    EXPECT_EQ(p.content, "before" + block) << block;  // the space before a tag is dropped
    EXPECT_TRUE(p.calls.empty()) << block;
  }
}

TEST(HermesToolCallParser, ABlockCutOffByTheEndCountsWhenItsJsonIsWhole) {
  const Parsed whole = parse("<tool_call>\n{\"name\": \"f\", \"arguments\": {\"q\": 1}}\n");
  ASSERT_EQ(whole.calls.size(), 1u);
  EXPECT_EQ(whole.calls[0].arguments, R"({"q":1})");
  const Parsed cut = parse("<tool_call>\n{\"name\": \"f\", \"argu");
  EXPECT_TRUE(cut.calls.empty());
  EXPECT_EQ(cut.content, "<tool_call>\n{\"name\": \"f\", \"argu");
}

// Streamed replies are cut anywhere: every cut gives the whole reply's content and calls.
TEST(HermesToolCallParser, HowTheReplyIsCutChangesNothing) {
  const std::string text =
      "I will call two tools. \n <tool_call>\n{\"name\": \"search\", \"arguments\": "
      "{\"q\": \"kv cache\"}}\n</tool_call>\n\nthen <tool_call>{\"name\": \"open\"}</tool_call> "
      "<tool_call>broken</tool_call> done \n";
  const Parsed whole = parse(text);
  EXPECT_EQ(whole.content, "I will call two tools.then<tool_call>broken</tool_call> done");
  ASSERT_EQ(whole.calls.size(), 2u);
  EXPECT_EQ(whole.calls[1].name, "open");
  EXPECT_EQ(whole.calls[1].arguments, "{}");
  std::mt19937 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    HermesToolCallParser p;
    Parsed got;
    size_t i = 0;
    while (i < text.size()) {
      const size_t n = std::uniform_int_distribution<size_t>(0, 12)(rng);
      auto piece = p.push(std::string_view(text).substr(i, n));
      got.content += piece.content;
      for (auto& c : piece.calls) got.calls.push_back(c);
      i += n;
    }
    auto rest = p.finish();
    got.content += rest.content;
    for (auto& c : rest.calls) got.calls.push_back(c);
    ASSERT_EQ(got.content, whole.content) << "trial " << trial;
    ASSERT_EQ(got.calls.size(), whole.calls.size());
    for (size_t k = 0; k < got.calls.size(); ++k) {
      EXPECT_EQ(got.calls[k].name, whole.calls[k].name);
      EXPECT_EQ(got.calls[k].arguments, whole.calls[k].arguments);
    }
  }
}

}  // namespace
}  // namespace dualpath::serve
