#include "workload/shape.h"

#include <algorithm>

namespace dualpath::workload {

std::vector<TurnShape> shape(const Trajectory& trajectory) {
  std::vector<TurnShape> out;
  out.reserve(trajectory.turns.size());
  int64_t seen = 0;  // prompts and generated tokens so far
  for (const Turn& t : trajectory.turns) {
    TurnShape s;
    s.context_tokens = t.keep_tokens >= 0 ? std::min(t.keep_tokens, seen) : seen;
    s.prompt_tokens = s.context_tokens + t.append_tokens;
    s.gen_tokens = t.gen_tokens;
    seen = s.prompt_tokens + s.gen_tokens;
    out.push_back(s);
  }
  return out;
}

int64_t final_length(const Trajectory& trajectory) {
  const auto shapes = shape(trajectory);
  return shapes.empty() ? 0 : shapes.back().prompt_tokens + shapes.back().gen_tokens;
}

}  // namespace dualpath::workload
