#pragma once
// The agent half of the chat template (docs/api.md "Tools"): the request's `tools`, assistant
// `tool_calls` and `tool` results rendered as text, so that the tokenizer's layout (tokenizer.h,
// which knows roles and text) puts them into the prompt. The format is Hermes' (NousResearch),
// as Qwen 2.5's template writes it and vLLM's `--tool-call-parser hermes` reads it back:
//
//   system:    [the system message, a blank line] # Tools ... <tools>\n{tool}\n...</tools> ...
//   assistant: [content]\n<tool_call>\n{"name": "f", "arguments": {...}}\n</tool_call>
//   tool:      <tool_response>\ncontent\n</tool_response>
//
// Every rendering is a pure function of what the client sends, byte-stable across turns: each
// tool and each call's arguments are canonical JSON (keys sorted, no spaces), so a client that
// re-serialises them in another order or spacing still gets the same bytes, and turn n+1's
// prompt starts with turn n's tokens (its KV hits). Thread-safe (pure functions).

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "serve/tokenizer.h"

namespace dualpath::serve {

struct ToolCall {
  std::string id;         // the client's (call_...); not rendered, as Qwen's template does not
  std::string name;       // the function's
  std::string arguments;  // JSON text, as OpenAI sends it (a string holding an object)
};

// A chat message as the API takes it (completion_request.cc parses it).
struct ApiMessage {
  std::string role;                  // system, developer, user, assistant, tool
  std::string content;               // the text parts joined; empty for null or absent
  std::vector<ToolCall> tool_calls;  // an assistant's
  std::string tool_call_id;          // a tool result's (not rendered)
};

// The canonical form of a call's arguments: the JSON re-serialised (keys sorted, compact) if
// they parse, else the text as a JSON string.
std::string canonical_arguments(std::string_view arguments);

// The tools block of the system message. `tools`: each tool's canonical JSON.
std::string render_tools(std::span<const std::string> tools);
// An assistant message's text: its content, then each call on lines of its own.
std::string render_assistant(std::string_view content, std::span<const ToolCall> calls);
// A tool message's text.
std::string render_tool_result(std::string_view content);

// The messages in the tokenizer's terms: the tools block joins the first message when it is a
// system (or developer) message, else comes first as one; calls and results become text. Roles
// are kept (the tokenizer maps tool to user, developer to system).
std::vector<ChatMessage> flatten_chat(std::span<const ApiMessage> messages,
                                      std::span<const std::string> tools);

}  // namespace dualpath::serve
