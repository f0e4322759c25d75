#pragma once
// ClusterScheduler: the stateful central scheduler of PAPER.md §8, shared by the simulator
// (sim/cluster_sim.cc drives it with simulated events) and the live scheduler service
// (serve/, driven by the nodes' load reports). Pure: no I/O, no clock, deterministic; the caller
// decides when a fetch happens (every fetch interval) and tells it when work finishes.
//
// It owns what the policies of sched/ need between decisions:
//   - the global PE queue, and the DE global queue and per-group private queues (two phases);
//   - every engine's load: PE tok/seq (prompt tokens of unfinished prefills), DE tok/seq
//     (prompt + generation of unfinished turns) and free HBM;
//   - the read-queue ledger: per node, the hit tokens of placed requests whose storage read has
//     not finished, next to the node's own reported gauge (live); the larger one counts;
//   - which nodes are alive.
// and answers, per request, {PE engine, DE engine, read path}.
//
// Engines and nodes are numbered globally: prefill nodes 0..P-1, decode nodes P..P+D-1; PE
// engine e is engine e % g_pe of prefill node e / g_pe, DE engine d engine d % g_de of decode
// node P + d / g_de. An engine group (PAPER.md §8: the engines that fetch together, one EP group)
// is `pe_ep_nodes` (`de_ep_nodes`) consecutive nodes; the last may be smaller.
//
// Thread-compatible: one thread at a time (the service holds a mutex around it).

#include <cstdint>
#include <deque>
#include <optional>
#include <vector>

#include "sched/de_scheduler.h"
#include "sched/path_choice.h"
#include "sched/pe_scheduler.h"
#include "sched/read_path.h"
#include "sched/scheduler_types.h"

