#pragma once
// The body of POST /v1/chat/completions and /v1/completions, parsed into what the server acts on
// (docs/api.md): the prompt's tokens in the model's chat layout (tools, tool calls and results
// rendered by chat_template.h), max_tokens, sampling, stop strings, streaming, the tool choice
// and the cache salt. Unknown fields are ignored; every malformed field is an ApiError naming
// it, never an exception (the body is outside bytes: fuzzed by fuzz/http_body_fuzz.cc and, with
// the rest of the request, fuzz/http_request_fuzz.cc). Thread-safe (the memo is).

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "compute/sampling.h"
#include "serve/tokenizer.h"

namespace dualpath::serve {

// An OpenAI-shaped error: {"error": {"message", "type", "param", "code"}} with its status.
struct ApiError {
  int status = 400;
  std::string type;
  std::string message;
  std::string param;
  std::string code;
};

// vLLM caps JSON nesting nowhere; nlohmann's parser does not recurse, but nothing a client
// sends needs more than a few levels (a tool's parameters schema is the deepest), and a cap keeps
// every later walk of the document cheap.
inline constexpr int kMaxJsonDepth = 64;
inline constexpr size_t kMaxCacheSaltBytes = 1024;
inline constexpr size_t kMaxTools = 128;

enum class ToolChoice { kAuto, kNone };

struct CompletionParams {
  std::vector<int32_t> prompt;
  int64_t max_tokens = 0;
  std::vector<std::string> stop;
  bool ignore_eos = false;  // vLLM's extension: an end token does not end the reply
  bool stream = false;
  bool include_usage = false;
  compute::SamplingParams sampling;  // greedy unless temperature > 0
  bool seeded = false;               // the request gave a seed
  // Tools (chat only): how many the prompt declares, and whether replies may call them.
  size_t tools = 0;
  ToolChoice tool_choice = ToolChoice::kAuto;
  bool parallel_tool_calls = true;
  std::string cache_salt;  // vLLM's: requests hit each other's KV only under the same salt
};

struct CompletionLimits {
  std::string served_model_name;  // another "model" is a 404
  int64_t max_model_len = 16384;  // prompt + output tokens
  int64_t default_max_tokens = 64;
};

// `chat`: a chat body (messages), else a completion body (prompt).
// Where the chat template finds generated replies: the reply memo as the request's cache
// namespace sees it, which depends on the request's cache_salt (null: no memo).
using MemoForSalt = std::function<ReplyLookup*(const std::string& cache_salt)>;

std::variant<CompletionParams, ApiError> parse_completion_request(std::string_view body,
                                                                  bool chat,
                                                                  const CompletionLimits& limits,
                                                                  const Tokenizer& tok,
                                                                  const MemoForSalt& memo_for);
// The same with one memo whatever the salt.
inline std::variant<CompletionParams, ApiError> parse_completion_request(
    std::string_view body,
    bool chat,
    const CompletionLimits& limits,
    const Tokenizer& tok,
    ReplyLookup* memo) {
  return parse_completion_request(body, chat, limits, tok,
                                  [memo](const std::string&) { return memo; });
}

// The depth of the deepest array or object in `json` (strings skipped), counted up to
// `stop_at`; not a validation (the parser does that).
int json_depth(std::string_view json, int stop_at);

}  // namespace dualpath::serve
