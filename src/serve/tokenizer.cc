#include "serve/tokenizer.h"

#include <fmt/format.h>
#include <sentencepiece_processor.h>
#include <xxhash.h>

#include <charconv>
#include <filesystem>

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

std::optional<size_t> invalid_utf8_at(std::string_view text) {
  size_t i = 0;
  while (i < text.size()) {
    const auto b = static_cast<uint8_t>(text[i]);
    const int len = sequence_length(b);
    if (len == 0) return i;
    if (len == 1) {
      ++i;
      continue;
    }
    if (i + static_cast<size_t>(len) > text.size()) return i;
    if (!valid_second(b, static_cast<uint8_t>(text[i + 1]))) return i;
    for (int k = 2; k < len; ++k) {
      const auto c = static_cast<uint8_t>(text[i + static_cast<size_t>(k)]);
      if (c < 0x80 || c > 0xBF) return i;
    }
    i += static_cast<size_t>(len);
  }
  return std::nullopt;
}

std::string Tokenizer::decode(std::span<const int32_t> tokens) const {
  TokenTextStream s(*this, /*message=*/true);
  std::string out = s.push(tokens);
  return out + s.finish();
}

std::vector<int32_t> ByteTokenizer::encode(std::string_view text) const {
  std::vector<int32_t> out;
  out.reserve(text.size());
  for (char c : text) out.push_back(static_cast<uint8_t>(c));
  return out;
}

std::string ByteTokenizer::token_bytes(int32_t id, bool /*message_start*/) const {
  if (id < 0 || id >= 256) return {};
  return std::string(1, static_cast<char>(static_cast<uint8_t>(id)));
}

const Tokenizer& byte_tokenizer() {
  static const ByteTokenizer tok;
  return tok;
}

std::string TokenTextStream::push(std::span<const int32_t> tokens) {
  std::string out;
  for (int32_t t : tokens) {
    const std::string bytes = tok_->token_bytes(t, strip_);
    for (char c : bytes) out += utf8_.push_byte(static_cast<uint8_t>(c));
    if (!bytes.empty()) strip_ = false;
  }
  return out;
}

std::string ReplyMemo::key(std::string_view scope,
                           std::span<const int32_t> prompt,
                           const std::string& text) {
  // XXH3 over the tokens' bytes. A chat's parse looks up every earlier reply by the prompt
  // before it: FNV-1a a byte at a time took ~0.5 ms of the parse of a 16,000-token, 8-turn chat
  // (bench serve --direct), XXH3 a few microseconds.
  const uint64_t h = XXH3_64bits(prompt.data(), prompt.size_bytes());
  // The scope is length-prefixed so that no scope and text pair reads as another.
  return fmt::format("{}:{}{:016x}{}", scope.size(), scope, h, text);
}

void ReplyMemo::remember(std::span<const int32_t> prompt,
                         const std::string& text,
                         std::vector<int32_t> tokens,
                         std::string_view scope) {
  std::string k = key(scope, prompt, text);
  MutexLock lock(mu_);
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

std::optional<std::vector<int32_t>> ReplyMemo::find_in(std::string_view scope,
                                                       std::span<const int32_t> prompt,
                                                       const std::string& text) {
  const std::string k = key(scope, prompt, text);
  MutexLock lock(mu_);
  auto it = entries_.find(k);
  if (it == entries_.end()) return std::nullopt;
  order_.splice(order_.begin(), order_, it->second.pos);
  return it->second.tokens;
}

size_t ReplyMemo::size() const {
  MutexLock lock(mu_);
  return entries_.size();
}

namespace {

enum class Role { kSystem, kUser, kAssistant };

Result<Role> role_of(const ChatMessage& m, size_t index) {
  if (m.role == "system" || m.role == "developer") return Role::kSystem;
  if (m.role == "user" || m.role == "tool") return Role::kUser;
  if (m.role == "assistant") return Role::kAssistant;
  return Status::invalid_argument(fmt::format(
      "messages[{}].role = \"{}\" is not a role: use system, user or assistant", index, m.role));
}

// An assistant message's tokens: the generated ones if the memo knows them (for the prompt they
// answered, `before`), else the text encoded.
std::vector<int32_t> reply_body(const Tokenizer& tok,
                                const std::vector<int32_t>& before,
                                const std::string& text,
                                ReplyLookup* memo) {
  if (memo != nullptr) {
    if (auto generated = memo->find(before, text)) return std::move(*generated);
  }
  return tok.encode(text);
}

void append(std::vector<int32_t>& out, const std::vector<int32_t>& more) {
  out.insert(out.end(), more.begin(), more.end());
}

}  // namespace

Result<std::vector<int32_t>> ByteTokenizer::chat_prompt(std::span<const ChatMessage> messages,
                                                        ReplyLookup* memo) const {
  std::vector<int32_t> out{SpecialTokens::kBos};
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    DP_ASSIGN_OR_RETURN(Role role, role_of(m, i));
    out.push_back(role == Role::kSystem ? SpecialTokens::kSystem
                  : role == Role::kUser ? SpecialTokens::kUser
                                        : SpecialTokens::kAssistant);
    append(out, role == Role::kAssistant ? reply_body(*this, out, m.content, memo)
                                         : encode(m.content));
    out.push_back(SpecialTokens::kEnd);
  }
  out.push_back(SpecialTokens::kAssistant);
  return out;
}

