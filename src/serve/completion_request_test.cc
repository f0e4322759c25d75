// parse_completion_request on the fields issue 32 added (tools, tool_choice, content parts,
// cache_salt) and on hostile bodies: deep nesting, invalid UTF-8, non-finite numbers.
#include "serve/completion_request.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "serve/reply_builder.h"

namespace dualpath::serve {
namespace {

std::variant<CompletionParams, ApiError> parse_chat(const std::string& body) {
  return parse_completion_request(body, true, {"tiny", 4096, 64}, byte_tokenizer(), nullptr);
}

void expect_400(const std::string& body, const std::string& param, const std::string& words) {
  auto r = parse_chat(body);
  ASSERT_TRUE(std::holds_alternative<ApiError>(r)) << body;
  const ApiError& e = std::get<ApiError>(r);
  EXPECT_EQ(e.status, 400) << body;
  EXPECT_EQ(e.param, param) << body << " -> " << e.message;
  EXPECT_NE(e.message.find(words), std::string::npos) << e.message;
}

const std::string kUser = R"("messages": [{"role": "user", "content": "x"}])";

TEST(CompletionRequest, ToolChoiceRequiredOrANamedFunctionIsAClear400) {
  const std::string tools =
      R"("tools": [{"type": "function", "function": {"name": "f", "parameters": {}}}])";
  expect_400("{" + kUser + ", " + tools + R"(, "tool_choice": "required"})", "tool_choice",
             "guided decoding");
  expect_400("{" + kUser + ", " + tools +
                 R"(, "tool_choice": {"type": "function", "function": {"name": "f"}}})",
             "tool_choice", "guided decoding");
  expect_400("{" + kUser + R"(, "tool_choice": "sometimes"})", "tool_choice", "auto");
  auto ok = parse_chat("{" + kUser + ", " + tools + R"(, "tool_choice": "none",
                       "parallel_tool_calls": false})");
  ASSERT_TRUE(std::holds_alternative<CompletionParams>(ok));
  EXPECT_EQ(std::get<CompletionParams>(ok).tools, 1u);
  EXPECT_EQ(std::get<CompletionParams>(ok).tool_choice, ToolChoice::kNone);
  EXPECT_FALSE(std::get<CompletionParams>(ok).parallel_tool_calls);
}

TEST(CompletionRequest, BadToolsAndToolCallsNameTheField) {
  expect_400("{" + kUser + R"(, "tools": [{"type": "retrieval"}]})", "tools[0]", "function");
  expect_400("{" + kUser + R"(, "tools": [{"type": "function", "function": {"name": "a b"}}]})",
             "tools[0].function.name", "64");
  expect_400(R"({"messages": [{"role": "assistant", "tool_calls": [{"type": "function",
             "function": {"arguments": "{}"}}]}]})",
             "messages[0].tool_calls[0].function.name", "non-empty");
  expect_400(R"({"messages": [{"role": "user", "content": "x", "tool_calls": []}]})",
             "messages[0].tool_calls", "only assistant");
  expect_400(R"({"messages": [{"role": "tool", "tool_call_id": 5, "content": "x"}]})",
             "messages[0].tool_call_id", "string");
}

TEST(CompletionRequest, ContentPartsAreJoinedAndAnImageIsRefusedByName) {
  auto parts = parse_chat(R"({"messages": [{"role": "user", "content": [
      {"type": "text", "text": "ab"}, {"type": "text", "text": "cd"}]}]})");
  auto plain = parse_chat(R"({"messages": [{"role": "user", "content": "abcd"}]})");
  ASSERT_TRUE(std::holds_alternative<CompletionParams>(parts));
  EXPECT_EQ(std::get<CompletionParams>(parts).prompt, std::get<CompletionParams>(plain).prompt);
  expect_400(R"({"messages": [{"role": "user", "content": [{"type": "image_url",
             "image_url": {"url": "x"}}]}]})",
             "messages[0].content[0].type", "image_url");
}

