#include "sched/pe_scheduler.h"

namespace dualpath::sched {

std::vector<Assignment> schedule_pe(std::deque<RequestInfo>& queue,
                                    std::vector<PeEngineLoad>& engines,
                                    std::span<const int64_t> read_q_tokens,
                                    const PeParams& params) {
  std::vector<Assignment> assigned;
  while (!queue.empty()) {
    int best_short = -1;  // C2: short read queue, not overloaded
    int best_long = -1;   // C3: long read queue, not overloaded
    for (int e = 0; e < static_cast<int>(engines.size()); ++e) {
      const PeEngineLoad& load = engines[static_cast<size_t>(e)];
      if (load.tok > params.beta_tokens) continue;  // C1: overloaded
      auto node = static_cast<size_t>(load.node);
      int64_t rq = node < read_q_tokens.size() ? read_q_tokens[node] : 0;
      int& best = rq <= params.alpha_tokens ? best_short : best_long;
      if (best < 0 || load.tok < engines[static_cast<size_t>(best)].tok) best = e;
    }
    int pe = best_short >= 0 ? best_short : best_long;
    if (pe < 0) break;  // every engine overloaded: end the fetch
    RequestInfo r = queue.front();
    queue.pop_front();
    engines[static_cast<size_t>(pe)].tok += r.tokens;
    engines[static_cast<size_t>(pe)].seq += 1;
    assigned.push_back({r.id, pe});
  }
  return assigned;
}

}  // namespace dualpath::sched
