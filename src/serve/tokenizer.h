#pragma once
// The served model's tokenizer and chat template (docs/api.md): ByteTokenizer for the built-in
// models, SentencePiece (a checkpoint's tokenizer.model) for `serve --model DIR`.
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
// Tokenizers are immutable and thread-safe; ReplyMemo is thread-safe; the stream decoders are
// thread-compatible.

#include <cstdint>
#include <list>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/mutex.h"
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

// The offset of the first byte of `text` that is not part of valid UTF-8 (RFC 3629, as
// Utf8Decoder reads it; a sequence cut off at the end counts), or nullopt when it is all valid.
std::optional<size_t> invalid_utf8_at(std::string_view text);

struct ChatMessage {
  std::string role;  // system, user, assistant (tool and developer are mapped to user / system)
  std::string content;
};

class ReplyLookup;

// The served model's tokenizer and chat template: text to tokens, each token's bytes in a reply,
// the end-of-reply token, and the prompt layouts. Implementations are immutable after load and
// thread-safe.
class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  // For logs and errors: "byte" or "sentencepiece FILE (N pieces)".
  virtual std::string describe() const = 0;
  // The ids it may produce or decode: at most the model's vocabulary.
  virtual int32_t vocab_size() const = 0;
  virtual std::vector<int32_t> encode(std::string_view text) const = 0;
  // The bytes token `id` stands for in generated text ("" for special, control and unknown
  // ids). `message_start`: it begins a chat message (SentencePiece drops the space that marks
  // the first word's start there, as its own decoder does; a completion keeps it, since it
  // continues the prompt's text).
  virtual std::string token_bytes(int32_t id, bool message_start) const = 0;
  // The token that ends a reply, or -1 if the model has none.
  virtual int32_t eos() const = 0;
  // The prompt of the reply to `messages` (see chat_prompt below).
  virtual Result<std::vector<int32_t>> chat_prompt(std::span<const ChatMessage> messages,
                                                   ReplyLookup* memo) const = 0;
  // A completion prompt: BOS (where the model has one), then the text's tokens.
  virtual std::vector<int32_t> completion_prompt(std::string_view prompt) const = 0;

  // The text of `tokens`, whole (valid UTF-8), as a message of its own (as sp.Decode gives it).
  std::string decode(std::span<const int32_t> tokens) const;
};

// The built-in models': bytes plus the SpecialTokens. Its chat layout: BOS, then per message
// <|role|> content <|end|>, then <|assistant|>.
class ByteTokenizer final : public Tokenizer {
 public:
  static constexpr int32_t kVocab = 512;  // the ids the tokenizer may meet (the tiny model's)
  std::string describe() const override { return "byte"; }
  int32_t vocab_size() const override { return SpecialTokens::kCount; }
  std::vector<int32_t> encode(std::string_view text) const override;
  std::string token_bytes(int32_t id, bool message_start) const override;
  int32_t eos() const override { return SpecialTokens::kEnd; }
  Result<std::vector<int32_t>> chat_prompt(std::span<const ChatMessage> messages,
                                           ReplyLookup* memo) const override;
  std::vector<int32_t> completion_prompt(std::string_view prompt) const override;
};

// One shared ByteTokenizer (the default of TokenTextStream).
const Tokenizer& byte_tokenizer();

// A checkpoint's tokenizer.model through libsentencepiece (byte-fallback pieces are bytes, "▁"
// is a space), with the Llama 2 chat layout:
//   <s>[INST] <<SYS>>\nsystem\n<</SYS>>\n\nuser [/INST] reply</s><s>[INST] user [/INST]
// Each [INST] block and each reply is tokenized on its own, so earlier turns keep their tokens
// when the conversation grows (a whole-string encode could merge pieces across the seams).
// kNotFound / kInvalidArgument naming the file when it cannot be read.
Result<std::shared_ptr<const Tokenizer>> load_sentencepiece(const std::string& model_path);

// Streams tokens into text, holding back a split character (for SSE chunks). `message`: the
// text is a chat message of its own (Tokenizer::token_bytes).
class TokenTextStream {
 public:
  explicit TokenTextStream(const Tokenizer& tok = byte_tokenizer(), bool message = false)
      : tok_(&tok), strip_(message) {}
  std::string push(std::span<const int32_t> tokens);
  std::string finish() { return utf8_.finish(); }

 private:
  const Tokenizer* tok_;
  Utf8Decoder utf8_;
  bool strip_;  // a message whose first bytes are still to come
};

// Finds the tokens a reply was generated as, by the prompt it answered and its text.
class ReplyLookup {
 public:
  virtual ~ReplyLookup() = default;
  virtual std::optional<std::vector<int32_t>> find(std::span<const int32_t> prompt,
                                                   const std::string& text) = 0;
};

// Remembers the tokens of generated replies by the prompt they answered and their text (LRU,
// `capacity` entries). The text alone is ambiguous: replies whose tokens are not text (the
// modeled backend's, special tokens) share one text, often the empty one, and splicing another
// conversation's tokens would break the prefix the next turn hits. A `scope` (the turn's cache
// namespace) keeps tenants apart: one tenant's replies are never spliced into another's turns,
// which would tell it, through prompt_tokens, what the other was answered.
class ReplyMemo final : public ReplyLookup {
 public:
  explicit ReplyMemo(size_t capacity = 4096) : capacity_(capacity) {}
  void remember(std::span<const int32_t> prompt,
                const std::string& text,
                std::vector<int32_t> tokens,
                std::string_view scope = {});
  // In the default scope.
  std::optional<std::vector<int32_t>> find(std::span<const int32_t> prompt,
                                           const std::string& text) override {
    return find_in({}, prompt, text);
  }
  std::optional<std::vector<int32_t>> find_in(std::string_view scope,
                                              std::span<const int32_t> prompt,
                                              const std::string& text);
  size_t size() const;

 private:
  mutable Mutex mu_;
  const size_t capacity_;
  std::list<std::string> order_ DP_GUARDED_BY(mu_);  // most recent first
  struct Entry {
    std::vector<int32_t> tokens;
    std::list<std::string>::iterator pos;
  };
  // Keyed by the scope, the prompt's digest (16 hex digits) and the text.
  std::unordered_map<std::string, Entry> entries_ DP_GUARDED_BY(mu_);
  static std::string key(std::string_view scope,
                         std::span<const int32_t> prompt,
                         const std::string& text);
};

// A ReplyMemo seen from one scope. Holds references: lives for one request.
class ScopedReplyMemo final : public ReplyLookup {
 public:
  ScopedReplyMemo(ReplyMemo& memo, std::string_view scope) : memo_(memo), scope_(scope) {}
  std::optional<std::vector<int32_t>> find(std::span<const int32_t> prompt,
                                           const std::string& text) override {
    return memo_.find_in(scope_, prompt, text);
  }

 private:
  ReplyMemo& memo_;
  const std::string_view scope_;
};

// The prompt of the reply to `messages`, in `tok`'s chat layout. An assistant message that the
// memo knows (for the tokens before it, which are the prompt it answered, and its text) is
// spliced in as its generated tokens.
// kInvalidArgument for an unknown role (naming it and the message index).
inline Result<std::vector<int32_t>> chat_prompt(const Tokenizer& tok,
                                                std::span<const ChatMessage> messages,
                                                ReplyLookup* memo) {
  return tok.chat_prompt(messages, memo);
}
inline std::vector<int32_t> completion_prompt(const Tokenizer& tok, std::string_view prompt) {
  return tok.completion_prompt(prompt);
}

}  // namespace dualpath::serve