namespace dualpath::sched {

struct ClusterShape {
  int prefill_nodes = 1;
  int decode_nodes = 1;
  int pe_engines_per_node = 1;
  int de_engines_per_node = 1;
  int pe_ep_nodes = 1;  // nodes per PE group
  int de_ep_nodes = 1;  // nodes per DE group
  // Explicit group sizes in nodes, consecutive from the first node of the role (they must add
  // up to prefill_nodes / decode_nodes); empty (or not adding up): groups of pe_ep_nodes /
  // de_ep_nodes (ep_group_sizes). Groups of different sizes are the adaptive P/D layouts'
  // (sim/, sched/pd_controller.h).
  std::vector<int> pe_group_nodes{}, de_group_nodes{};
};

// The EP groups of `nodes` nodes of one role, as node counts: consecutive groups of
// `nodes_per_group`, the last one smaller where that does not divide `nodes` (clamped to at least
// one node per group). ClusterShape's default groups, a static P/D layout's (pd_controller.h) and
// the simulator's check that every group holds the weights all take their groups from here.
std::vector<int> ep_group_sizes(int nodes, int nodes_per_group);

// How engines are chosen: the paper's scheduler (Algorithm 1 for PEs at each fetch, the DE
// two-phase scheduler with HBM reservation), or round robin at submission (the baselines; HBM
// is then reserved by the caller, in its own order).
enum class EnginePolicy { kRoundRobin, kPaper };

struct ClusterSchedulerParams {
  EnginePolicy engines = EnginePolicy::kPaper;
  PathPolicy paths = PathPolicy::kShortestQueue;
  PeParams pe;
  DeParams de;
  double de_hbm_bytes = 0;  // KV budget of one DE engine's HBM
  // Per DE group (its EP size sets the HBM left for KV); empty: de_hbm_bytes for every group.
  std::vector<double> de_group_hbm_bytes{};
  // Split reads (PathPolicy::kSplit, or a request's forced kSplit path): blocks are this many
  // tokens, and a part below split_min_tokens is not split off (split_read). A forced split
  // splits any hit of two blocks or more.
  int64_t block_tokens = 64;
  int64_t split_min_tokens = 1024;
  // Read or recompute (issue 35): a request whose path is the policy's, with nothing in a DE's
  // DRAM, is recomputed instead of read when choose_recompute says so: its
  // SchedRequest::recompute_extra_s plus the prefill work queued ahead on its PE (PeEngineLoad::
  // work; the cost model's seconds) below the estimated read time on the chosen side: (that
  // node's read queue + the hit) / read_tokens_per_s (a split: both queues over both NICs). Off
  // by default (the paper reads every hit).
  bool recompute_auto = false;
  double read_tokens_per_s = 0;  // one node's usable storage read rate, in tokens of KV
  // Recompute only when the read takes this many times longer than the recompute would
  // (extra work + PE wait): the cost model's prefill price leaves out per-pass costs and the delay
  // the extra work causes the requests queued behind it.
  double recompute_margin = 2.0;
};

// A request to place. Its tokens: prompt (PE load, len_r), prompt + generation (DE load).
struct SchedRequest {
  int64_t id = 0;
  int64_t prompt_tokens = 0;
  int64_t gen_tokens = 0;
  int64_t hit_tokens = 0;    // what its read path reads (the ledger's unit)
  double hbm_need_bytes = 0;  // DE HBM at decode start
  PathRequest path;           // a fixed path, or nullopt: the policy's choice
  // Its prefill work in GPU seconds, estimated by the caller's cost model (PePolicy::kTail ranks
  // engines by it); 0: its prompt tokens stand in.
  double pe_work_s = 0;
  // The DE DRAM tier (issue 35): the decode node whose DRAM holds this session's KV (-1: none)
  // and how many of the hit's leading tokens it holds. Placed on that node, those tokens are
  // pushed to the PE from its DRAM and only the rest is read from storage.
  int dram_node = -1;
  int64_t dram_tokens = 0;
  // The GPU seconds that computing the hit instead of loading it adds to the prefill (the
  // caller's cost model; 0: never recompute). recompute_auto's input.
  double recompute_extra_s = 0;
  double pe_work() const { return pe_work_s > 0 ? pe_work_s : static_cast<double>(prompt_tokens); }
};

struct PePlacement {
  int64_t request_id = 0;
  int pe = 0;  // global PE engine
};

struct Placement {
  int64_t request_id = 0;
  int pe = 0;  // global PE engine
  int de = 0;  // global DE engine
  ReadPath path = ReadPath::kPe;
  int64_t read_tokens = 0;  // hit tokens read from storage (0 for recompute, oracle)
  // Of them, the leading pe_read_tokens by the PE node and the rest by the DE node (kPe: all on
  // the PE side, kDe: all on the DE side, kSplit: both). Each side's part is added to that node's
  // ledger until read_finished(node, part).
  int64_t pe_read_tokens = 0;
  int64_t de_read_tokens = 0;
  // The hit's leading tokens the DE pushes from its node's DRAM (the DE DRAM tier; no storage
  // read); the reads above cover the hit after them. With them the path is kDe (or kSplit).
  int64_t dram_tokens = 0;
};

struct FetchResult {
  std::vector<PePlacement> pe_assigned;  // PE chosen this fetch (DE maybe later)
  std::vector<Placement> placed;         // fully placed this fetch, in order
};

// One call into a ClusterScheduler and what it answered: a recorded sequence replays through
// another scheduler (another call site: the simulator's, the service's) to check that both
// decide alike (replay_log).
struct SchedulerEvent {
  enum class Kind {
    kSubmit,
    kFetch,
    kReadFinished,
    kPrefillFinished,
    kTurnFinished,
    kReserveHbm,
    kReportedReadQueue,
    kNodeAlive,
  };
  Kind kind = Kind::kSubmit;
  SchedRequest request;          // kSubmit
  int index = 0;                 // the node or engine of the other kinds
  int64_t tokens = 0;
  double bytes = 0;
  bool alive = true;
  std::optional<Placement> submitted;  // kSubmit's answer
  FetchResult fetched;                 // kFetch's answer
};

// Replays `log` into `scheduler` and returns how many answers differ from the recorded ones
// (0: the same decisions).
class ClusterScheduler;
int replay_log(const std::vector<SchedulerEvent>& log, ClusterScheduler& scheduler);

class ClusterScheduler {
 public:
  ClusterScheduler(const ClusterShape& shape, const ClusterSchedulerParams& params);

