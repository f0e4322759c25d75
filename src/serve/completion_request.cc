#include "serve/completion_request.h"

#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <nlohmann/json.hpp>

#include "serve/chat_template.h"

namespace dualpath::serve {
namespace {

using Json = nlohmann::json;

constexpr size_t kMaxStops = 4;

struct BadRequest {
  std::string param;
  std::string message;
};

// Text content: a string, or an array of {"type": "text", "text": ...} parts (joined); null is
// empty. Another part type (an image, audio) is refused by name: the models here read text.
std::optional<BadRequest> content_text(const Json& c, const std::string& where, std::string& out) {
  out.clear();
  if (c.is_null()) return std::nullopt;
  if (c.is_string()) {
    out = c.get<std::string>();
    return std::nullopt;
  }
  if (!c.is_array()) {
    return BadRequest{where, where + " must be a string, null or a list of text parts"};
  }
  for (size_t j = 0; j < c.size(); ++j) {
    const Json& part = c[j];
    const std::string at = fmt::format("{}[{}]", where, j);
    auto type = part.is_object() ? part.find("type") : part.end();
    if (!part.is_object() || type == part.end() || !type->is_string()) {
      return BadRequest{at, at + " must be an object {\"type\": \"text\", \"text\": ...}"};
    }
    if (*type != "text") {
      return BadRequest{at + ".type", fmt::format("{}.type \"{}\" is not supported: this server's "
                                                  "models read text parts only",
                                                  at, type->get<std::string>())};
    }
    auto text = part.find("text");
    if (text == part.end() || !text->is_string()) {
      return BadRequest{at + ".text", at + ".text must be a string"};
    }
    out += text->get<std::string>();
  }
  return std::nullopt;
}

std::optional<BadRequest> parse_tool_calls(const Json& calls,
                                           const std::string& where,
                                           std::vector<ToolCall>& out) {
  if (calls.is_null()) return std::nullopt;
  if (!calls.is_array()) return BadRequest{where, where + " must be a list of tool calls"};
  for (size_t j = 0; j < calls.size(); ++j) {
    const Json& c = calls[j];
    const std::string at = fmt::format("{}[{}]", where, j);
    if (!c.is_object()) return BadRequest{at, at + " must be an object"};
    ToolCall call;
    if (auto id = c.find("id"); id != c.end() && !id->is_null()) {
      if (!id->is_string()) return BadRequest{at + ".id", at + ".id must be a string"};
      call.id = id->get<std::string>();
    }
    if (auto type = c.find("type"); type != c.end() && !type->is_null() && *type != "function") {
      return BadRequest{at + ".type", at + ".type must be \"function\""};
    }
    auto fn = c.find("function");
    if (fn == c.end() || !fn->is_object()) {
      return BadRequest{at + ".function", at + ".function must be an object {name, arguments}"};
    }
    auto name = fn->find("name");
    if (name == fn->end() || !name->is_string() || name->get_ref<const std::string&>().empty()) {
      return BadRequest{at + ".function.name", at + ".function.name must be a non-empty string"};
    }
    call.name = name->get<std::string>();
    if (auto args = fn->find("arguments"); args != fn->end() && !args->is_null()) {
      if (args->is_string()) {
        call.arguments = args->get<std::string>();
      } else if (args->is_object()) {  // not OpenAI's type, but some clients send it
        call.arguments = args->dump(-1, ' ', false, Json::error_handler_t::replace);
      } else {
        return BadRequest{at + ".function.arguments",
                          at + ".function.arguments must be a string (JSON text)"};
      }
    } else {
      call.arguments = "{}";
    }
    out.push_back(std::move(call));
  }
  return std::nullopt;
}

bool tool_name_ok(const std::string& name) {
  if (name.empty() || name.size() > 64) return false;
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '_' || c == '-' || c == '.';
    if (!ok) return false;
  }
  return true;
}

// `tools`: each one's canonical JSON (sorted keys, compact: chat_template.h).
std::optional<BadRequest> parse_tools(const Json& body,
                                      CompletionParams& p,
                                      std::vector<std::string>& tools) {
  if (auto it = body.find("tools"); it != body.end() && !it->is_null()) {
    if (!it->is_array() || it->size() > kMaxTools) {
      return BadRequest{"tools",
                        fmt::format("tools must be a list of at most {} tools", kMaxTools)};
    }
    for (size_t i = 0; i < it->size(); ++i) {
      const Json& t = (*it)[i];
      const std::string at = fmt::format("tools[{}]", i);
      if (!t.is_object() || t.value("type", Json()) != "function") {
        return BadRequest{at, at + " must be {\"type\": \"function\", \"function\": {...}}"};
      }
      auto fn = t.find("function");
      if (fn == t.end() || !fn->is_object()) {
        return BadRequest{at + ".function", at + ".function must be an object"};
      }
      auto name = fn->find("name");
      if (name == fn->end() || !name->is_string() || !tool_name_ok(name->get<std::string>())) {
        return BadRequest{at + ".function.name",
                          at + ".function.name must be 1 to 64 of a-z, A-Z, 0-9, _, - and ."};
      }
      if (auto d = fn->find("description"); d != fn->end() && !d->is_null() && !d->is_string()) {
        return BadRequest{at + ".function.description",
                          at + ".function.description must be a string"};
      }
      if (auto pa = fn->find("parameters"); pa != fn->end() && !pa->is_null() && !pa->is_object()) {
        return BadRequest{at + ".function.parameters",
                          at + ".function.parameters must be a JSON Schema object"};
      }
      tools.push_back(t.dump(-1, ' ', false, Json::error_handler_t::replace));
    }
  }
  p.tools = tools.size();
  if (auto it = body.find("tool_choice"); it != body.end() && !it->is_null()) {
    if (it->is_string() && (*it == "auto" || *it == "none")) {
      p.tool_choice = *it == "none" ? ToolChoice::kNone : ToolChoice::kAuto;
    } else if ((it->is_string() && *it == "required") || it->is_object()) {
      return BadRequest{"tool_choice",
                        "tool_choice \"required\" or a named function needs guided decoding, which "
                        "this server does not have: use \"auto\" (with `serve --tool-call-parser "
                        "hermes`) or \"none\""};
    } else {
      return BadRequest{"tool_choice", "tool_choice must be \"auto\" or \"none\""};
    }
  }
  if (auto it = body.find("parallel_tool_calls"); it != body.end() && !it->is_null()) {
    if (!it->is_boolean()) {
      return BadRequest{"parallel_tool_calls", "parallel_tool_calls must be true or false"};
    }
    p.parallel_tool_calls = it->get<bool>();
  }
  return std::nullopt;
}

std::optional<BadRequest> parse_cache_salt(const Json& body, CompletionParams& p) {
  if (auto it = body.find("cache_salt"); it != body.end() && !it->is_null()) {
    if (!it->is_string() || it->get_ref<const std::string&>().empty() ||
        it->get_ref<const std::string&>().size() > kMaxCacheSaltBytes) {
      return BadRequest{"cache_salt", fmt::format("cache_salt must be a non-empty string of at "
                                                  "most {} bytes",
                                                  kMaxCacheSaltBytes)};
    }
    p.cache_salt = it->get<std::string>();
  }
  return std::nullopt;
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
  // vLLM's and SGLang's extension: generate max_tokens whatever the model says (benchmarks that
  // replay a trace's output lengths).
  if (auto it = body.find("ignore_eos"); it != body.end() && !it->is_null()) {
    if (!it->is_boolean()) return BadRequest{"ignore_eos", "ignore_eos must be true or false"};
    p.ignore_eos = it->get<bool>();
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

int json_depth(std::string_view json, int stop_at) {
  int depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (char c : json) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
      if (deepest >= stop_at) return deepest;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return deepest;
}

std::variant<CompletionParams, ApiError> parse_completion_request(std::string_view text,
                                                                  bool chat,
                                                                  const CompletionLimits& limits,
                                                                  const Tokenizer& tok,
                                                                  const MemoForSalt& memo_for) {
  auto bad = [](int status, const std::string& type, const std::string& message,
                const std::string& param = "", const std::string& code = "") {
    return ApiError{status, type, message, param, code};
  };
  if (json_depth(text, kMaxJsonDepth + 1) > kMaxJsonDepth) {
    return bad(
        400, "invalid_request_error",
        fmt::format("the body nests arrays and objects deeper than {} levels", kMaxJsonDepth));
  }
  if (auto at = invalid_utf8_at(text)) {
    return bad(400, "invalid_request_error",
               fmt::format("the body is not valid UTF-8 (byte 0x{:02X} at offset {}): JSON is "
                           "UTF-8 text",
                           static_cast<uint8_t>(text[*at]), *at));
  }
  Json body;
  try {  // nlohmann throws its parse errors; they stop here, with the position it names
    body = Json::parse(text);
  } catch (const Json::parse_error& e) {
    return bad(400, "invalid_request_error",
               fmt::format("the body is not valid JSON (UTF-8 text, one object): error at byte {}",
                           e.byte));
  } catch (const Json::exception& e) {  // out_of_range 406: a number beyond double's range
    return bad(400, "invalid_request_error",
               fmt::format("the body is not valid JSON: {}",
                           e.id == 406 ? "a number out of range" : "malformed"));
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
  auto refuse = [&](const BadRequest& e) {
    return bad(400, "invalid_request_error", e.message, e.param);
  };
  if (auto err = parse_cache_salt(body, p)) return refuse(*err);
  if (chat) {
    auto msgs = body.find("messages");
    if (msgs == body.end() || !msgs->is_array() || msgs->empty()) {
      return bad(400, "invalid_request_error",
                 "messages must be a non-empty list of {\"role\", \"content\"} objects",
                 "messages");
    }
    std::vector<std::string> tools;
    if (auto err = parse_tools(body, p, tools)) return refuse(*err);
    std::vector<ApiMessage> messages;
    for (size_t i = 0; i < msgs->size(); ++i) {
      const Json& m = (*msgs)[i];
      const std::string at = fmt::format("messages[{}]", i);
      auto role = m.is_object() ? m.find("role") : m.end();
      if (!m.is_object() || role == m.end() || !role->is_string()) {
        return bad(400, "invalid_request_error",
                   fmt::format("messages[{}] must be an object with a string role", i), at);
      }
      ApiMessage msg;
      msg.role = role->get<std::string>();
      if (auto c = m.find("content"); c != m.end()) {
        if (auto err = content_text(*c, at + ".content", msg.content)) {
          // The shape of before content parts: one message for any content that is not text.
          if (err->param == at + ".content") {
            err->message = at + ".content must be a string or a list of text parts";
          }
          return refuse(*err);
        }
      }
      if (auto tc = m.find("tool_calls"); tc != m.end()) {
        if (msg.role != "assistant" && !tc->is_null()) {
          return bad(400, "invalid_request_error",
                     at + ".tool_calls: only assistant messages "
                          "carry tool calls",
                     at + ".tool_calls");
        }
        if (auto err = parse_tool_calls(*tc, at + ".tool_calls", msg.tool_calls)) {
          return refuse(*err);
        }
      }
      if (auto id = m.find("tool_call_id"); id != m.end() && !id->is_null()) {
        if (!id->is_string()) {
          return bad(400, "invalid_request_error", at + ".tool_call_id must be a string",
                     at + ".tool_call_id");
        }
        msg.tool_call_id = id->get<std::string>();
      }
      messages.push_back(std::move(msg));
    }
    const std::vector<ChatMessage> flat = flatten_chat(messages, tools);
    auto prompt = chat_prompt(tok, flat, memo_for ? memo_for(p.cache_salt) : nullptr);
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
