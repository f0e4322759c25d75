#include "serve/tool_call_parser.h"

#include <nlohmann/json.hpp>
#include <optional>

namespace dualpath::serve {
namespace {

using Json = nlohmann::json;

constexpr std::string_view kOpen = "<tool_call>";
constexpr std::string_view kClose = "</tool_call>";

bool is_space(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

std::string_view trim(std::string_view s) {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

// The length of the longest suffix of `s` that is a proper prefix of `tag`.
size_t partial_tag(std::string_view s, std::string_view tag) {
  for (size_t l = std::min(s.size(), tag.size() - 1); l > 0; --l) {
    if (s.substr(s.size() - l) == tag.substr(0, l)) return l;
  }
  return 0;
}

std::optional<ParsedToolCall> parse_call(std::string_view inner) {
  const Json j = Json::parse(trim(inner), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return std::nullopt;
  auto name = j.find("name");
  if (name == j.end() || !name->is_string() || name->get_ref<const std::string&>().empty()) {
    return std::nullopt;
  }
  ParsedToolCall call;
  call.name = name->get<std::string>();
  auto args = j.find("arguments");
  Json a = Json::object();
  if (args != j.end() && !args->is_null()) {
    if (args->is_object()) {
      a = *args;
    } else if (args->is_string()) {  // some models write the arguments as a JSON string
      a = Json::parse(args->get_ref<const std::string&>(), nullptr, false);
      if (a.is_discarded() || !a.is_object()) return std::nullopt;
    } else {
      return std::nullopt;
    }
  }
  call.arguments = a.dump(-1, ' ', false, Json::error_handler_t::replace);
  return call;
}

}  // namespace

void HermesToolCallParser::emit_outside(std::string_view text, Piece& out) {
  if (after_call_) {
    while (!text.empty() && is_space(text.front())) text.remove_prefix(1);
    if (text.empty()) return;
    after_call_ = false;
  }
  out.content += text;
}

void HermesToolCallParser::close_block(std::string_view inner, bool closed, Piece& out) {
  if (auto call = parse_call(inner)) {
    out.calls.push_back(std::move(*call));
    ++calls_;
    after_call_ = true;
    return;
  }
  std::string raw = std::string(kOpen) + std::string(inner);
  if (closed) raw += kClose;
  emit_outside(raw, out);
}

HermesToolCallParser::Piece HermesToolCallParser::push(std::string_view text) {
  Piece out;
  held_ += text;
  while (true) {
    if (inside_) {
      const size_t end = held_.find(kClose);
      if (end == std::string::npos) break;
      const std::string inner = held_.substr(0, end);
      held_.erase(0, end + kClose.size());
      inside_ = false;
      close_block(inner, /*closed=*/true, out);
      continue;
    }
    const size_t open = held_.find(kOpen);
    if (open != std::string::npos) {
      std::string_view before(held_.data(), open);
      while (!before.empty() && is_space(before.back())) before.remove_suffix(1);
      emit_outside(before, out);
      held_.erase(0, open + kOpen.size());
      inside_ = true;
      continue;
    }
    // Hold back what may begin a tag, and the whitespace before it (dropped if a tag follows).
    size_t keep = partial_tag(held_, kOpen);
    while (keep < held_.size() && is_space(held_[held_.size() - keep - 1])) ++keep;
    emit_outside(std::string_view(held_).substr(0, held_.size() - keep), out);
    held_.erase(0, held_.size() - keep);
    break;
  }
  return out;
}

HermesToolCallParser::Piece HermesToolCallParser::finish() {
  Piece out;
  if (inside_) {
    close_block(held_, /*closed=*/false, out);
    inside_ = false;
  } else if (calls_ > 0) {
    // Whitespace at the end of a reply that called is not content.
    std::string_view rest = held_;
    while (!rest.empty() && is_space(rest.back())) rest.remove_suffix(1);
    emit_outside(rest, out);
  } else {
    emit_outside(held_, out);
  }
  held_.clear();
  return out;
}

}  // namespace dualpath::serve