  const ClusterShape& shape() const { return shape_; }
  const ClusterSchedulerParams& params() const { return params_; }
  int pe_engines() const { return static_cast<int>(pes_.size()); }
  int de_engines() const { return static_cast<int>(des_.size()); }
  int nodes() const { return shape_.prefill_nodes + shape_.decode_nodes; }
  int pe_node_of(int pe) const { return pes_[static_cast<size_t>(pe)].node; }
  int de_node_of(int de) const { return des_[static_cast<size_t>(de)].node; }
  // The engine's index within its node.
  int pe_local(int pe) const { return pe % shape_.pe_engines_per_node; }
  int de_local(int de) const { return de % shape_.de_engines_per_node; }
  int pe_group_of(int pe) const { return pes_[static_cast<size_t>(pe)].group; }
  // The DE group of a decode node (global node number).
  int de_group_of_node(int node) const {
    return des_[static_cast<size_t>((node - shape_.prefill_nodes) * shape_.de_engines_per_node)].group;
  }
  int pe_groups() const { return static_cast<int>(pe_groups_.size()); }
  // The first PE engine of a group and how many it has.
  int pe_group_first(int group) const { return pe_groups_[static_cast<size_t>(group)].first; }
  int pe_group_size(int group) const { return pe_groups_[static_cast<size_t>(group)].count; }

  // kPaper: the request joins the global PE queue; a later fetch() places it (nullopt).
  // kRoundRobin: placed at once, engines in turn (skipping dead nodes) and the path by the
  // policy; nullopt only when no live engine is left on either side.
  std::optional<Placement> submit(const SchedRequest& request);
  // One fetch of every group (PAPER.md §8, pull-based; the caller calls it every fetch
  // interval): the PE groups take turns, one request each, starting at a rotating group, by
  // Algorithm 1 on the loads and read queues as they stand; then DE phase 1 drains the global
  // DE queue to the least loaded groups and phase 2 assigns within each group by HBM and Z,
  // reserving the HBM; each DE assignment completes a placement, whose read path is chosen
  // then, on the read queues as they stand after the placements before it.
  FetchResult fetch();
  // Requests waiting for a PE or a DE.
  bool has_queued() const;
  size_t queued() const;

  // The ledger, as work finishes (the caller's events).
  void read_finished(int node, int64_t tokens);
  // `work` is the request's SchedRequest::pe_work().
  void prefill_finished(int pe, int64_t prompt_tokens, double work);
  // A turn is over on its DE: its tokens leave the DE's load and `hbm_bytes` its reservation.
  void turn_finished(int de, int64_t tokens, double hbm_bytes);
  // Round-robin modes: the caller reserves DE HBM in its own order.
  double hbm_free(int de) const { return des_[static_cast<size_t>(de)].load.free_hbm_bytes; }
  void reserve_hbm(int de, double bytes);

  // Live: a node's own read-queue gauge from its load report (tokens waiting or in flight).
  void set_reported_read_queue(int node, int64_t tokens);
  // The read queue a decision sees: the larger of the ledger and the report.
  int64_t read_queue(int node) const;
  // Live: a dead node's engines get no new work (a re-registered one gets work again). A DE
  // group left with no live node gives its private queue back to the global DE queue, so that
  // its waiting requests go to another group (or wait for one to come back).
  void set_node_alive(int node, bool alive);
  bool node_alive(int node) const { return alive_[static_cast<size_t>(node)]; }
  // Removes a request still queued (PE or DE side); false when it is not queued. A request
  // already assigned to a PE keeps that engine's load until prefill_finished().
  bool cancel_queued(int64_t request_id);
  // The PE engine a queued request was assigned to, or -1 when none yet.
  int queued_pe(int64_t request_id) const;

