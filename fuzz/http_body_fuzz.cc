// The API's request bodies on any bytes: POST /v1/chat/completions and /v1/completions parsed
// into our request (the chat template and tokenizer included), as the server does before a turn
// starts. Every malformed body must be an ApiError with a 4xx status, never an exception.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>
#include <variant>

#include "serve/completion_request.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace dualpath::serve;
  static ReplyMemo memo(64);
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  const CompletionLimits limits{"tiny", 4096, 64};
  for (bool chat : {true, false}) {
    auto r = parse_completion_request(body, chat, limits, byte_tokenizer(), &memo);
    if (auto* e = std::get_if<ApiError>(&r)) {
      if (e->status < 400 || e->status > 499 || e->message.empty()) std::abort();
    } else {
      const auto& p = std::get<CompletionParams>(r);
      // What the parser accepted fits the context: prompt plus output.
      if (p.max_tokens < 1 || static_cast<int64_t>(p.prompt.size()) + p.max_tokens > 4096) {
        std::abort();
      }
      memo.remember(p.prompt, "x", {1, 2});
    }
  }
  return 0;
}
