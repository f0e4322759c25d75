#pragma once
// The body of POST /v1/chat/completions and /v1/completions, parsed into what the server acts on
// (docs/api.md): the prompt's tokens in the model's chat layout, max_tokens, sampling, stop
// strings, streaming. Unknown fields are ignored; every malformed field is an ApiError naming
// it, never an exception (the body is outside bytes: fuzzed by fuzz/http_body_fuzz.cc).
// Thread-safe (the memo is).

#include <cstdint>
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

struct CompletionParams {
  std::vector<int32_t> prompt;
  int64_t max_tokens = 0;
  std::vector<std::string> stop;
  bool stream = false;
  bool include_usage = false;
  compute::SamplingParams sampling;  // greedy unless temperature > 0
  bool seeded = false;               // the request gave a seed
};

struct CompletionLimits {
  std::string served_model_name;  // another "model" is a 404
  int64_t max_model_len = 16384;  // prompt + output tokens
  int64_t default_max_tokens = 64;
};

// `chat`: a chat body (messages), else a completion body (prompt).
std::variant<CompletionParams, ApiError> parse_completion_request(std::string_view body, bool chat,
                                                                  const CompletionLimits& limits,
                                                                  const Tokenizer& tok,
                                                                  ReplyMemo* memo);

}  // namespace dualpath::serve
