#include "serve/tokenizer.h"

#include <fmt/format.h>

namespace dualpath::serve {
namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

// The length of a sequence led by `b`, or 0 for a byte that cannot lead one.
int sequence_length(uint8_t b) {
  if (b < 0x80) return 1;
  if (b >= 0xC2 && b <= 0xDF) return 2;
  if (b >= 0xE0 && b <= 0xEF) return 3;
  if (b >= 0xF0 && b <= 0xF4) return 4;
  return 0;  // continuation bytes, C0/C1 (overlong), F5..FF (beyond U+10FFFF)
}

// Whether `b` may follow `lead` as the sequence's second byte (RFC 3629's table: E0 needs A0..BF
// against overlongs, ED 80..9F against surrogates, F0 90..BF, F4 80..8F).
bool valid_second(uint8_t lead, uint8_t b) {
  if (lead == 0xE0) return b >= 0xA0 && b <= 0xBF;
  if (lead == 0xED) return b >= 0x80 && b <= 0x9F;
  if (lead == 0xF0) return b >= 0x90 && b <= 0xBF;
  if (lead == 0xF4) return b >= 0x80 && b <= 0x8F;
  return b >= 0x80 && b <= 0xBF;
}

}  // namespace

std::string Utf8Decoder::push_byte(uint8_t b) {
  std::string out;
  if (have_ > 0) {
    const bool ok = have_ == 1 ? valid_second(pending_[0], b) : (b >= 0x80 && b <= 0xBF);
    if (ok) {
      pending_[have_++] = b;
      if (have_ == need_) {
        out.append(reinterpret_cast<const char*>(pending_), static_cast<size_t>(have_));
        have_ = need_ = 0;
      }
      return out;
    }
    // The sequence broke off: it is one U+FFFD, and `b` starts afresh.
    out += kReplacement;
    have_ = need_ = 0;
  }
  const int len = sequence_length(b);
  if (len == 1) {
    out += static_cast<char>(b);
  } else if (len == 0) {
    out += kReplacement;
  } else {
    pending_[0] = b;
    have_ = 1;
    need_ = len;
  }
  return out;
}

std::string Utf8Decoder::push(std::span<const uint8_t> bytes) {
  std::string out;
  for (uint8_t b : bytes) out += push_byte(b);
  return out;
}

std::string Utf8Decoder::finish() {
  if (have_ == 0) return {};
  have_ = need_ = 0;
  return std::string(kReplacement);
}

std::vector<int32_t> ByteTokenizer::encode(std::string_view text) const {
  std::vector<int32_t> out;
  out.reserve(text.size());
  for (char c : text) out.push_back(static_cast<uint8_t>(c));
  return out;
}

std::string ByteTokenizer::decode(std::span<const int32_t> tokens) const {
  TokenTextStream s;
  std::string out = s.push(tokens);
  return out + s.finish();
}

std::string TokenTextStream::push(std::span<const int32_t> tokens) {
  std::string out;
  for (int32_t t : tokens) {
    if (t >= 0 && t < 256) out += utf8_.push_byte(static_cast<uint8_t>(t));
  }
  return out;
}

std::string ReplyMemo::key(std::span<const int32_t> prompt, const std::string& text) {
  uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a over the tokens' bytes
  for (int32_t t : prompt) {
    for (int i = 0; i < 4; ++i) {
      h ^= static_cast<uint8_t>(static_cast<uint32_t>(t) >> (8 * i));
      h *= 0x100000001B3ull;
    }
  }
  return fmt::format("{:016x}{}", h, text);
}

void ReplyMemo::remember(std::span<const int32_t> prompt, const std::string& text,
                         std::vector<int32_t> tokens) {
  std::string k = key(prompt, text);
  std::lock_guard lock(mu_);
  if (auto it = entries_.find(k); it != entries_.end()) {
    order_.erase(it->second.pos);
    entries_.erase(it);
  }
  order_.push_front(k);
  entries_.emplace(std::move(k), Entry{std::move(tokens), order_.begin()});
  while (entries_.size() > capacity_) {
    entries_.erase(order_.back());
    order_.pop_back();
  }
}

std::optional<std::vector<int32_t>> ReplyMemo::find(std::span<const int32_t> prompt,
                                                    const std::string& text) {
  const std::string k = key(prompt, text);
  std::lock_guard lock(mu_);
  auto it = entries_.find(k);
  if (it == entries_.end()) return std::nullopt;
  order_.splice(order_.begin(), order_, it->second.pos);
  return it->second.tokens;
}

size_t ReplyMemo::size() const {
  std::lock_guard lock(mu_);
  return entries_.size();
}

Result<std::vector<int32_t>> chat_prompt(const ByteTokenizer& tok,
                                         std::span<const ChatMessage> messages, ReplyMemo* memo) {
  std::vector<int32_t> out{SpecialTokens::kBos};
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    int32_t role = 0;
    if (m.role == "system" || m.role == "developer") {
      role = SpecialTokens::kSystem;
    } else if (m.role == "user" || m.role == "tool") {
      role = SpecialTokens::kUser;
    } else if (m.role == "assistant") {
      role = SpecialTokens::kAssistant;
    } else {
      return Status::invalid_argument(fmt::format(
          "messages[{}].role = \"{}\" is not a role: use system, user or assistant", i, m.role));
    }
    out.push_back(role);
    std::optional<std::vector<int32_t>> generated;
    if (role == SpecialTokens::kAssistant && memo != nullptr) generated = memo->find(out, m.content);
    const std::vector<int32_t> body = generated ? std::move(*generated) : tok.encode(m.content);
    out.insert(out.end(), body.begin(), body.end());
    out.push_back(SpecialTokens::kEnd);
  }
  out.push_back(SpecialTokens::kAssistant);
  return out;
}

std::vector<int32_t> completion_prompt(const ByteTokenizer& tok, std::string_view prompt) {
  std::vector<int32_t> out{SpecialTokens::kBos};
  const std::vector<int32_t> body = tok.encode(prompt);
  out.insert(out.end(), body.begin(), body.end());
  return out;
}

}  // namespace dualpath::serve
