#pragma once
// SessionStream: one agent session's token stream across turns, shared by the demo and the live
// bench. Each turn appends random prompt tokens to the context, the turn runs, and its output
// joins the context for the next one. The random stream is the session's own (seeded by the
// seed and the session number), so a session gives the same tokens whether it runs alone or
// beside others. Thread-compatible: one thread per session.

#include <algorithm>
#include <cstdint>
#include <vector>

#include <nlohmann/json.hpp>

#include "compute/init_rng.h"
#include "serve/cluster.h"

namespace dualpath::bench {

using engine::HopBytes;
using Json = nlohmann::json;
using serve::TurnRequest;
using serve::TurnResult;

class SessionStream {
 public:
  SessionStream(uint64_t seed, int64_t session, int64_t vocab)
      : rng_(compute::mix64(seed * 1000003 + static_cast<uint64_t>(session))), vocab_(vocab) {}

  // The session's random stream (the demo also draws its turn lengths from it).
  compute::SplitMix64& rng() { return rng_; }
  int64_t context_tokens() const { return static_cast<int64_t>(context_.size()); }
  // Cuts the context to its first `tokens` (a trace's compaction); longer keeps it all.
  void keep(int64_t tokens) {
    if (tokens < context_tokens()) context_.resize(static_cast<size_t>(std::max<int64_t>(0, tokens)));
  }
  // Appends `n` random tokens: this turn's new prompt tokens.
  void append_random(int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
      context_.push_back(static_cast<int32_t>(rng_.next() % static_cast<uint64_t>(vocab_)));
    }
  }
  // The whole prompt so far.
  const std::vector<int32_t>& prompt() const { return context_; }
  // The turn's output joins the context.
  void add_output(const TurnResult& result) {
    context_.insert(context_.end(), result.output_tokens.begin(), result.output_tokens.end());
  }

 private:
  compute::SplitMix64 rng_;
  int64_t vocab_;
  std::vector<int32_t> context_;
};

}  // namespace dualpath::bench
