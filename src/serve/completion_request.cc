#include "serve/completion_request.h"

#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <nlohmann/json.hpp>

namespace dualpath::serve {
namespace {

using Json = nlohmann::json;

constexpr size_t kMaxStops = 4;

struct BadRequest {
  std::string param;
  std::string message;
};

// Text content: a string, or an array of {"type": "text", "text": ...} parts; null is empty.
std::optional<std::string> content_text(const Json& c) {
  if (c.is_null()) return std::string();
  if (c.is_string()) return c.get<std::string>();
  if (!c.is_array()) return std::nullopt;
  std::string out;
  for (const Json& part : c) {
    if (!part.is_object()) return std::nullopt;
    auto type = part.find("type");
    auto text = part.find("text");
    if (type == part.end() || !type->is_string() || *type != "text" || text == part.end() ||
        !text->is_string())
      return std::nullopt;
    out += text->get<std::string>();
  }
  return out;
}

std::optional<BadRequest> parse_common(const Json& body, const CompletionLimits& opt,
                                       CompletionParams& p) {
  // max_completion_tokens (the newer name) wins over max_tokens.
  for (const char* key : {"max_tokens", "max_completion_tokens"}) {
    auto it = body.find(key);
    if (it == body.end() || it->is_null()) continue;
    if (!it->is_number_integer()) {
      return BadRequest{key, fmt::format("{} must be an integer", key)};
    }
    const int64_t v = it->get<int64_t>();
    if (v < 1) return BadRequest{key, fmt::format("{} = {} must be at least 1", key, v)};
    p.max_tokens = v;
  }
  if (auto it = body.find("temperature"); it != body.end() && !it->is_null()) {
    if (!it->is_number()) return BadRequest{"temperature", "temperature must be a number"};
    const double t = it->get<double>();
    if (t < 0 || t > 2) {
      return BadRequest{"temperature", fmt::format("temperature = {} is outside [0, 2]", t)};
    }
    p.sampling.temperature = t;
  }
  if (auto it = body.find("top_p"); it != body.end() && !it->is_null()) {
    if (!it->is_number()) return BadRequest{"top_p", "top_p must be a number"};
    const double v = it->get<double>();
    if (!(v > 0 && v <= 1)) {
      return BadRequest{"top_p", fmt::format("top_p = {} is outside (0, 1]", v)};
    }
    p.sampling.top_p = v;
  }
  if (auto it = body.find("top_k"); it != body.end() && !it->is_null()) {  // vLLM's extension
    if (!it->is_number_integer() || it->get<int64_t>() < -1 || it->get<int64_t>() > (1 << 20)) {
      return BadRequest{"top_k", "top_k must be an integer: -1 or 0 for all tokens, or k >= 1"};
    }
    p.sampling.top_k = static_cast<int>(std::max<int64_t>(0, it->get<int64_t>()));
  }
  if (auto it = body.find("n"); it != body.end() && !it->is_null()) {
    if (!it->is_number_integer() || it->get<int64_t>() != 1) {
      return BadRequest{"n", "n must be 1: one choice per request"};
    }
  }
  if (auto it = body.find("seed"); it != body.end() && !it->is_null()) {
    if (!it->is_number_integer()) return BadRequest{"seed", "seed must be an integer"};
    p.sampling.seed = static_cast<uint64_t>(it->get<int64_t>());
    p.seeded = true;
  }
  if (auto it = body.find("user"); it != body.end() && !it->is_null() && !it->is_string()) {
    return BadRequest{"user", "user must be a string"};
  }
  if (auto it = body.find("stream"); it != body.end() && !it->is_null()) {
    if (!it->is_boolean()) return BadRequest{"stream", "stream must be true or false"};
    p.stream = it->get<bool>();
  }
  if (auto it = body.find("stream_options"); it != body.end() && !it->is_null()) {
    if (!it->is_object()) return BadRequest{"stream_options", "stream_options must be an object"};
    if (auto u = it->find("include_usage"); u != it->end() && !u->is_null()) {
      if (!u->is_boolean()) {
        return BadRequest{"stream_options.include_usage", "include_usage must be true or false"};
      }
      p.include_usage = u->get<bool>();
    }
  }
  if (auto it = body.find("stop"); it != body.end() && !it->is_null()) {
    if (it->is_string()) {
      p.stop.push_back(it->get<std::string>());
    } else if (it->is_array() && it->size() <= kMaxStops) {
      for (const Json& s : *it) {
        if (!s.is_string()) return BadRequest{"stop", "stop must be a string or a list of strings"};
        p.stop.push_back(s.get<std::string>());
      }
    } else {
      return BadRequest{"stop", fmt::format("stop must be a string or up to {} strings", kMaxStops)};
    }
    std::erase_if(p.stop, [](const std::string& s) { return s.empty(); });
  }
  const int64_t room = opt.max_model_len - static_cast<int64_t>(p.prompt.size());
  if (room < 1) {
    return BadRequest{"messages",
                      fmt::format("the prompt is {} tokens; this model's context is {} tokens "
                                  "(max_model_len), prompt and output together",
                                  p.prompt.size(), opt.max_model_len)};
  }
  if (p.max_tokens == 0) {
    p.max_tokens = std::min(opt.default_max_tokens, room);
  } else if (p.max_tokens > room) {
    return BadRequest{"max_tokens",
                      fmt::format("max_tokens = {} does not fit: the prompt is {} tokens and the "
                                  "context {} (max_model_len), so at most {}",
                                  p.max_tokens, p.prompt.size(), opt.max_model_len, room)};
  }
  return std::nullopt;
}

}  // namespace

std::variant<CompletionParams, ApiError> parse_completion_request(std::string_view text, bool chat,
                                                                  const CompletionLimits& limits,
                                                                  const Tokenizer& tok,
                                                                  ReplyMemo* memo) {
  auto bad = [](int status, const std::string& type, const std::string& message,
                const std::string& param = "", const std::string& code = "") {
    return ApiError{status, type, message, param, code};
  };
  const Json body = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (body.is_discarded()) {
    return bad(400, "invalid_request_error",
               "the body is not valid JSON (UTF-8 text, one object)");
  }
  if (!body.is_object()) return bad(400, "invalid_request_error", "the body must be a JSON object");
  if (auto m = body.find("model"); m != body.end() && !m->is_null()) {
    if (!m->is_string()) return bad(400, "invalid_request_error", "model must be a string", "model");
    if (*m != limits.served_model_name) {
      return bad(404, "invalid_request_error",
                 fmt::format("the model '{}' does not exist: this server serves '{}' (GET "
                             "/v1/models)",
                             m->get<std::string>(), limits.served_model_name),
                 "model", "model_not_found");
    }
  }
  CompletionParams p;
  if (chat) {
    auto msgs = body.find("messages");
    if (msgs == body.end() || !msgs->is_array() || msgs->empty()) {
      return bad(400, "invalid_request_error",
                 "messages must be a non-empty list of {\"role\", \"content\"} objects",
                 "messages");
    }
    std::vector<ChatMessage> messages;
    for (size_t i = 0; i < msgs->size(); ++i) {
      const Json& m = (*msgs)[i];
      auto role = m.is_object() ? m.find("role") : m.end();
      if (!m.is_object() || role == m.end() || !role->is_string()) {
        return bad(400, "invalid_request_error",
                   fmt::format("messages[{}] must be an object with a string role", i),
                   fmt::format("messages[{}]", i));
      }
      auto c = m.find("content");
      std::optional<std::string> content = c == m.end() ? std::string() : content_text(*c);
      if (!content) {
        return bad(400, "invalid_request_error",
                   fmt::format("messages[{}].content must be a string or a list of text parts", i),
                   fmt::format("messages[{}].content", i));
      }
      messages.push_back({role->get<std::string>(), std::move(*content)});
    }
    auto prompt = chat_prompt(tok, messages, memo);
    if (!prompt.is_ok()) {
      return bad(400, "invalid_request_error", prompt.status().message(), "messages");
    }
    p.prompt = std::move(prompt).value();
  } else {
    auto pr = body.find("prompt");
    if (pr == body.end() || !pr->is_string()) {
      return bad(400, "invalid_request_error", "prompt must be a string", "prompt");
    }
    p.prompt = completion_prompt(tok, pr->get<std::string>());
  }
  if (auto err = parse_common(body, limits, p)) {
    return bad(400, "invalid_request_error", err->message, err->param,
               err->param == "messages" ? "context_length_exceeded" : "");
  }
  return p;
}

}  // namespace dualpath::serve