  // Pressure, for the P/D controller (pd_controller.h): the prefill work (SchedRequest::pe_work)
  // not finished yet, queued or assigned to any PE; the requests with a PE that wait for a DE
  // (DE HBM); and the live PE engines.
  double outstanding_pe_work() const;
  // Of it, the work already assigned to PE engines (committed: those requests also hold a DE).
  double assigned_pe_work() const;
  size_t waiting_for_de() const;
  int live_pe_engines() const;
  // The share of the live DE engines' KV budget that is reserved, in [0, 1].
  double de_hbm_used_fraction() const;

  // Records every call and answer into `log` (nullptr: none). The log must outlive the calls.
  void record_to(std::vector<SchedulerEvent>* log) { log_ = log; }

  // Loads, for reports and tests.
  const PeEngineLoad& pe_load(int pe) const { return pes_[static_cast<size_t>(pe)].load; }
  const DeEngineLoad& de_load(int de) const { return des_[static_cast<size_t>(de)].load; }

 private:
  struct Pe {
    int node = 0, group = 0;
    PeEngineLoad load;
  };
  struct De {
    int node = 0, group = 0;
    DeEngineLoad load;
    double hbm_budget = 0;
  };
  struct Group {
    int first = 0, count = 0;
  };
  struct Pending {
    SchedRequest request;
    int pe = -1;
  };

  std::optional<Placement> submit_unlogged(const SchedRequest& request);
  bool de_group_alive(size_t group) const;  // some node of the DE group is alive
  FetchResult fetch_unlogged();
  void log(SchedulerEvent::Kind kind, int index, int64_t tokens, double bytes, bool alive);
  Placement complete(const Pending& p, int de);
  ReadPath choose_path(const SchedRequest& r, int pe, int de);

  ClusterShape shape_;
  ClusterSchedulerParams params_;
  std::vector<Pe> pes_;
  std::vector<De> des_;
  std::vector<Group> pe_groups_, de_groups_;
  std::vector<int64_t> ledger_, reported_;
  std::vector<bool> alive_;
  std::deque<Pending> pe_queue_;  // the global FIFO
  std::deque<Pending> de_queue_;  // DE phase 1 (PE assigned)
  std::vector<std::deque<RequestInfo>> de_private_;  // DE phase 2, per group
  // The private queues' requests themselves, in the same order as de_private_ (schedule_de takes
  // from the front, so its assignments are these deques' first entries), and each queue's tokens.
  std::vector<std::deque<Pending>> de_private_pending_;
  std::vector<int64_t> de_private_tokens_;
  // A private queue whose head no live engine of its group had HBM for at the last fetch: it
  // stays blocked (schedule_de would place nothing) until HBM frees in the group, a node comes
  // or goes, or its head is cancelled. Saves re-running the group's phase 2 on every fetch.
  std::vector<uint8_t> de_blocked_;
  // Reused by every fetch so that a fetch allocates nothing but its result (the simulator fetches
  // hundreds of thousands of times a run).
  struct Scratch {
    std::vector<int64_t> read_q, sums;
    std::vector<PeEngineLoad> pe_loads;  // every PE engine, grouped as pe_groups_
    std::vector<uint8_t> full;
    std::vector<DeEngineLoad> de_loads;
    std::vector<int> de_index;
    std::vector<int> de_nodes;
  } scratch_;
  RoundRobin rr_pe_, rr_de_, rr_path_;
  uint32_t rotation_ = 0;
  std::vector<SchedulerEvent>* log_ = nullptr;
};

}  // namespace dualpath::sched
