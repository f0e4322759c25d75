#include "sched/cluster_scheduler.h"

#include <algorithm>
#include <limits>
#include <numeric>

namespace dualpath::sched {

namespace {

// Loads that keep an engine out of every decision: over any beta, and no HBM.
constexpr int64_t kDeadTokens = std::numeric_limits<int64_t>::max() / 4;

// The group of each node, from the groups' sizes in nodes.
std::vector<int> group_of_nodes(const std::vector<int>& sizes) {
  std::vector<int> group;
  for (size_t g = 0; g < sizes.size(); ++g)
    group.insert(group.end(), static_cast<size_t>(sizes[g]), static_cast<int>(g));
  return group;
}

std::vector<std::pair<int, int>> make_groups(const std::vector<int>& group_of, int engines_per_node) {
  std::vector<std::pair<int, int>> groups;  // (first engine, count)
  for (size_t n = 0; n < group_of.size(); ++n) {
    if (group_of[n] >= static_cast<int>(groups.size()))
      groups.emplace_back(static_cast<int>(n) * engines_per_node, 0);
    groups.back().second += engines_per_node;
  }
  return groups;
}

}  // namespace

std::vector<int> ep_group_sizes(int nodes, int nodes_per_group) {
  std::vector<int> sizes;
  const int per = std::max(1, nodes_per_group);
  for (int n = 0; n < nodes; n += per) sizes.push_back(std::min(per, nodes - n));
  return sizes;
}

ClusterScheduler::ClusterScheduler(const ClusterShape& shape, const ClusterSchedulerParams& params)
    : shape_(shape), params_(params) {
  const int P = shape.prefill_nodes, D = shape.decode_nodes;
  // Explicit sizes count only where they add up to the role's nodes.
  auto sizes = [](const std::vector<int>& explicit_sizes, int nodes, int per_group) {
    return std::accumulate(explicit_sizes.begin(), explicit_sizes.end(), 0) == nodes &&
                   !explicit_sizes.empty()
               ? explicit_sizes
               : ep_group_sizes(nodes, per_group);
  };
  const std::vector<int> pe_group =
      group_of_nodes(sizes(shape.pe_group_nodes, P, shape.pe_ep_nodes));
  const std::vector<int> de_group =
      group_of_nodes(sizes(shape.de_group_nodes, D, shape.de_ep_nodes));
  for (int n = 0; n < P; ++n) {
    for (int i = 0; i < shape.pe_engines_per_node; ++i) {
      Pe e;
      e.node = n;
      e.group = pe_group[static_cast<size_t>(n)];
      e.load = {n, 0, 0};
      pes_.push_back(e);
    }
  }
  for (int n = 0; n < D; ++n) {
    for (int i = 0; i < shape.de_engines_per_node; ++i) {
      De e;
      e.node = P + n;
      e.group = de_group[static_cast<size_t>(n)];
      const auto g = static_cast<size_t>(e.group);
      e.hbm_budget = g < params.de_group_hbm_bytes.size() ? params.de_group_hbm_bytes[g]
                                                          : params.de_hbm_bytes;
      e.load = {0, 0, e.hbm_budget};
      des_.push_back(e);
    }
  }
  for (auto [first, count] : make_groups(pe_group, shape.pe_engines_per_node))
    pe_groups_.push_back({first, count});
  for (auto [first, count] : make_groups(de_group, shape.de_engines_per_node))
    de_groups_.push_back({first, count});
  de_private_.resize(de_groups_.size());
  de_private_pending_.resize(de_groups_.size());
  de_private_tokens_.assign(de_groups_.size(), 0);
  de_blocked_.assign(de_groups_.size(), 0);
  ledger_.assign(static_cast<size_t>(P + D), 0);
  reported_.assign(static_cast<size_t>(P + D), 0);
  alive_.assign(static_cast<size_t>(P + D), true);
}

int64_t ClusterScheduler::read_queue(int node) const {
  return std::max(ledger_[static_cast<size_t>(node)], reported_[static_cast<size_t>(node)]);
}

ReadPath ClusterScheduler::choose_path(const SchedRequest& r, int pe, int de) {
  if (r.path) return *r.path;
  switch (params_.paths) {
    case PathPolicy::kPeOnly:
      return ReadPath::kPe;
    case PathPolicy::kAlternate:
      return rr_path_.next(2) == 0 ? ReadPath::kPe : ReadPath::kDe;
    case PathPolicy::kShortestQueue:
      return choose_read_path(read_queue(pe_node_of(pe)), read_queue(de_node_of(de)));
    case PathPolicy::kNoIo:
      return ReadPath::kOracle;
    case PathPolicy::kSplit:
      return ReadPath::kSplit;
  }
  return ReadPath::kPe;
}

Placement ClusterScheduler::complete(const Pending& p, int de) {
  Placement out;
  out.request_id = p.request.id;
  out.pe = p.pe;
  out.de = de;
  out.path = choose_path(p.request, p.pe, de);
  // The DE DRAM tier: placed on the node that holds the session, its leading tokens come from
  // that node's DRAM; storage reads cover the rest of the hit.
  const bool layer_path = out.path == ReadPath::kPe || out.path == ReadPath::kDe ||
                          out.path == ReadPath::kSplit;
  if (layer_path && p.request.dram_tokens > 0 && p.request.dram_node == de_node_of(de))
    out.dram_tokens = std::min(p.request.dram_tokens, p.request.hit_tokens);
  const int64_t hit = p.request.hit_tokens - out.dram_tokens;
  if (out.dram_tokens > 0 && hit == 0) out.path = ReadPath::kDe;
  if (params_.recompute_auto && !p.request.path && out.dram_tokens == 0 && hit > 0 &&
      layer_path && p.request.recompute_extra_s > 0 && params_.read_tokens_per_s > 0) {
    const double qpe = static_cast<double>(read_queue(pe_node_of(p.pe)));
    const double qde = static_cast<double>(read_queue(de_node_of(de)));
    const double rate = params_.read_tokens_per_s;
    const double h = static_cast<double>(hit);
    const double read_s = out.path == ReadPath::kPe   ? (qpe + h) / rate
                          : out.path == ReadPath::kDe ? (qde + h) / rate
                                                      : (qpe + qde + h) / (2 * rate);
    // The work queued ahead of it on its PE (its own is in the engine's load since assignment).
    const double pe_wait_s =
        std::max(0.0, pes_[static_cast<size_t>(p.pe)].load.work - p.request.pe_work());
    if (choose_recompute(params_.recompute_margin * p.request.recompute_extra_s,
                         read_s, params_.recompute_margin * pe_wait_s))
      out.path = ReadPath::kRecompute;
  }
  if (out.path == ReadPath::kSplit) {
    // A forced split splits any two blocks; the policy's only parts worth a second read.
    const int64_t min_part = p.request.path ? params_.block_tokens : params_.split_min_tokens;
    const ReadSplit split = split_read(hit, params_.block_tokens, read_queue(pe_node_of(p.pe)),
                                       read_queue(de_node_of(de)), min_part);
    out.path = split.path();
    out.pe_read_tokens = split.pe_tokens;
    out.de_read_tokens = split.de_tokens;
    if (out.dram_tokens > 0 && out.path == ReadPath::kPe && out.de_read_tokens == 0)
      out.path = ReadPath::kSplit;  // the DE still pushes its DRAM part
  } else if (out.path == ReadPath::kPe) {
    out.pe_read_tokens = hit;
    if (out.dram_tokens > 0) out.path = ReadPath::kSplit;
  } else if (out.path == ReadPath::kDe) {
    out.de_read_tokens = hit;
  }
  // Each reading node's ledger holds its part until read_finished().
  out.read_tokens = out.pe_read_tokens + out.de_read_tokens;
  ledger_[static_cast<size_t>(pe_node_of(p.pe))] += out.pe_read_tokens;
  ledger_[static_cast<size_t>(de_node_of(de))] += out.de_read_tokens;
  return out;
}

std::optional<Placement> ClusterScheduler::submit(const SchedRequest& request) {
  std::optional<Placement> out = submit_unlogged(request);
  if (log_ != nullptr) {
    SchedulerEvent e;
    e.kind = SchedulerEvent::Kind::kSubmit;
    e.request = request;
    e.submitted = out;
    log_->push_back(std::move(e));
  }
  return out;
}

std::optional<Placement> ClusterScheduler::submit_unlogged(const SchedRequest& request) {
  if (params_.engines == EnginePolicy::kPaper) {
    pe_queue_.push_back({request, -1});
    return std::nullopt;
  }
  // Round robin over live engines; the cursor advances once per submission, as the baseline's.
  auto pick = [&](RoundRobin& rr, int n, auto node_of) -> int {
    const int first = rr.next(n);
    for (int k = 0; k < n; ++k) {
      const int e = (first + k) % n;
      if (alive_[static_cast<size_t>(node_of(e))]) return e;
    }
    return -1;
  };
  const int pe = pick(rr_pe_, pe_engines(), [&](int e) { return pe_node_of(e); });
  const int de = pick(rr_de_, de_engines(), [&](int e) { return de_node_of(e); });
  if (pe < 0 || de < 0) return std::nullopt;
  Pe& p = pes_[static_cast<size_t>(pe)];
  p.load.tok += request.prompt_tokens;
  p.load.work += request.pe_work();
  p.load.seq += 1;
  De& d = des_[static_cast<size_t>(de)];
  d.load.tok += request.prompt_tokens + request.gen_tokens;
  d.load.seq += 1;
  return complete({request, pe}, de);
}

FetchResult ClusterScheduler::fetch() {
  FetchResult out = fetch_unlogged();
  if (log_ != nullptr) {
    SchedulerEvent e;
    e.kind = SchedulerEvent::Kind::kFetch;
    e.fetched = out;
    log_->push_back(std::move(e));
  }
  return out;
}

FetchResult ClusterScheduler::fetch_unlogged() {
  FetchResult out;
  // PE: the groups fetch at the same tick and take turns, one request each, starting at a
  // rotating group, until the queue is empty or every group is full (Algorithm 1's C1). A
  // group-after-group fetch let the first groups take a short queue whole while later ones
  // idled: 8 % PE idle at 48P96D (docs/simulator.md).
  std::vector<int64_t>& read_q = scratch_.read_q;
  read_q.resize(static_cast<size_t>(nodes()));
  for (int n = 0; n < nodes(); ++n) read_q[static_cast<size_t>(n)] = read_queue(n);
  const auto ngroups = static_cast<uint32_t>(pe_groups_.size());
  // Each group's engines, in pe_groups_ order (a group's are pes_[first, first + count)).
  std::vector<PeEngineLoad>& loads = scratch_.pe_loads;
  loads.resize(pes_.size());
  for (size_t i = 0; i < pes_.size(); ++i) {
    loads[i] = pes_[i].load;
    if (!alive_[static_cast<size_t>(pes_[i].node)]) loads[i].tok = kDeadTokens;
  }
  std::vector<uint8_t>& full = scratch_.full;
  full.assign(ngroups, 0);
  uint32_t open = ngroups;
  for (uint32_t k = 0; open > 0 && !pe_queue_.empty(); ++k) {
    const uint32_t g = (rotation_ + k) % ngroups;
    if (full[g] != 0) continue;
    const Group& grp = pe_groups_[g];
    const std::span<PeEngineLoad> group_loads(loads.data() + grp.first,
                                              static_cast<size_t>(grp.count));
    const int engine = pick_pe(group_loads, read_q, params_.pe);
    if (engine < 0) {
      full[g] = 1;
      --open;
      continue;
    }
    Pending p = std::move(pe_queue_.front());
    pe_queue_.pop_front();
    p.pe = grp.first + engine;
    for (PeEngineLoad* l : {&group_loads[static_cast<size_t>(engine)],
                            &pes_[static_cast<size_t>(p.pe)].load}) {
      l->tok += p.request.prompt_tokens;
      l->work += p.request.pe_work();
      l->seq += 1;
    }
    out.pe_assigned.push_back({p.request.id, p.pe});
    de_queue_.push_back(std::move(p));
  }
  rotation_++;
  // DE phase 1: drain the global queue to the least-loaded live group (none live: it waits).
  if (!de_queue_.empty()) {
    std::vector<int64_t>& sums = scratch_.sums;
    sums.assign(de_groups_.size(), 0);
    bool any_group = false;
    for (size_t gi = 0; gi < de_groups_.size(); ++gi) {
      if (!de_group_alive(gi)) {
        sums[gi] = kDeadTokens;
        continue;
      }
      any_group = true;
      for (int i = 0; i < de_groups_[gi].count; ++i)
        sums[gi] += des_[static_cast<size_t>(de_groups_[gi].first + i)].load.tok;
      sums[gi] += de_private_tokens_[gi];
    }
    while (any_group && !de_queue_.empty()) {
      Pending p = std::move(de_queue_.front());
      de_queue_.pop_front();
      const int64_t tokens = p.request.prompt_tokens + p.request.gen_tokens;
      const int affinity = p.request.dram_tokens > 0 && p.request.dram_node >= shape_.prefill_nodes &&
                                   p.request.dram_node < nodes()
                               ? de_group_of_node(p.request.dram_node)
                               : -1;
      const auto gi = static_cast<size_t>(
          affinity < 0 ? pick_de_group(sums)
                       : pick_de_group_with_affinity(sums, affinity, tokens,
                                                     params_.de.affinity_factor, kDeadTokens));
      de_private_[gi].push_back({p.request.id, tokens, p.request.hbm_need_bytes, 0.0,
                                 p.request.dram_tokens > 0 ? p.request.dram_node : -1});
      de_private_tokens_[gi] += tokens;
      sums[gi] += tokens;
      de_private_pending_[gi].push_back(std::move(p));
    }
  }
  // DE phase 2, per group, over its live engines.
  for (size_t gi = 0; gi < de_groups_.size(); ++gi) {
    auto& queue = de_private_[gi];
    if (queue.empty() || de_blocked_[gi] != 0) continue;
    std::vector<DeEngineLoad>& group_loads = scratch_.de_loads;
    std::vector<int>& index = scratch_.de_index;  // group_loads[i] is engine index[i]
    std::vector<int>& engine_nodes = scratch_.de_nodes;
    group_loads.clear();
    index.clear();
    engine_nodes.clear();
    for (int i = 0; i < de_groups_[gi].count; ++i) {
      const int de = de_groups_[gi].first + i;
      if (!alive_[static_cast<size_t>(de_node_of(de))]) continue;
      group_loads.push_back(des_[static_cast<size_t>(de)].load);
      index.push_back(de);
      engine_nodes.push_back(de_node_of(de));
    }
    for (const Assignment& as : schedule_de(queue, group_loads, params_.de, engine_nodes)) {
      const int de = index[static_cast<size_t>(as.engine)];
      Pending p = std::move(de_private_pending_[gi].front());
      de_private_pending_[gi].pop_front();
      const int64_t tokens = p.request.prompt_tokens + p.request.gen_tokens;
      de_private_tokens_[gi] -= tokens;
      De& e = des_[static_cast<size_t>(de)];
      e.load.tok += tokens;
      e.load.seq += 1;
      e.load.free_hbm_bytes -= p.request.hbm_need_bytes;
      out.placed.push_back(complete(p, de));
    }
    de_blocked_[gi] = queue.empty() ? 0 : 1;
  }
  return out;
}

bool ClusterScheduler::has_queued() const { return queued() > 0; }

size_t ClusterScheduler::queued() const {
  size_t n = pe_queue_.size() + de_queue_.size();
  for (const auto& q : de_private_) n += q.size();
  return n;
}

void ClusterScheduler::log(SchedulerEvent::Kind kind, int index, int64_t tokens, double bytes,
                           bool alive) {
  if (log_ == nullptr) return;
  SchedulerEvent e;
  e.kind = kind;
  e.index = index;
  e.tokens = tokens;
  e.bytes = bytes;
  e.alive = alive;
  log_->push_back(std::move(e));
}

void ClusterScheduler::read_finished(int node, int64_t tokens) {
  log(SchedulerEvent::Kind::kReadFinished, node, tokens, 0, true);
  ledger_[static_cast<size_t>(node)] -= tokens;
}

void ClusterScheduler::prefill_finished(int pe, int64_t prompt_tokens, double work) {
  log(SchedulerEvent::Kind::kPrefillFinished, pe, prompt_tokens, work, true);
  Pe& e = pes_[static_cast<size_t>(pe)];
  e.load.tok -= prompt_tokens;
  e.load.work -= work;
  e.load.seq -= 1;
}

void ClusterScheduler::turn_finished(int de, int64_t tokens, double hbm_bytes) {
  log(SchedulerEvent::Kind::kTurnFinished, de, tokens, hbm_bytes, true);
  De& e = des_[static_cast<size_t>(de)];
  e.load.free_hbm_bytes += hbm_bytes;
  de_blocked_[static_cast<size_t>(e.group)] = 0;
  e.load.tok -= tokens;
  e.load.seq -= 1;
}

void ClusterScheduler::reserve_hbm(int de, double bytes) {
  log(SchedulerEvent::Kind::kReserveHbm, de, 0, bytes, true);
  des_[static_cast<size_t>(de)].load.free_hbm_bytes -= bytes;
}

void ClusterScheduler::set_reported_read_queue(int node, int64_t tokens) {
  log(SchedulerEvent::Kind::kReportedReadQueue, node, tokens, 0, true);
  reported_[static_cast<size_t>(node)] = tokens;
}

void ClusterScheduler::set_node_alive(int node, bool alive) {
  log(SchedulerEvent::Kind::kNodeAlive, node, 0, 0, alive);
  alive_[static_cast<size_t>(node)] = alive;
  std::fill(de_blocked_.begin(), de_blocked_.end(), 0);
  if (alive) return;
  // A DE group with no live node left: its private queue goes back to the global one, in order
  // and ahead of the requests that came later.
  for (size_t gi = 0; gi < de_groups_.size(); ++gi) {
    if (de_private_[gi].empty() || de_group_alive(gi)) continue;
    auto& pending = de_private_pending_[gi];
    for (auto p = pending.rbegin(); p != pending.rend(); ++p) de_queue_.push_front(std::move(*p));
    pending.clear();
    de_private_[gi].clear();
    de_private_tokens_[gi] = 0;
  }
}

bool ClusterScheduler::de_group_alive(size_t group) const {
  const Group& grp = de_groups_[group];
  for (int i = 0; i < grp.count; ++i)
    if (alive_[static_cast<size_t>(de_node_of(grp.first + i))]) return true;
  return false;
}

double ClusterScheduler::outstanding_pe_work() const {
  double w = assigned_pe_work();
  for (const Pending& p : pe_queue_) w += p.request.pe_work();
  return w;
}

double ClusterScheduler::assigned_pe_work() const {
  double w = 0;
  for (const Pe& e : pes_) w += e.load.work;
  return w;
}

size_t ClusterScheduler::waiting_for_de() const { return queued() - pe_queue_.size(); }

int ClusterScheduler::live_pe_engines() const {
  int n = 0;
  for (const Pe& e : pes_) n += alive_[static_cast<size_t>(e.node)] ? 1 : 0;
  return n;
}

double ClusterScheduler::de_hbm_used_fraction() const {
  double budget = 0, free = 0;
  for (const De& e : des_) {
    if (!alive_[static_cast<size_t>(e.node)]) continue;
    budget += e.hbm_budget;
    free += std::max(0.0, e.load.free_hbm_bytes);
  }
  return budget > 0 ? std::clamp(1.0 - free / budget, 0.0, 1.0) : 0.0;
}

namespace {
bool same(const Placement& a, const Placement& b) {
  return a.request_id == b.request_id && a.pe == b.pe && a.de == b.de && a.path == b.path &&
         a.read_tokens == b.read_tokens && a.pe_read_tokens == b.pe_read_tokens &&
         a.de_read_tokens == b.de_read_tokens;
}
bool same(const FetchResult& a, const FetchResult& b) {
  if (a.pe_assigned.size() != b.pe_assigned.size() || a.placed.size() != b.placed.size())
    return false;
  for (size_t i = 0; i < a.pe_assigned.size(); ++i) {
    if (a.pe_assigned[i].request_id != b.pe_assigned[i].request_id ||
        a.pe_assigned[i].pe != b.pe_assigned[i].pe)
      return false;
  }
  for (size_t i = 0; i < a.placed.size(); ++i) {
    if (!same(a.placed[i], b.placed[i])) return false;
  }
  return true;
}
}  // namespace

int replay_log(const std::vector<SchedulerEvent>& events, ClusterScheduler& s) {
  int differ = 0;
  for (const SchedulerEvent& e : events) {
    using K = SchedulerEvent::Kind;
    switch (e.kind) {
      case K::kSubmit: {
        auto p = s.submit(e.request);
        if (p.has_value() != e.submitted.has_value() || (p && !same(*p, *e.submitted))) ++differ;
        break;
      }
      case K::kFetch:
        if (!same(s.fetch(), e.fetched)) ++differ;
        break;
      case K::kReadFinished:
        s.read_finished(e.index, e.tokens);
        break;
      case K::kPrefillFinished:
        s.prefill_finished(e.index, e.tokens, e.bytes);
        break;
      case K::kTurnFinished:
        s.turn_finished(e.index, e.tokens, e.bytes);
        break;
      case K::kReserveHbm:
        s.reserve_hbm(e.index, e.bytes);
        break;
      case K::kReportedReadQueue:
        s.set_reported_read_queue(e.index, e.tokens);
        break;
      case K::kNodeAlive:
        s.set_node_alive(e.index, e.alive);
        break;
    }
  }
  return differ;
}

bool ClusterScheduler::cancel_queued(int64_t request_id) {
  auto drop = [&](std::deque<Pending>& q) {
    for (auto it = q.begin(); it != q.end(); ++it) {
      if (it->request.id == request_id) {
        q.erase(it);
        return true;
      }
    }
    return false;
  };
  if (drop(pe_queue_)) return true;
  if (drop(de_queue_)) return true;
  for (size_t gi = 0; gi < de_private_.size(); ++gi) {
    auto& pending = de_private_pending_[gi];
    for (size_t i = 0; i < pending.size(); ++i) {
      if (pending[i].request.id != request_id) continue;
      de_private_tokens_[gi] -= de_private_[gi][i].tokens;
      de_blocked_[gi] = 0;
      pending.erase(pending.begin() + static_cast<std::ptrdiff_t>(i));
      de_private_[gi].erase(de_private_[gi].begin() + static_cast<std::ptrdiff_t>(i));
      return true;
    }
  }
  return false;
}

int ClusterScheduler::queued_pe(int64_t request_id) const {
  for (const Pending& p : de_queue_)
    if (p.request.id == request_id) return p.pe;
  for (const auto& pending : de_private_pending_)
    for (const Pending& p : pending)
      if (p.request.id == request_id) return p.pe;
  return -1;
}

}  // namespace dualpath::sched
