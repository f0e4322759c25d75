// The agent half of the chat template: tools, tool calls and tool results rendered byte-stably,
// so that a conversation's turn n+1 starts with turn n's tokens (and hits its KV).
#include "serve/chat_template.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "serve/completion_request.h"

namespace dualpath::serve {
namespace {

using Json = nlohmann::json;

TEST(ChatTemplate, ToolCallArgumentsRenderTheSameWhateverTheirSpacingOrKeyOrder) {
  const std::vector<ToolCall> a = {{"call_1", "get_weather", R"({"city": "Paris", "unit": "c"})"}};
  const std::vector<ToolCall> b = {{"call_9", "get_weather", R"({"unit":"c","city":"Paris"})"}};
  EXPECT_EQ(render_assistant("", a), render_assistant("", b));
  EXPECT_EQ(render_assistant("", a),
            "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": "
            "{\"city\":\"Paris\",\"unit\":\"c\"}}\n</tool_call>");
  EXPECT_EQ(render_assistant("Checking.", a).rfind("Checking.\n<tool_call>\n", 0), 0u);
  // Arguments that are not JSON are kept, as a JSON string.
  EXPECT_EQ(canonical_arguments("not json"), "\"not json\"");
}

TEST(ChatTemplate, ToolsJoinTheSystemMessageOrComeFirst) {
  const std::vector<std::string> tools = {R"({"function":{"name":"f"},"type":"function"})"};
  std::vector<ApiMessage> with_system = {{"system", "Be brief.", {}, ""}, {"user", "hi", {}, ""}};
  auto flat = flatten_chat(with_system, tools);
  ASSERT_EQ(flat.size(), 2u);
  EXPECT_EQ(flat[0].role, "system");
  EXPECT_EQ(flat[0].content.rfind("Be brief.\n\n# Tools", 0), 0u);
  EXPECT_NE(flat[0].content.find("<tools>\n" + tools[0] + "\n</tools>"), std::string::npos);
  std::vector<ApiMessage> without = {{"user", "hi", {}, ""}};
  flat = flatten_chat(without, tools);
  ASSERT_EQ(flat.size(), 2u);
  EXPECT_EQ(flat[0].role, "system");
  EXPECT_EQ(flat[1].content, "hi");
  // No tools: the messages as they were.
  flat = flatten_chat(with_system, {});
  ASSERT_EQ(flat.size(), 2u);
  EXPECT_EQ(flat[0].content, "Be brief.");
  std::vector<ApiMessage> tool_result = {{"tool", "22 C", {}, "call_1"}};
  EXPECT_EQ(flatten_chat(tool_result, {})[0].content, "<tool_response>\n22 C\n</tool_response>");
}

// An agent's conversation as frameworks send it: tools, an assistant turn with tool calls and
// null content, the tool's result as content parts. Turn n+1 (turn n's messages, its reply and a
// new question) begins with turn n's prompt and reply, token for token.
TEST(ChatTemplate, AnAgentConversationsNextTurnStartsWithThisTurnsPromptAndReply) {
  const Json tools = Json::parse(R"([{"type": "function", "function": {"name": "get_weather",
      "description": "Weather in a city", "parameters": {"type": "object",
      "properties": {"city": {"type": "string"}}, "required": ["city"]}}}])");
  Json messages = Json::parse(R"([
      {"role": "system", "content": "You are terse."},
      {"role": "user", "content": [{"type": "text", "text": "Weather in "},
                                   {"type": "text", "text": "Paris?"}]},
      {"role": "assistant", "content": null, "tool_calls": [{"id": "call_a", "type": "function",
        "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
      {"role": "tool", "tool_call_id": "call_a", "content": [{"type": "text", "text": "22 C"}]}])");
  ReplyMemo memo;
  const CompletionLimits limits{"tiny", 4096, 64};
  auto turn = [&](const Json& msgs) {
    Json body = {{"messages", msgs}, {"tools", tools}, {"max_tokens", 8}};
    auto r = parse_completion_request(body.dump(), true, limits, byte_tokenizer(), &memo);
    EXPECT_TRUE(std::holds_alternative<CompletionParams>(r)) << std::get<ApiError>(r).message;
    return std::get<CompletionParams>(r).prompt;
  };
  const std::vector<int32_t> p1 = turn(messages);
  // The reply as generated: a call whose text the client gets back as tool_calls.
  const std::string generated =
      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Lyon\"}}\n</tool_call>";
  std::vector<int32_t> reply = byte_tokenizer().encode(generated);
  reply.push_back(SpecialTokens::kEnd);
  // What the server remembers: the rendering of what the client will send back.
  const std::vector<ToolCall> calls = {{"call_b", "get_weather", R"({"city":"Lyon"})"}};
  memo.remember(p1, render_assistant("", calls),
                std::vector<int32_t>(reply.begin(), reply.end() - 1));
  // The client re-serialises the arguments with spaces, in its own key order.
  messages.push_back(Json::parse(R"({"role": "assistant", "content": "", "tool_calls": [{
      "id": "call_b", "type": "function", "function": {"name": "get_weather",
      "arguments": "{ \"city\" : \"Lyon\" }"}}]})"));
  messages.push_back({{"role", "tool"}, {"tool_call_id", "call_b"}, {"content", "18 C"}});
  const std::vector<int32_t> p2 = turn(messages);
  std::vector<int32_t> want = p1;
  want.insert(want.end(), reply.begin(), reply.end());
  ASSERT_GE(p2.size(), want.size());
  EXPECT_TRUE(std::equal(want.begin(), want.end(), p2.begin()))
      << "turn 2 does not begin with turn 1's prompt and reply";
}

}  // namespace
}  // namespace dualpath::serve
