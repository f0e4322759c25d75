#pragma once
// The built-in models' tokenizer and chat template (docs/api.md).
//
// ByteTokenizer: one token per byte (ids 0..255) plus a few special tokens above them, within
// the tiny model's vocabulary of 512. Encoding is total and lossless; decoding goes through a
// Utf8Decoder, so the text a client sees is always valid UTF-8: an invalid byte sequence becomes
// U+FFFD, and a multi-byte character split across stream chunks is held back until it is whole.
//
// The chat template (chat_prompt) keeps every earlier turn's tokens byte-for-byte stable when a
// reply and a new user message are appended, so turn n+1's prompt starts with turn n's prompt
// and reply and hits their KV in the store. A reply's text need not re-encode to the tokens that
// produced it (a special token, an invalid byte): ReplyMemo remembers the tokens of each reply
// the server generated, by its text, and the template splices them back.
//
// Thread-compatible, except ReplyMemo (thread-safe).

#include <cstdint>
#include <list>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "dualpath/result.h"

namespace dualpath::serve {

struct SpecialTokens {
  static constexpr int32_t kBos = 256;
  static constexpr int32_t kSystem = 257;
  static constexpr int32_t kUser = 258;
  static constexpr int32_t kAssistant = 259;
  static constexpr int32_t kEnd = 260;  // ends a message; generating it ends the reply (EOS)
  static constexpr int32_t kCount = 261;  // ids at or above this are unused: they decode to ""
};

// Decodes a stream of bytes into valid UTF-8 text (RFC 3629: no overlongs, no surrogates, at
// most U+10FFFF). push() returns the text complete so far; finish() flushes a trailing
// incomplete sequence as U+FFFD.
class Utf8Decoder {
 public:
  std::string push(std::span<const uint8_t> bytes);
  std::string push_byte(uint8_t b);
  std::string finish();

 private:
  uint8_t pending_[4] = {};
  int have_ = 0;  // bytes of the current sequence held back
  int need_ = 0;  // its total length
};

class ByteTokenizer {
 public:
  static constexpr int32_t kVocab = 512;  // the ids the tokenizer may meet (the tiny model's)
  std::vector<int32_t> encode(std::string_view text) const;
  // The text of `tokens`, whole: special and unused tokens give nothing.
  std::string decode(std::span<const int32_t> tokens) const;
};

// Streams tokens into text, holding back a split character (for SSE chunks).
class TokenTextStream {
 public:
  std::string push(std::span<const int32_t> tokens);
  std::string finish() { return utf8_.finish(); }

 private:
  Utf8Decoder utf8_;
};

struct ChatMessage {
  std::string role;  // system, user, assistant (tool and developer are mapped to user / system)
  std::string content;
};

// Remembers the tokens of generated replies by the prompt they answered and their text (LRU,
// `capacity` entries). The text alone is ambiguous: replies whose tokens are not text (the
// modeled backend's, special tokens) share one text, often the empty one, and splicing another
// conversation's tokens would break the prefix the next turn hits.
class ReplyMemo {
 public:
  explicit ReplyMemo(size_t capacity = 4096) : capacity_(capacity) {}
  void remember(std::span<const int32_t> prompt, const std::string& text,
                std::vector<int32_t> tokens);
  std::optional<std::vector<int32_t>> find(std::span<const int32_t> prompt,
                                           const std::string& text);
  size_t size() const;

 private:
  mutable std::mutex mu_;
  const size_t capacity_;
  std::list<std::string> order_;  // guarded by mu_: most recent first
  struct Entry {
    std::vector<int32_t> tokens;
    std::list<std::string>::iterator pos;
  };
  // Keyed by the prompt's digest (16 hex digits) and the text.
  std::unordered_map<std::string, Entry> entries_;  // guarded by mu_
  static std::string key(std::span<const int32_t> prompt, const std::string& text);
};

// BOS, then per message <|role|> content <|end|>, then <|assistant|>: the prompt of the reply.
// An assistant message that the memo knows (for the tokens before it, which end with
// <|assistant|> as the prompt it answered did, and its text) is spliced in as its generated
// tokens.
// kInvalidArgument for an unknown role (naming it and the message index).
Result<std::vector<int32_t>> chat_prompt(const ByteTokenizer& tok,
                                         std::span<const ChatMessage> messages, ReplyMemo* memo);
// A completion prompt: BOS, then the text's bytes.
std::vector<int32_t> completion_prompt(const ByteTokenizer& tok, std::string_view prompt);

}  // namespace dualpath::serve
