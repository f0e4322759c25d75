#pragma once
// Sampling: how the next token is chosen from a step's logits. Greedy (temperature 0, the
// default) takes the largest logit. Otherwise the token is drawn from softmax(logits / T),
// restricted to the top_k largest (0: no limit) and to the smallest set whose probability reaches
// top_p (nucleus), with a uniform number that depends only on (seed, position): the token's
// absolute position in the sequence. So a request samples the same tokens whichever node
// computes them and by whichever read path its KV came: the prefill node's first token, the
// decode node's later ones, and a decode migrated mid-way all agree.
//
// The modeled backend has no logits: its tokens stay as it gives them.
// Thread-safe (pure functions).

#include <cstdint>
#include <span>

#include "compute/compute_backend.h"

namespace dualpath::compute {

struct SamplingParams {
  double temperature = 0;  // 0: greedy
  double top_p = 1.0;      // (0, 1]
  int top_k = 0;           // 0: all tokens
  uint64_t seed = 0;

  bool greedy() const { return temperature <= 0; }
};

// The token at `position` from these logits.
int32_t sample_token(std::span<const float> logits, const SamplingParams& p, int64_t position);

// The backend's greedy choice, or a sample from its logits (when it has them).
inline int32_t choose_token(const NextToken& next, const SamplingParams& p, int64_t position) {
  if (p.greedy() || next.logits.empty()) return next.token;
  return sample_token(next.logits, p, position);
}

}  // namespace dualpath::compute
