#pragma once
// FakeTurnService: the API's TurnService without a cluster, for the whole-request fuzzer
// (fuzz/http_request_fuzz.cc) and the framing tests (http_server_test.cc), which cannot start
// node processes. Its contract is run_turn's: tokens go to on_tokens in order before run_turn
// returns; a cancelled or stopped turn ends early; an error is a Status. What it answers depends
// only on the prompt: its last token selects an error (kUnavailable when it is 7 mod 64) or a
// reply of `reply_tokens` bytes "ok" repeated, then the end token. Thread-safe.

#include <algorithm>
#include <atomic>
#include <vector>

#include "serve/http_api.h"

namespace dualpath::serve {

class FakeTurnService final : public TurnService {
 public:
  FakeTurnService() {
    config_.engine.model = "tiny";
    config_.engine.prefill_nodes = 1;
    config_.engine.decode_nodes = 1;
  }
  int64_t reply_tokens = 6;  // set before use

  Result<TurnResult> run_turn(TurnRequest request) override {
    turns_.fetch_add(1, std::memory_order_relaxed);
    if (!request.tokens.empty() && request.tokens.back() % 64 == 7) {
      return Status::unavailable("fake: no node is up");
    }
    TurnResult r;
    r.prompt_tokens = static_cast<int64_t>(request.tokens.size());
    r.path = sched::ReadPath::kPe;
    const int64_t n = std::min<int64_t>(request.gen_tokens, reply_tokens + 1);
    for (int64_t i = 0; i < n; ++i) {
      if (request.cancel && request.cancel->cancelled()) {
        return Status::aborted("fake: the turn was cancelled");
      }
      if (request.cancel && request.cancel->stopped()) break;
      const int32_t t = i == reply_tokens ? SpecialTokens::kEnd : (i % 2 == 0 ? 'o' : 'k');
      r.output_tokens.push_back(t);
      if (request.on_tokens) request.on_tokens(std::span<const int32_t>(&t, 1));
    }
    return r;
  }
  std::vector<NodeStatus> nodes() const override { return {}; }
  bool ready() const override { return true; }
  const ServeConfig& config() const override { return config_; }
  int64_t turns() const { return turns_.load(std::memory_order_relaxed); }

 private:
  ServeConfig config_;
  std::atomic<int64_t> turns_{0};  // relaxed: a count for tests
};

}  // namespace dualpath::serve
