#include "sched/de_scheduler.h"

namespace dualpath::sched {

int pick_de_group(std::span<const int64_t> group_tok_sums) {
  int best = -1;
  for (int g = 0; g < static_cast<int>(group_tok_sums.size()); ++g) {
    if (best < 0 || group_tok_sums[static_cast<size_t>(g)] < group_tok_sums[static_cast<size_t>(best)])
      best = g;
  }
  return best;
}

std::vector<Assignment> schedule_de(std::deque<RequestInfo>& queue,
                                    std::vector<DeEngineLoad>& engines, const DeParams& params,
                                    std::span<const int> engine_nodes) {
  std::vector<Assignment> assigned;
  if (engines.empty() || queue.empty()) return assigned;

  // R: the longest prefix of the queue that fits in the group's free HBM, ignoring fragmentation.
  double free_hbm = 0;
  int64_t tok_sum = 0;
  for (const auto& e : engines) {
    free_hbm += e.free_hbm_bytes;
    tok_sum += e.tok;
  }
  int64_t prefix_len = 0;
  double need = 0;
  for (const auto& r : queue) {
    if (need + r.hbm_need_bytes > free_hbm) break;
    need += r.hbm_need_bytes;
    prefix_len += r.tokens;
  }
  const double z = params.z_factor * static_cast<double>(prefix_len + tok_sum) /
                   static_cast<double>(engines.size());

  // Ties between engines go to the one whose node holds the fewest requests, then to the lowest
  // index. The paper does not say; by index alone, an idle group filled its first node's
  // engines first, and with 8 engines per node the last nodes of a group took no turn at all,
  // their storage NICs idle while the first ones' queued (docs/serve.md, Measured: why the
  // simulator's PE nodes read 1.8x a DE node). Without engine_nodes, by index.
  // slot[e]: engine e's node among the group's distinct nodes; node_seq[slot]: its requests.
  const bool by_node = engine_nodes.size() == engines.size();
  std::vector<int> nodes, slot(engines.size(), 0);
  std::vector<int64_t> node_seq;
  for (size_t e = 0; by_node && e < engines.size(); ++e) {
    // A node's engines are usually adjacent: try the last node first.
    size_t s = !nodes.empty() && nodes.back() == engine_nodes[e] ? nodes.size() - 1 : 0;
    while (s < nodes.size() && nodes[s] != engine_nodes[e]) ++s;
    if (s == nodes.size()) {
      nodes.push_back(engine_nodes[e]);
      node_seq.push_back(0);
    }
    slot[e] = static_cast<int>(s);
    node_seq[s] += engines[e].seq;
  }
  // Is engine e a better pick than `best` at the same key (seq, or tok)?
  auto fewer_on_node = [&](int e, int best) {
    return by_node && node_seq[static_cast<size_t>(slot[static_cast<size_t>(e)])] <
                          node_seq[static_cast<size_t>(slot[static_cast<size_t>(best)])];
  };

  while (!queue.empty()) {
    const RequestInfo& r = queue.front();
    int best_low = -1;   // fits and stays under Z: balance requests (seq)
    int best_high = -1;  // fits but goes over Z: balance tokens
    for (int e = 0; e < static_cast<int>(engines.size()); ++e) {
      const DeEngineLoad& load = engines[static_cast<size_t>(e)];
      if (load.free_hbm_bytes < r.hbm_need_bytes) continue;
      if (static_cast<double>(load.tok + r.tokens) <= z) {
        if (best_low < 0) {
          best_low = e;
          continue;
        }
        const int64_t s = engines[static_cast<size_t>(best_low)].seq;
        if (load.seq < s || (load.seq == s && fewer_on_node(e, best_low))) best_low = e;
      } else if (best_high < 0) {
        best_high = e;
      } else {
        const int64_t t = engines[static_cast<size_t>(best_high)].tok;
        if (load.tok < t || (load.tok == t && fewer_on_node(e, best_high))) best_high = e;
      }
    }
    int de = best_low >= 0 ? best_low : best_high;
    if (r.affinity_node >= 0 && engine_nodes.size() == engines.size()) {
      // The node holding its hit, if one of its engines can take it within the affinity bound
      // (the fewest requests among them).
      int best_aff = -1;
      double now_sum = 0;  // the loads as this fetch has updated them
      for (const DeEngineLoad& l : engines) now_sum += static_cast<double>(l.tok);
      const double mean = now_sum / static_cast<double>(engines.size());
      const auto rt = static_cast<double>(r.tokens);
      for (int e = 0; e < static_cast<int>(engines.size()); ++e) {
        const DeEngineLoad& load = engines[static_cast<size_t>(e)];
        if (engine_nodes[static_cast<size_t>(e)] != r.affinity_node) continue;
        if (load.free_hbm_bytes < r.hbm_need_bytes) continue;
        if (static_cast<double>(load.tok + r.tokens) > params.affinity_factor * (mean + rt))
          continue;
        if (best_aff < 0 || load.seq < engines[static_cast<size_t>(best_aff)].seq) best_aff = e;
      }
      if (best_aff >= 0) de = best_aff;
    }
    if (de < 0) break;  // no engine has HBM for the head: end the fetch (head-of-line, as paper)
    DeEngineLoad& load = engines[static_cast<size_t>(de)];
    load.tok += r.tokens;
    load.seq += 1;
    load.free_hbm_bytes -= r.hbm_need_bytes;
    if (by_node) node_seq[static_cast<size_t>(slot[static_cast<size_t>(de)])] += 1;
    assigned.push_back({r.id, de});
    queue.pop_front();
  }
  return assigned;
}

int pick_de_group_with_affinity(std::span<const int64_t> group_tok_sums, int affinity_group,
                                int64_t tokens, double affinity_factor, int64_t dead_sum) {
  const int least = pick_de_group(group_tok_sums);
  if (affinity_group < 0 || affinity_group >= static_cast<int>(group_tok_sums.size()) ||
      affinity_group == least || group_tok_sums[static_cast<size_t>(affinity_group)] >= dead_sum)
    return least;
  double total = 0;
  int live = 0;
  for (int64_t s : group_tok_sums) {
    if (s >= dead_sum) continue;
    total += static_cast<double>(s);
    ++live;
  }
  if (live == 0) return least;
  const double t = static_cast<double>(tokens);
  const double mine = static_cast<double>(group_tok_sums[static_cast<size_t>(affinity_group)]) + t;
  return mine <= affinity_factor * (total / live + t) ? affinity_group : least;
}

}  // namespace dualpath::sched
