#pragma once
// From a turn's output tokens to the reply a client sees (docs/api.md): the text (valid UTF-8,
// a character split across tokens held back), cut at the end token or the first stop string,
// and the generated tokens that make exactly that text (for the reply memo, tokenizer.h).
// Thread-compatible: one per request, fed in token order.

#include <algorithm>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "serve/tokenizer.h"

namespace dualpath::serve {

// Holds back text that could be the start of a stop string, and cuts at the first one.
class StopScanner {
 public:
  explicit StopScanner(std::vector<std::string> stops) : stops_(std::move(stops)) {}
  bool stopped() const { return stopped_; }

  std::string push(std::string_view text) {
    if (stopped_) return {};
    held_ += text;
    size_t cut = std::string::npos;
    for (const std::string& s : stops_) cut = std::min(cut, held_.find(s));
    if (cut != std::string::npos) {
      stopped_ = true;
      std::string out = held_.substr(0, cut);
      held_.clear();
      return out;
    }
    size_t keep = 0;
    for (const std::string& s : stops_) {
      for (size_t l = std::min(s.size() - 1, held_.size()); l > keep; --l) {
        if (held_.compare(held_.size() - l, l, s, 0, l) == 0) {
          keep = l;
          break;
        }
      }
    }
    std::string out = held_.substr(0, held_.size() - keep);
    held_.erase(0, held_.size() - keep);
    return out;
  }
  std::string finish() {
    std::string out = stopped_ ? std::string() : std::move(held_);
    held_.clear();
    return out;
  }

 private:
  std::vector<std::string> stops_;
  std::string held_;
  bool stopped_ = false;
};

// Turns output tokens into the reply: text deltas, the end of the reply (EOS or a stop string)
// and the tokens that made it.
class ReplyBuilder {
 public:
  // `chat`: the reply is a chat message (TokenTextStream).
  // `ignore_eos`: an end token is counted and skipped (no text), and the reply goes on.
  ReplyBuilder(const Tokenizer& tok, bool chat, std::vector<std::string> stops,
               bool ignore_eos = false)
      : tok_(tok), chat_(chat), ignore_eos_(ignore_eos), text_(tok, chat),
        stop_(std::move(stops)) {}

  // The text to send for these tokens (possibly empty).
  std::string feed(std::span<const int32_t> tokens) {
    std::string delta;
    for (int32_t t : tokens) {
      if (done_) break;
      ++completion_tokens_;
      if (t == tok_.eos() && ignore_eos_) continue;
      if (t == tok_.eos()) {
        done_ = true;
        finish_reason_ = "stop";
        delta += stop_.push(text_.finish());
        delta += stop_.finish();
        break;
      }
      accepted_.push_back(t);
      delta += stop_.push(text_.push(std::span<const int32_t>(&t, 1)));
      if (stop_.stopped()) {
        done_ = true;
        finish_reason_ = "stop";
      }
    }
    reply_ += delta;
    return delta;
  }
  // At the end of the output: what was held back.
  std::string finish() {
    if (done_) return {};
    done_ = true;
    std::string delta = stop_.push(text_.finish());
    delta += stop_.finish();
    reply_ += delta;
    return delta;
  }
  bool done() const { return done_; }
  const std::string& finish_reason() const { return finish_reason_; }
  int64_t completion_tokens() const { return completion_tokens_; }
  const std::string& reply() const { return reply_; }
  // The generated tokens whose text is exactly the reply (for the memo): all of them unless a
  // stop string cut the reply, else the longest prefix that decodes to it; nullopt if none does.
  std::optional<std::vector<int32_t>> reply_tokens() const {
    TokenTextStream s(tok_, chat_);
    std::string acc;
    std::optional<size_t> best;
    if (reply_.empty()) best = 0;
    for (size_t k = 0; k < accepted_.size() && acc.size() <= reply_.size(); ++k) {
      acc += s.push(std::span<const int32_t>(&accepted_[k], 1));
      TokenTextStream rest = s;  // what a finish here would add (a held, incomplete character)
      if (acc.size() <= reply_.size() && acc + rest.finish() == reply_) best = k + 1;
    }
    if (!best) return std::nullopt;
    return std::vector<int32_t>(accepted_.begin(), accepted_.begin() + static_cast<long>(*best));
  }

 private:
  const Tokenizer& tok_;
  const bool chat_;
  const bool ignore_eos_;
  TokenTextStream text_;
  StopScanner stop_;
  std::vector<int32_t> accepted_;
  std::string reply_;
  std::string finish_reason_ = "length";
  int64_t completion_tokens_ = 0;
  bool done_ = false;
};

}  // namespace dualpath::serve
