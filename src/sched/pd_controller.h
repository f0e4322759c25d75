#pragma once
// Adaptive P/D (PAPER.md §11 item 2: "adjusting the P/D ratio ... during a run"; the authors
// leave it as future work). A cluster of N nodes runs one of several layouts, each a static
// split of the N nodes into prefill and decode EP groups; a node changes role once its work has
// drained, and pays a stated cost for it (sim/: the engine restart, and a weight reload when
// its EP size changes). This file is the pure half: the layouts, the pressure a decision reads
// from the central scheduler, and the decision. No clock, no I/O, deterministic: the simulator
// calls it, and the live service can call it with the same scheduler state.

#include <cstdint>
#include <vector>

namespace dualpath::sched {

class ClusterScheduler;

// An EP group of a layout: physical nodes [first_node, first_node + nodes) in one role.
struct PdGroup {
  bool prefill = true;
  int first_node = 0;
  int nodes = 1;
  bool operator==(const PdGroup&) const = default;
};

// A static split: nodes 0..P-1 prefill in groups of pe_ep_nodes, P..N-1 decode in groups of
// de_ep_nodes, the last group of each role smaller where the count does not divide (as
// ClusterShape groups them).
struct PdLayout {
  int prefill_nodes = 0;
  int decode_nodes = 0;
  std::vector<PdGroup> groups;
};
PdLayout static_pd_layout(int nodes, int prefill_nodes, int pe_ep_nodes, int de_ep_nodes);

// What the scheduler sees now.
struct PdPressure {
  // Prefill work not finished (queued or assigned; GPU seconds) per live PE engine: how long
  // the prefill side needs to clear what it already has.
  double prefill_backlog_s = 0;
  // Of it, the work already assigned to PEs (those requests hold their DE too: a DE group that
  // leaves waits for them, so this is the least a change toward prefill takes to drain).
  double committed_backlog_s = 0;
  // Requests that have a PE and wait for DE HBM: the decode side is full.
  int64_t decode_waiting = 0;
  // The reserved share of the live DE engines' KV budget.
  double decode_hbm_used = 0;
};
PdPressure pd_pressure(const ClusterScheduler& scheduler);

struct PdControllerParams {
  double interval_s = 10;       // how often the controller decides (simulated seconds)
  double prefill_high_s = 30;   // a backlog above this asks for one more prefill group...
  double decode_room = 0.5;     // ...while nothing waits for a DE and DE HBM use is below this
  // Requests waiting for a DE, with a backlog below this, ask for a decode group back. It is as
  // high as prefill_high_s by default: the prefill groups that stay keep busy on the backlog
  // while the leaving one drains and restarts (about switch_s), and the two conditions cannot
  // hold at once (one needs DE waiters, the other none), so equal marks do not flap. A sweep of
  // 5, 15, 30 and 60 s is in docs/sched.md.
  double prefill_low_s = 30;
  double hold_s = 60;           // no change sooner than this after the last one ended
};

// The layout to move to: `current` (stay), current + 1 (the next layout with more prefill) or
// current - 1 (more decode). Layouts are indexed by prefill nodes ascending, `layouts` of them.
// `since_change_s`: time since the last change ended (or since the start); `switch_s`: what a
// node's restart in its new role costs (the caller's estimate).
//
// More prefill: the backlog is above prefill_high_s, decode has room, and the part of the
// backlog not yet assigned is more than twice the change's own time (the committed backlog the
// leaving decode group must wait for, plus switch_s); a change that cannot finish well before
// the backlog clears only idles the nodes it moves. More decode: requests wait for a DE and the
// backlog is below prefill_low_s.
int decide_pd(const PdControllerParams& params, const PdPressure& pressure, int current,
              int layouts, double since_change_s, double switch_s);

}  // namespace dualpath::sched
