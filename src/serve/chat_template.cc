#include "serve/chat_template.h"

#include <nlohmann/json.hpp>

namespace dualpath::serve {
namespace {

using Json = nlohmann::json;

// Qwen 2.5's wording (its tokenizer_config.json chat_template), which Hermes-format checkpoints
// were trained on.
constexpr std::string_view kToolsIntro =
    "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n<tools>";
constexpr std::string_view kToolsOutro =
    "\n</tools>\n\nFor each function call, return a json object with function name and arguments "
    "within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, "
    "\"arguments\": <args-json-object>}\n</tool_call>";

std::string compact_json(const Json& j) {
  return j.dump(-1, ' ', false, Json::error_handler_t::replace);
}

}  // namespace

std::string canonical_arguments(std::string_view arguments) {
  const Json j = Json::parse(arguments, nullptr, /*allow_exceptions=*/false);
  if (!j.is_discarded()) return compact_json(j);
  return compact_json(Json(std::string(arguments)));
}

std::string render_tools(std::span<const std::string> tools) {
  std::string out(kToolsIntro);
  for (const std::string& t : tools) out += "\n" + t;
  out += kToolsOutro;
  return out;
}

std::string render_assistant(std::string_view content, std::span<const ToolCall> calls) {
  std::string out(content);
  for (const ToolCall& c : calls) {
    if (!out.empty()) out += "\n";
    out += "<tool_call>\n{\"name\": " + compact_json(Json(c.name)) +
           ", \"arguments\": " + canonical_arguments(c.arguments) + "}\n</tool_call>";
  }
  return out;
}

std::string render_tool_result(std::string_view content) {
  return "<tool_response>\n" + std::string(content) + "\n</tool_response>";
}

std::vector<ChatMessage> flatten_chat(std::span<const ApiMessage> messages,
                                      std::span<const std::string> tools) {
  std::vector<ChatMessage> out;
  out.reserve(messages.size() + 1);
  size_t first = 0;
  if (!tools.empty()) {
    const std::string block = render_tools(tools);
    if (!messages.empty() && (messages[0].role == "system" || messages[0].role == "developer")) {
      out.push_back({messages[0].role, messages[0].content + "\n\n" + block});
      first = 1;
    } else {
      out.push_back({"system", block});
    }
  }
  for (size_t i = first; i < messages.size(); ++i) {
    const ApiMessage& m = messages[i];
    if (m.role == "assistant") {
      out.push_back({m.role, render_assistant(m.content, m.tool_calls)});
    } else if (m.role == "tool") {
      out.push_back({m.role, render_tool_result(m.content)});
    } else {
      out.push_back({m.role, m.content});
    }
  }
  return out;
}

}  // namespace dualpath::serve