TEST(CompletionRequest, CacheSaltIsANonEmptyStringOfBoundedSize) {
  auto ok = parse_chat("{" + kUser + R"(, "cache_salt": "tenant-7"})");
  ASSERT_TRUE(std::holds_alternative<CompletionParams>(ok));
  EXPECT_EQ(std::get<CompletionParams>(ok).cache_salt, "tenant-7");
  expect_400("{" + kUser + R"(, "cache_salt": ""})", "cache_salt", "non-empty");
  expect_400("{" + kUser + R"(, "cache_salt": 5})", "cache_salt", "non-empty");
  expect_400("{" + kUser + R"(, "cache_salt": ")" + std::string(2000, 's') + "\"}", "cache_salt",
             "1024");
}

// vLLM's ignore_eos: parsed, and the reply goes on past an end token (counted, no text), where
// without it the end token ends the reply.
TEST(CompletionRequest, IgnoreEosKeepsTheReplyGoingPastAnEndToken) {
  auto ok = parse_chat("{" + kUser + R"(, "ignore_eos": true})");
  ASSERT_TRUE(std::holds_alternative<CompletionParams>(ok));
  EXPECT_TRUE(std::get<CompletionParams>(ok).ignore_eos);
  expect_400("{" + kUser + R"(, "ignore_eos": "yes"})", "ignore_eos", "true or false");
  const Tokenizer& tok = byte_tokenizer();
  const std::vector<int32_t> out = {'a', tok.eos(), 'b'};
  ReplyBuilder plain(tok, /*chat=*/false, {});
  EXPECT_EQ(plain.feed(out), "a");
  EXPECT_TRUE(plain.done());
  EXPECT_EQ(plain.finish_reason(), "stop");
  ReplyBuilder ignoring(tok, /*chat=*/false, {}, /*ignore_eos=*/true);
  std::string text = ignoring.feed(out);
  text += ignoring.finish();
  EXPECT_EQ(text, "ab");
  EXPECT_EQ(ignoring.completion_tokens(), 3);
  EXPECT_EQ(ignoring.finish_reason(), "length");
}

TEST(CompletionRequest, HostileBodiesAre400sNamingWhatIsWrong) {
  expect_400(std::string(100000, '['), "", "deeper than 64");
  expect_400("{\"a\": " + std::string(65, '[') + std::string(65, ']') + "}", "", "deeper");
  // 64 levels are fine.
  EXPECT_TRUE(std::holds_alternative<CompletionParams>(
      parse_chat("{" + kUser + ", \"x\": " + std::string(63, '[') + std::string(63, ']') + "}")));
  expect_400("{\"messages\": [{\"role\": \"user\", \"content\": \"\xFF\"}]}", "",
             "byte 0xFF at offset 43");
  // JSON has no infinities: nlohmann refuses a literal out of double's range.
  expect_400("{" + kUser + ", \"temperature\": 1e999}", "", "a number out of range");
  expect_400("{" + kUser + ", \"top_p\": -1e999}", "", "a number out of range");
  expect_400("{" + kUser + ", \"temperature\": 1e308}", "temperature", "outside [0, 2]");
  expect_400("{" + kUser + ", \"max_tokens\": 1e30}", "max_tokens", "integer");
  expect_400("{" + kUser + ", \"max_tokens\": 99999999999999999999999}", "max_tokens", "integer");
  expect_400("{" + kUser + ", \"temperature\": NaN}", "", "not valid JSON");
  expect_400("{" + kUser + ", \"seed\": Infinity}", "", "not valid JSON");
}

TEST(JsonDepth, CountsNestingOutsideStrings) {
  EXPECT_EQ(json_depth(R"({"a": [1, {"b": "[[[{"}]})", 100), 3);
  EXPECT_EQ(json_depth(R"("\"[")", 100), 0);
  EXPECT_EQ(json_depth(std::string(1000, '['), 10), 10);  // stops counting at the cap
}

}  // namespace
}  // namespace dualpath::serve