std::vector<int32_t> ByteTokenizer::completion_prompt(std::string_view prompt) const {
  std::vector<int32_t> out{SpecialTokens::kBos};
  append(out, encode(prompt));
  return out;
}

namespace {

class SentencePieceTokenizer final : public Tokenizer {
 public:
  SentencePieceTokenizer(std::string path, std::unique_ptr<sentencepiece::SentencePieceProcessor> sp)
      : path_(std::move(path)), sp_(std::move(sp)) {
    const int n = sp_->GetPieceSize();
    bytes_.resize(static_cast<size_t>(n));
    for (int id = 0; id < n; ++id) {
      std::string& b = bytes_[static_cast<size_t>(id)];
      if (sp_->IsControl(id) || sp_->IsUnused(id)) continue;
      if (sp_->IsUnknown(id)) {
        b = " \xE2\x81\x87 ";  // " ⁇ ", SentencePiece's own rendering of <unk>
        continue;
      }
      const std::string& piece = sp_->IdToPiece(id);
      if (sp_->IsByte(id)) {  // "<0xNN>"
        unsigned v = 0;
        if (piece.size() == 6) std::from_chars(piece.data() + 3, piece.data() + 5, v, 16);
        b = std::string(1, static_cast<char>(v));
        continue;
      }
      static constexpr std::string_view kSpace = "\xE2\x96\x81";  // U+2581, the word boundary
      for (size_t i = 0; i < piece.size();) {
        if (piece.compare(i, kSpace.size(), kSpace) == 0) {
          b += ' ';
          i += kSpace.size();
        } else {
          b += piece[i++];
        }
      }
    }
  }

  std::string describe() const override {
    return fmt::format("sentencepiece {} ({} pieces)", path_, bytes_.size());
  }
  int32_t vocab_size() const override { return static_cast<int32_t>(bytes_.size()); }
  std::vector<int32_t> encode(std::string_view text) const override {
    std::vector<int> ids;
    if (!sp_->Encode(text, &ids).ok()) return {};  // only fails when no model is loaded
    return {ids.begin(), ids.end()};
  }
  std::string token_bytes(int32_t id, bool message_start) const override {
    if (id < 0 || static_cast<size_t>(id) >= bytes_.size()) return {};
    const std::string& b = bytes_[static_cast<size_t>(id)];
    if (message_start && !b.empty() && b[0] == ' ' && !sp_->IsByte(id)) return b.substr(1);
    return b;
  }
  int32_t eos() const override { return sp_->eos_id(); }

  Result<std::vector<int32_t>> chat_prompt(std::span<const ChatMessage> messages,
                                           ReplyLookup* memo) const override {
    std::vector<int32_t> out;
    std::string system;  // held for the next [INST] block
    auto inst = [&](const std::string& user) {
      if (sp_->bos_id() >= 0) out.push_back(sp_->bos_id());
      std::string text = "[INST] ";
      if (!system.empty()) text += "<<SYS>>\n" + system + "\n<</SYS>>\n\n";
      system.clear();
      append(out, encode(text + user + " [/INST]"));
    };
    for (size_t i = 0; i < messages.size(); ++i) {
      const ChatMessage& m = messages[i];
      DP_ASSIGN_OR_RETURN(Role role, role_of(m, i));
      if (role == Role::kSystem) {
        system += (system.empty() ? "" : "\n\n") + m.content;
      } else if (role == Role::kUser) {
        inst(m.content);
      } else {
        append(out, reply_body(*this, out, m.content, memo));
        if (sp_->eos_id() >= 0) out.push_back(sp_->eos_id());
      }
    }
    if (!system.empty() || out.empty()) inst("");  // a system message with no user turn after it
    return out;
  }
  std::vector<int32_t> completion_prompt(std::string_view prompt) const override {
    std::vector<int32_t> out;
    if (sp_->bos_id() >= 0) out.push_back(sp_->bos_id());
    append(out, encode(prompt));
    return out;
  }

 private:
  const std::string path_;
  const std::unique_ptr<sentencepiece::SentencePieceProcessor> sp_;
  std::vector<std::string> bytes_;  // by id: the bytes in a reply
};

}  // namespace

Result<std::shared_ptr<const Tokenizer>> load_sentencepiece(const std::string& model_path) {
  if (!std::filesystem::is_regular_file(model_path)) {
    return Status::not_found(fmt::format(
        "{}: no such file; the API needs the checkpoint's SentencePiece model (tokenizer.model; "
        "a tokenizer.json alone is not read)",
        model_path));
  }
  auto sp = std::make_unique<sentencepiece::SentencePieceProcessor>();
  if (const auto s = sp->Load(model_path); !s.ok()) {
    return Status::invalid_argument(
        fmt::format("{}: not a SentencePiece model: {}", model_path, s.ToString()));
  }
  if (sp->GetPieceSize() < 1) {
    return Status::invalid_argument(fmt::format("{}: the model has no pieces", model_path));
  }
  return std::shared_ptr<const Tokenizer>(
      std::make_shared<SentencePieceTokenizer>(model_path, std::move(sp)));
}

}  // namespace dualpath::serve
