#include "sim/cluster_sim.h"

#include <fmt/format.h>
#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <new>
#include <deque>
#include <limits>
#include <numeric>
#include <span>
#include <string_view>
#include <system_error>
#include <thread>
#include <type_traits>
#include <unordered_map>

#include "common/percentiles.h"
#include "sched/batcher.h"
#include "sched/cluster_scheduler.h"
#include "sim/event_queue.h"
#include "sim/ps_server.h"
#include "sim/stop_rule.h"

namespace dualpath::sim {
namespace {

using sched::ReadPath;

enum Kind : uint32_t {
  kArrive,       // a = agent: its next turn is sent
  kTick,         // the scheduler's periodic fetch (full, oracle)
  kReadDone,     // a = node, b = server version
  kWriteDone,    // a = node, b = server version
  kPassDone,     // a = PE group
  kDecodeStart,  // a = agent: the KV is in DE HBM
  kDecodeDone,   // a = DE engine, b = server version
  kCheck,        // online: the stop rule and the working-set sample
  kPdCheck,      // adaptive P/D: the controller decides
  kActivate,     // a = virtual group: its engines run in their new role
  kPrefetchDone, // a = node, b = server version
  kPrefetchDue,  // a = agent: a predicted prefetch is due
};

constexpr uint32_t kNone = std::numeric_limits<uint32_t>::max();

// A turn's cached prefix is its context (earlier turns stored it); sched::plan_hit_tokens keeps
// its whole blocks (the live service's rule too).
int64_t hit_tokens(const workload::TurnShape& t, int64_t block) {
  return sched::plan_hit_tokens(t.context_tokens, t.prompt_tokens, block);
}

// One turn in flight; one per agent, since an agent waits for its turn to finish.
struct Req {
  // The agent's plan as its turns read it (AgentPlan lives apart; reading it cost a cache miss
  // per event): its turns, its think times, whether it is a content-addressed request, and the
  // KV it has stored so far (its context).
  const workload::TurnShape* turns = nullptr;
  const double* think_s = nullptr;
  uint32_t nturns = 0, nthink = 0;
  bool addressed = false;
  int64_t kv_tokens = 0;
  int turn = -1;
  int64_t prompt = 0, hit = 0, gen = 0;
  int64_t new_left = 0;  // miss tokens not yet prefilled
  int64_t cached = 0;    // tokens whose KV is available to the PE (hit + done chunks)
  double hbm_need = 0;
  // The hit as the scheduler split it between the sides (sched::Placement): the PE node reads
  // pe_hit tokens into its buffer, the DE node de_hit into its own; reads_left parts unfinished.
  int64_t pe_hit = 0, de_hit = 0;
  // The DE DRAM tier's part of the hit (pushed from the DE node's DRAM, no storage read), and a
  // hit the scheduler chose to recompute (hit is then 0; the store still holds these tokens).
  int64_t dram_hit = 0, recomputed_hit = 0;
  double pe_work = 0;  // what the scheduler counted into its PE's load (SchedRequest::pe_work)
  int reads_left = 0;
  uint32_t pe = kNone, de = kNone;
  ReadPath path = ReadPath::kPe;
  bool read_done = false, streamed_hit = false, hbm_reserved = false, prefilled = false;
  // t_pe: the PE is assigned; t_assigned: the DE too (its HBM reserved in scheduled modes);
  // t_admitted: the DRAM buffer took the read; t_read_start: the SNIC started serving it (a split
  // read: its later part's).
  // t_pass: its first forward pass starts (-1 until then).
  double t_arrive = 0, t_pe = 0, t_assigned = 0, t_admitted = 0, t_read_start = 0,
         t_read_done = 0, t_pass = -1, t_first = 0, t_decode = 0;
};

// One request's first token: its TTFT and the parts of it (TtftBreakdown), at time t.
struct FirstToken {
  double t;
  float ttft, scheduler_queue, read_queue, engine_queue, hbm_wait, buffer_wait, read, prefill;
  bool hit;  // the turn had a cached prefix (read, from a DE's DRAM, or recomputed)
};

// A latency sample at time t (TTST at the second token, TPOT at the turn's end).
struct Sample {
  double t;
  float v;
};

// An allocator whose large blocks ask the kernel for transparent huge pages: an offline run's
// logs hold hundreds of megabytes, and faulting them in 4 KiB pages took seconds of system time
// here (a page fault costs ~10 us in this VM; one 2 MiB page replaces 512 of them).
template <typename T>
struct HugePageAllocator {
  using value_type = T;
  static constexpr size_t kHuge = size_t{2} << 20;
  HugePageAllocator() = default;
  template <typename U>
  explicit HugePageAllocator(const HugePageAllocator<U>&) {}
  T* allocate(size_t n) {
    const size_t bytes = n * sizeof(T);
    if (bytes < kHuge) return static_cast<T*>(::operator new(bytes));
    const size_t rounded = (bytes + kHuge - 1) / kHuge * kHuge;
    void* p = std::aligned_alloc(kHuge, rounded);
    if (p == nullptr) throw std::bad_alloc();
    (void)madvise(p, rounded, MADV_HUGEPAGE);  // advice only: without it, small pages
    return static_cast<T*>(p);
  }
  void deallocate(T* p, size_t n) {
    if (n * sizeof(T) < kHuge) {
      ::operator delete(p);
    } else {
      std::free(p);
    }
  }
  template <typename U>
  bool operator==(const HugePageAllocator<U>&) const { return true; }
};

// Faults in the pages of `ranges` (each from a HugePageAllocator: 2 MiB aligned) on a thread of
// its own, from the front of all of them at once, ahead of the simulation (which fills them at
// about the same pace, one entry per turn; the thread is far faster). An offline run at
// 48P96D reserves ~750 MB of logs, and the kernel zeroing their pages as the simulation first
// wrote them was 7 % of its time (perf: clear_page_erms under the log's push_back). The kernel
// populates the page tables (MADV_POPULATE_WRITE, Linux 5.14); the memory is not written from
// here, so the simulation thread may write to a page at any time. Without kernel support (or on
// an error) it stops and the simulation faults the rest in itself, as before.
std::jthread prefault(std::vector<std::span<std::byte>> ranges) {
  constexpr size_t kHuge = size_t{2} << 20;
  std::erase_if(ranges, [&](std::span<std::byte> r) { return r.size() < kHuge; });
  if (ranges.empty()) return {};
  try {
    return std::jthread([ranges = std::move(ranges)](std::stop_token stop) {
      constexpr size_t kSteps = 64;
      for (size_t step = 0; step < kSteps; ++step) {
        for (std::span<std::byte> r : ranges) {
          if (stop.stop_requested()) return;
          const size_t pages = (r.size() + kHuge - 1) / kHuge;
          const size_t from = pages * step / kSteps * kHuge;
          const size_t to = std::min(r.size(), pages * (step + 1) / kSteps * kHuge);
          if (to <= from) continue;
#ifdef MADV_POPULATE_WRITE
          if (madvise(r.data() + from, to - from, MADV_POPULATE_WRITE) != 0) return;
#else
          return;
#endif
        }
      }
    });
  } catch (const std::system_error&) {
    return {};  // no thread: the simulation faults its pages in itself
  }
}

// A log of samples in time order that an online run trims from the front: a vector and the
// index of its first live entry, compacted once half of it is dead. (A deque allocated a block
// per dozen samples: millions of allocations a run.)
template <typename T>
class SampleLog {
 public:
  void reserve(size_t n) { v_.reserve(n); }
  void push_back(const T& x) { v_.push_back(x); }
  bool empty() const { return head_ == v_.size(); }
  size_t size() const { return v_.size() - head_; }
  const T& front() const { return v_[head_]; }
  const T& back() const { return v_.back(); }
  void pop_front() {
    if (++head_ < 4096 || 2 * head_ < v_.size()) return;
    v_.erase(v_.begin(), v_.begin() + static_cast<std::ptrdiff_t>(head_));
    head_ = 0;
  }
  const T* begin() const { return v_.data() + head_; }
  const T* end() const { return v_.data() + v_.size(); }
  // The memory reserved for entries (for prefaulting it).
  std::span<std::byte> reserved() {
    return {reinterpret_cast<std::byte*>(v_.data()), v_.capacity() * sizeof(T)};
  }

 private:
  std::vector<T, HugePageAllocator<T>> v_;
  size_t head_ = 0;
};

struct Node {
  bool prefill = true;
  PsServer reads;
  PsServer writes;
  PsServer prefetch{1};  // the DRAM tier's prefetches: one at a time, while no demand read runs
  double buffer_cap = 0, buffer_used = 0;
  std::deque<uint32_t> buffer_wait;  // agents whose read waits for buffer space
  std::vector<double> read_bytes_by_bucket;
  explicit Node(size_t qd) : reads(qd) {}
};

struct PeEngine {
  uint32_t node = 0, group = 0;
  // Assigned agents whose prefill has not finished, with what a pass needs of each (mirrors of
  // their Req's read_done, cached and new_left): a pass looks at every queued request, and
  // reading them from the agents' Req cost a cache miss each.
  struct Queued {
    uint32_t agent;
    bool ready;  // its KV is in place (Req::read_done)
    int64_t cached, new_left;
  };
  std::vector<Queued> fifo;
  Queued& find(uint32_t a) {
    return *std::find_if(fifo.begin(), fifo.end(), [a](const Queued& q) { return q.agent == a; });
  }
};

struct PassItem {
  uint32_t agent;
  int64_t new_tokens;
};

struct PeGroup {
  uint32_t first = 0, count = 0;
  bool busy = false;
  double busy_s = 0;
  std::vector<std::vector<PassItem>> batches;  // per engine of the group
};

struct DeEngine {
  int ep_gpus = 1;         // of its EP group (the weights' spread: decode step time, HBM)
  double hbm_budget = 0;   // its KV budget
  uint32_t node = 0, group = 0;
  PsServer decode;
  double ctx_sum = 0;
  std::deque<uint32_t> reserve_wait;  // round-robin modes: waiting for HBM
  double cnic_free_at = 0;            // the DE CNIC's write side, FIFO for whole-KV copies
};

class ClusterSim {
 public:
  ClusterSim(const SimConfig& cfg, const std::vector<AgentPlan>& agents, const SimOptions& opt)
      : cfg_(cfg),
        agents_(agents),
        opt_(opt),
        cost_(cfg.model, cfg.hw, cfg.eff),
        stop_rule_(cfg.online) {}

  Result<SimResult> run();

 private:
  bool layerwise() const { return cfg_.scheduler.mode != Mode::kBasic; }
  bool dual() const { return reads_on_both_sides(cfg_.scheduler.mode); }
  bool scheduled() const { return uses_paper_scheduler(cfg_.scheduler.mode); }
  bool oracle() const { return cfg_.scheduler.mode == Mode::kOracle; }
  uint32_t pe_node_of(uint32_t pe) const { return pes_[pe].node; }
  uint32_t de_node_of(uint32_t de) const { return des_[de].node; }
  double kv_bytes(int64_t tokens) const {
    return static_cast<double>(tokens) * static_cast<double>(cfg_.model.stored_bytes_per_token());
  }
  double snic_rate() const { return model::usable_snic_bytes_per_s(cfg_.hw, cfg_.eff); }
  // A request's KV sizes, from its token counts (kept out of Req, which every event reads).
  double hit_bytes(const Req& r) const { return kv_bytes(r.hit); }
  double prompt_bytes(const Req& r) const { return kv_bytes(r.prompt); }
  double pe_hit_bytes(const Req& r) const { return kv_bytes(r.pe_hit); }
  double de_hit_bytes(const Req& r) const { return kv_bytes(r.de_hit); }

  void build();
  void prefetch_req(uint32_t a) const {
    const char* p = reinterpret_cast<const char*>(&reqs_[a]);
    for (size_t off = 0; off < sizeof(Req); off += 64) __builtin_prefetch(p + off);
  }
  void prefetch_for(const Event& e) const {
    switch (e.kind) {
      case kArrive:
        prefetch_req(e.a);
        __builtin_prefetch(&requests_[e.a], 1);
        break;
      case kDecodeStart:
        prefetch_req(e.a);
        break;
      case kReadDone:
      case kWriteDone:
        __builtin_prefetch(&nodes_[e.a]);
        break;
      case kDecodeDone:
        __builtin_prefetch(&des_[e.a]);
        break;
      default:
        break;
    }
  }
  double chain_floor() const;
  void on_arrive(uint32_t a);
  void ensure_tick();
  void on_tick();
  void assign_pe(uint32_t a, uint32_t pe);
  void reserve_round_robin(uint32_t a, uint32_t de);
  void after_assigned(uint32_t a, const sched::Placement& p);
  void start_read(uint32_t a, uint32_t node);
  // The part of a request's hit that `node` reads (its PE node or its DE node).
  bool reads_on_pe(const Req& r, uint32_t node) const { return node == pe_node_of(r.pe); }
  double read_bytes_on(const Req& r, uint32_t node) const {
    return reads_on_pe(r, node) ? pe_hit_bytes(r) : de_hit_bytes(r);
  }
  void admit_read(uint32_t a, uint32_t node);
  void admit_buffer_waiters(uint32_t node);
  void reschedule_link(PsServer& link, uint32_t kind, uint32_t node);
  void reschedule_reads(uint32_t node);
  void on_read_done(uint32_t node, uint64_t version);
  void read_finished(uint32_t a);
  void try_start_pass(uint32_t group);
  void on_pass_done(uint32_t group);
  void prefill_finished(uint32_t a);
  void grant_reservations(uint32_t de);
  void begin_decode_copy(uint32_t a);
  void on_decode_start(uint32_t a);
  void reschedule_decode(uint32_t de);
  void on_decode_done(uint32_t de, uint64_t version);
  void finish_turn(uint32_t a);
  void write_bytes(uint32_t node, double bytes);
  void record_first_token(const Req& r);
  void on_check();
  void reschedule_writes(uint32_t node);
  void on_write_done(uint32_t node, uint64_t version);
  SimResult collect(double wall_s);
  void collect_latencies(SimResult& res) const;
  // Adaptive P/D.
  void build_layouts();
  void on_pd_check();
  void begin_transition(int to);
  void advance_transition();
  void kill_group(int g);
  bool drained(int g) const;
  void free_group(int g);
  void on_activate(int g);
  void record_pd_point();
  void count_open(uint32_t vnode, int delta) {
    vgroups_[static_cast<size_t>(vgroup_of_vnode_[vnode])].open += delta;
  }

  const SimConfig& cfg_;
  const std::vector<AgentPlan>& agents_;
  const SimOptions& opt_;
  model::CostModel cost_;

  EventQueue events_;
  double now_ = 0;
  std::vector<Node> nodes_;
  std::vector<PeEngine> pes_;
  std::vector<PeGroup> pe_groups_;
  std::vector<DeEngine> des_;
  std::vector<Req> reqs_;
  // What each agent's turn in flight gave the scheduler (sched::make_sched_request); read only
  // at submission and placement, so kept apart from reqs_.
  std::vector<sched::SchedRequest> requests_;
  std::vector<uint32_t> agent_group_of_pe_;  // pe -> group
  // The central scheduler's state and policies (engine loads, queues, read-queue ledger).
  std::unique_ptr<sched::ClusterScheduler> sched_;
  bool tick_pending_ = false;
  uint64_t last_tick_ = 0;
  sched::PeParams pe_params_;
  double de_hbm_budget_ = 0, pe_hbm_budget_ = 0;
  int de_ep_gpus_ = 1;

  // Metrics. Online, the logs keep only the last window (trimmed at each check).
  int64_t turns_total_ = 0, turns_done_ = 0;
  int agents_left_ = 0;
  SampleLog<FirstToken> first_tokens_;
  SampleLog<Sample> ttst_, tpot_;
  SampleLog<Sample> turn_time_;  // arrival to the end of the turn, at its end
  // Offline, faults the logs' reserved pages in on the other core, ahead of their use (declared
  // after them: it stops and is joined before they go).
  std::jthread prefault_;
  // When each agent's last turn ended; +inf while it runs (an online run stops with agents
  // still running, and the timeseries counts them).
  std::vector<double> agent_finish_;

  // Online (cfg_.online.enabled() or a timestamped trace).
  bool online_ = false, trace_ = false, stopped_ = false;
  bool slo_hit_only_ = false;      // cfg_.online.slo_turns == "hit"
  bool recompute_always_ = false;  // cfg_.recompute == "always"
  std::string stop_reason_;
  OnlineStopRule stop_rule_;
  struct Gauge {
    double t;
    double live_kv_tokens;
    int running;
  };
  std::vector<Gauge> gauges_;         // sampled at each check
  double live_kv_tokens_ = 0;
  int64_t agents_arrived_ = 0, agents_finished_ = 0;
  double finished_time_sum_ = 0, arrived_length_sum_ = 0;
  double arrived_turns_sum_ = 0, arrived_think_sum_ = 0;
  // Content-addressed traces: which blocks are stored.
  std::vector<bool> stored_block_;
  int64_t stored_blocks_ = 0;
  HopBytes hops_;
  double prompt_tokens_ = 0, hit_tokens_ = 0, storage_write_ = 0;
  int64_t pe_path_ = 0, de_path_ = 0, split_path_ = 0;
  double split_bytes_pe_ = 0, split_bytes_de_ = 0;  // of the split requests, per side
  double compute_floor_work_s_ = 0;
  int64_t passes_ = 0, transfer_bound_passes_ = 0;
  double pass_new_tokens_ = 0;
  // Per engine and pass with work: requests ready in its FIFO, requests batched, and whether the
  // compute quota (not the FIFO) ended the batch.
  int64_t engine_passes_ = 0, quota_bound_engine_passes_ = 0;
  double ready_requests_ = 0, batched_requests_ = 0;
  std::vector<double> prompt_by_bucket_;

  // The scheduler's nodes are virtual: one per physical node and EP group it can be in (every
  // group of every layout the run may use; a static run has one layout, so virtual = physical).
  // Only one virtual node of a physical node is alive at a time, and only once the one before
  // it has drained, so each keeps its own NIC and buffer models without double counting.
  struct VGroup {
    bool prefill = true;
    std::vector<uint32_t> phys;
    uint32_t first_vnode = 0, vnodes = 0;
    int ep_gpus = 0;
    uint32_t sim_group = 0;  // its index among pe_groups_ (prefill) or DE groups
    int open = 0;            // requests placed on it whose part on it has not finished
    bool alive = false;
    double alive_since = 0, alive_s = 0;
  };
  struct Transition {
    bool active = false;
    int to = -1, stage = 0, activated = 0;
    double started = 0;
    std::vector<int> leave_pe, leave_de, join, freed, scheduled;
  };
  int phys_nodes_ = 0;
  std::vector<VGroup> vgroups_;
  std::vector<std::vector<int>> layout_groups_;  // per layout (prefill nodes ascending)
  std::vector<int> layout_pe_gpus_;
  std::vector<uint32_t> phys_of_;     // virtual node -> physical node
  std::vector<int> vgroup_of_vnode_;  // virtual node -> its group
  std::vector<int> owner_;            // physical node -> the group it runs in, -1 switching
  std::vector<int> left_group_;       // physical node -> the group it last left
  std::vector<double> freed_at_;
  int layout_ = 0;
  Transition tr_;
  double last_change_ = -1;  // when the last change ended; -1: none yet
  std::vector<RoleChange> role_changes_, ep_regroups_;
  std::vector<PdPoint> pd_points_;
  // The DE DRAM tier (cfg_.de_dram_bytes > 0): per agent, the decode node whose DRAM holds its
  // session's KV, in a per-node list ordered by when it was stored (the head expires and is
  // evicted first: one TTL for all, so storage order is expiry order).
  struct TierEntry {
    uint32_t node = kNone;
    uint32_t prev = kNone, next = kNone;
    int64_t tokens = 0;
    double expire = 0;
    bool pinned = false;  // its session's turn is waiting for placement with it, or pulling it
    bool staging = false;     // a prefetch is reading it: not usable yet
    bool prefetched = false;  // it came by a prefetch (wasted if it leaves unused)
  };
  struct TierNode {
    uint32_t head = kNone, tail = kNone;
    double used = 0;
    double locked = 0;  // of it, entries pinned or staging (not evictable)
  };
  // Pins (a turn placed or waiting for placement with this copy) and stages (a prefetch reading
  // it) agent a's entry, keeping its node's locked bytes.
  void tier_set_lock(uint32_t a, bool pinned, bool staging) {
    TierEntry& e = tier_[a];
    const bool before = e.pinned || e.staging;
    e.pinned = pinned;
    e.staging = staging;
    const bool after = pinned || staging;
    if (before != after) tier_nodes_[e.node].locked += (after ? 1.0 : -1.0) * kv_bytes(e.tokens);
  }
  bool tier_on() const { return cfg_.de_dram_bytes > 0; }
  void tier_remove(uint32_t a);
  void tier_store(uint32_t a, uint32_t node, int64_t tokens);
  void tier_insert(uint32_t a, uint32_t node, int64_t tokens);
  void tier_account();  // integrates the tier's use up to now_
  // Prefetch (cfg_.prefetch): a session between turns lost its tier copy.
  bool prefetch_on() const { return prefetch_mode_ != 0; }
  void tier_lost(uint32_t a);
  void prefetch_start(uint32_t a);
  void reschedule_prefetch(uint32_t node);
  void on_prefetch_done(uint32_t node, uint64_t version);
  void on_prefetch_due(uint32_t a);
  int prefetch_mode_ = 0;  // 0 never, 1 always, 2 predict
  // Per agent, for prefetch and session-aware eviction (allocated for either): in a turn
  // (arrival to its end), its last turn's end, its think times so far (observed: arrival - last
  // turn's end), and all sessions' together.
  struct SessionClock {
    bool in_turn = false;
    double last_end = 0, think_sum = 0;
    uint32_t thinks = 0;
  };
  std::vector<SessionClock> clocks_;
  // A session's mean think time so far; all sessions' before its first; `none` before any.
  double expected_think(uint32_t a, double none) const {
    const SessionClock& c = clocks_[a];
    if (c.thinks > 0) return c.think_sum / c.thinks;
    return clock_thinks_ > 0 ? clock_think_sum_ / static_cast<double>(clock_thinks_) : none;
  }
  std::vector<uint32_t> scratch_lost_;  // tier_store's evicted sessions
  std::vector<double> prefetch_job_bytes_;  // per agent: its prefetch in flight (0: none)
  double clock_think_sum_ = 0;
  int64_t clock_thinks_ = 0;
  double prefetch_bytes_ = 0, prefetch_wasted_bytes_ = 0, prefetch_used_bytes_ = 0;
  int64_t prefetches_ = 0, prefetch_skipped_ = 0;
  std::vector<TierEntry> tier_;
  std::vector<TierNode> tier_nodes_;
  double tier_used_ = 0, tier_peak_ = 0, tier_used_integral_ = 0, tier_accounted_at_ = 0;
  int64_t tier_hits_ = 0, tier_misplaced_ = 0, tier_expired_ = 0, tier_evicted_ = 0,
          tier_stored_ = 0;
  // The bounded store (cfg_.store_capacity_bytes > 0; agent sessions): each session's KV in the
  // store, in a list by last use (arrival or write), the least recently used first.
  struct StoreEntry {
    uint32_t prev = kNone, next = kNone;
    int64_t tokens = 0;
    double last_use = 0;
    bool busy = false, ended = false, listed = false;
  };
  bool store_bounded() const { return cfg_.store_capacity_bytes > 0; }
  void store_unlink(uint32_t a);
  void store_touch(uint32_t a);
  void store_evict(uint32_t a);
  // Evicts sessions until `tokens` more fit; false when what is left is all in a turn.
  bool store_make_room(int64_t tokens);
  std::vector<StoreEntry> store_;
  uint32_t store_head_ = kNone, store_tail_ = kNone;
  int64_t store_tokens_ = 0, store_capacity_tokens_ = 0;
  int64_t store_busy_tokens_ = 0;  // of store_tokens_, sessions in a turn (not evictable)
  double store_peak_tokens_ = 0, store_evicted_tokens_ = 0;
  int64_t store_evicted_sessions_ = 0, store_evicted_running_ = 0, store_rejected_ = 0;
  // Where each turn's hit came from (SimResult::hit_source_tokens).
  double src_dram_ = 0, src_pe_storage_ = 0, src_de_storage_ = 0, src_recompute_ = 0;
  int64_t recompute_turns_ = 0;
  // try_start_pass's per-engine lists, reused (a pass would otherwise allocate per engine).
  std::vector<model::PrefillWork> scratch_ready_;
  std::vector<uint32_t> scratch_ready_agents_;
};

void ClusterSim::build() {
  const int g = cfg_.hw.gpus_per_node;
  build_layouts();
  int P = 0, D = 0;  // virtual nodes
  std::vector<int> pe_sizes, de_sizes;
  std::vector<double> de_budgets;
  for (const VGroup& vg : vgroups_) (vg.prefill ? P : D) += static_cast<int>(vg.vnodes);
  phys_of_.resize(static_cast<size_t>(P + D));
  vgroup_of_vnode_.resize(static_cast<size_t>(P + D));
  {
    uint32_t next_pe = 0, next_de = static_cast<uint32_t>(P), pe_group = 0, de_group = 0;
    for (size_t gi = 0; gi < vgroups_.size(); ++gi) {
      VGroup& vg = vgroups_[gi];
      vg.first_vnode = vg.prefill ? next_pe : next_de;
      (vg.prefill ? next_pe : next_de) += vg.vnodes;
      vg.sim_group = vg.prefill ? pe_group++ : de_group++;
      (vg.prefill ? pe_sizes : de_sizes).push_back(static_cast<int>(vg.vnodes));
      if (!vg.prefill)
        de_budgets.push_back(cost_.hbm_kv_budget_bytes(vg.ep_gpus, cfg_.hbm_reserved_bytes));
      for (uint32_t i = 0; i < vg.vnodes; ++i) {
        phys_of_[vg.first_vnode + i] = vg.phys[i];
        vgroup_of_vnode_[vg.first_vnode + i] = static_cast<int>(gi);
      }
    }
  }
  nodes_.reserve(static_cast<size_t>(P + D));
  for (int n = 0; n < P + D; ++n) {
    nodes_.emplace_back(static_cast<size_t>(cfg_.read_queue_depth));
    nodes_.back().prefill = n < P;
    nodes_.back().buffer_cap = n < P ? cfg_.pe_buffer_bytes : cfg_.de_buffer_bytes;
  }
  // PE engines and EP groups (the groups of every layout; a static run's last may be smaller).
  for (const VGroup& vg : vgroups_) {
    if (!vg.prefill) continue;
    for (uint32_t v = vg.first_vnode; v < vg.first_vnode + vg.vnodes; ++v) {
      for (int i = 0; i < g; ++i) {
        PeEngine e;
        e.node = v;
        e.group = vg.sim_group;
        pes_.push_back(std::move(e));
      }
    }
  }
  for (uint32_t i = 0; i < pes_.size(); ++i) {
    uint32_t gi = pes_[i].group;
    if (gi >= pe_groups_.size()) pe_groups_.push_back(PeGroup{i, 0, false, 0, {}});
    pe_groups_[gi].count++;
  }
  for (auto& grp : pe_groups_) grp.batches.resize(grp.count);

  de_ep_gpus_ = 0;
  de_hbm_budget_ = std::numeric_limits<double>::infinity();
  for (const VGroup& vg : vgroups_) {
    if (vg.prefill) continue;
    const double budget = de_budgets[vg.sim_group];
    // The chain floor takes the fastest decode (the widest group); a request's HBM need is
    // capped by the smallest budget, so that it fits any group.
    de_ep_gpus_ = std::max(de_ep_gpus_, vg.ep_gpus);
    de_hbm_budget_ = std::min(de_hbm_budget_, budget);
    for (uint32_t v = vg.first_vnode; v < vg.first_vnode + vg.vnodes; ++v) {
      for (int i = 0; i < g; ++i) {
        DeEngine e;
        e.node = v;
        e.group = vg.sim_group;
        e.ep_gpus = vg.ep_gpus;
        e.hbm_budget = budget;
        des_.push_back(std::move(e));
      }
    }
  }
  pe_hbm_budget_ = std::min(
      cfg_.basic_prefill_kv_bytes,
      cost_.hbm_kv_budget_bytes(std::min(cfg_.pe_ep_nodes, cfg_.prefill_nodes) * g,
                                cfg_.hbm_reserved_bytes));

  // alpha: tokens a node reads in alpha_s; beta: prompt tokens one GPU prefills in beta_s, at
  // the workload's typical turn (PAPER.md §8.5 profiles both; we take them from the cost model).
  sched::SchedulerInputs in;
  in.cost = &cost_;
  in.typical = typical_turn(agents_);
  in.pe_group_gpus = static_cast<int>(pe_groups_[0].count);
  in.snic_bytes_per_s = snic_rate();
  in.kv_bytes_per_token = static_cast<double>(cfg_.model.stored_bytes_per_token());
  in.de_hbm_bytes = de_hbm_budget_;
  in.de_group_hbm_bytes = de_budgets;
  in.block_tokens = cfg_.block_tokens;
  in.recompute_auto = cfg_.recompute_auto();
  const sched::ClusterSchedulerParams sp = sched::make_cluster_scheduler_params(cfg_.scheduler, in);
  pe_params_ = sp.pe;

  sched::ClusterShape shape;
  shape.prefill_nodes = P;
  shape.decode_nodes = D;
  shape.pe_engines_per_node = shape.de_engines_per_node = g;
  shape.pe_ep_nodes = cfg_.pe_ep_nodes;
  shape.de_ep_nodes = cfg_.de_ep_nodes;
  shape.pe_group_nodes = pe_sizes;
  shape.de_group_nodes = de_sizes;
  sched_ = std::make_unique<sched::ClusterScheduler>(shape, sp);
  if (opt_.on_scheduler) opt_.on_scheduler(*sched_);
  // The groups of the starting layout run; the others wait for the controller.
  owner_.assign(static_cast<size_t>(phys_nodes_), -1);
  left_group_.assign(static_cast<size_t>(phys_nodes_), -1);
  freed_at_.assign(static_cast<size_t>(phys_nodes_), 0.0);
  for (int gi : layout_groups_[static_cast<size_t>(layout_)]) {
    vgroups_[static_cast<size_t>(gi)].alive = true;
    for (uint32_t p : vgroups_[static_cast<size_t>(gi)].phys) owner_[p] = gi;
  }
  for (const VGroup& vg : vgroups_) {
    if (vg.alive) continue;
    for (uint32_t v = vg.first_vnode; v < vg.first_vnode + vg.vnodes; ++v)
      sched_->set_node_alive(static_cast<int>(v), false);
  }
  if (cfg_.adaptive.enabled) {
    record_pd_point();
    events_.push(cfg_.adaptive.controller.interval_s, kPdCheck, 0);
  }

  reqs_.resize(agents_.size());
  requests_.resize(agents_.size());
  agent_finish_.assign(agents_.size(), std::numeric_limits<double>::infinity());
  // Agents that replay the same trajectory have the same turns (offline 64K at 48P96D: 49,152
  // agents over 500 trajectories). Each Req points at one copy of its list, so the turns the
  // event loop reads take 2 MB of cache instead of 190 MB of scattered pages.
  static_assert(std::has_unique_object_representations_v<workload::TurnShape>);
  std::unordered_map<std::string_view, const workload::TurnShape*> distinct_turns;
  for (size_t a = 0; a < agents_.size(); ++a) {
    Req& r = reqs_[a];
    const AgentPlan& plan = agents_[a];
    const std::string_view bytes(reinterpret_cast<const char*>(plan.turns.data()),
                                 plan.turns.size() * sizeof(workload::TurnShape));
    r.turns = distinct_turns.try_emplace(bytes, plan.turns.data()).first->second;
    r.nturns = static_cast<uint32_t>(plan.turns.size());
    r.think_s = plan.think_s.data();
    r.nthink = static_cast<uint32_t>(plan.think_s.size());
    r.addressed = !plan.prefix_blocks.empty();
  }
  for (const auto& ag : agents_) {
    if (ag.prefix_blocks.empty()) continue;
    trace_ = true;
    for (uint32_t b : ag.prefix_blocks)
      if (b >= stored_block_.size()) stored_block_.resize(static_cast<size_t>(b) + 1, false);
  }
  online_ = trace_ || cfg_.online.enabled();
  slo_hit_only_ = cfg_.online.slo_turns == "hit";
  recompute_always_ = cfg_.recompute == "always";
  if (store_bounded()) {
    store_.assign(agents_.size(), StoreEntry{});
    store_capacity_tokens_ = static_cast<int64_t>(
        cfg_.store_capacity_bytes / static_cast<double>(cfg_.model.stored_bytes_per_token()));
  }
  if (tier_on()) {
    tier_.assign(agents_.size(), TierEntry{});
    tier_nodes_.assign(nodes_.size(), TierNode{});
    prefetch_mode_ = cfg_.prefetch == "always" ? 1 : cfg_.prefetch == "predict" ? 2 : 0;
    if (prefetch_on()) prefetch_job_bytes_.assign(agents_.size(), 0.0);
  }
  if (store_bounded() || prefetch_on()) clocks_.assign(agents_.size(), SessionClock{});
  if (online_) events_.push(cfg_.online.check_interval_s, kCheck, 0);
  agents_left_ = static_cast<int>(agents_.size());
  for (uint32_t a = 0; a < agents_.size(); ++a) {
    turns_total_ += static_cast<int64_t>(agents_[a].turns.size());
    if (agents_[a].turns.empty()) {
      --agents_left_;
      continue;
    }
    events_.push(agents_[a].start_s, kArrive, a);
  }
  if (!online_) {
    // Offline every turn is reported: one sample each (TPOT: each that decodes a second token).
    const auto n = static_cast<size_t>(turns_total_);
    first_tokens_.reserve(n);
    ttst_.reserve(n);
    tpot_.reserve(n);
    turn_time_.reserve(n);
    prefault_ = prefault({first_tokens_.reserved(), ttst_.reserved(), tpot_.reserved(),
                          turn_time_.reserved()});
  }
}

void ClusterSim::store_unlink(uint32_t a) {
  StoreEntry& e = store_[a];
  if (!e.listed) return;
  (e.prev != kNone ? store_[e.prev].next : store_head_) = e.next;
  (e.next != kNone ? store_[e.next].prev : store_tail_) = e.prev;
  e.prev = e.next = kNone;
  e.listed = false;
}

void ClusterSim::store_touch(uint32_t a) {
  store_unlink(a);
  StoreEntry& e = store_[a];
  e.last_use = now_;
  e.prev = store_tail_;
  (store_tail_ != kNone ? store_[store_tail_].next : store_head_) = a;
  store_tail_ = a;
  e.listed = true;
}

void ClusterSim::store_evict(uint32_t a) {
  StoreEntry& e = store_[a];
  store_unlink(a);
  store_tokens_ -= e.tokens;
  store_evicted_tokens_ += static_cast<double>(e.tokens);
  ++store_evicted_sessions_;
  if (!e.ended) {
    ++store_evicted_running_;
    // A running session's next turn finds nothing stored.
    Req& r = reqs_[a];
    live_kv_tokens_ -= static_cast<double>(r.kv_tokens);
    r.kv_tokens = 0;
    // Its DRAM copy goes too: the next turn has no hit to take from it.
    if (tier_on() && tier_[a].node != kNone && !tier_[a].pinned && !tier_[a].staging)
      tier_remove(a);
  }
  e.tokens = 0;
}

bool ClusterSim::store_make_room(int64_t tokens) {
  if (store_tokens_ + tokens <= store_capacity_tokens_) return true;
  // Not even evicting every session out of a turn would make room: evict nothing.
  if (store_busy_tokens_ + tokens > store_capacity_tokens_) return false;
  auto evict_while = [&](auto&& pick) {
    for (uint32_t v = store_head_; v != kNone && store_tokens_ + tokens > store_capacity_tokens_;) {
      const uint32_t next = store_[v].next;
      if (!store_[v].busy && pick(store_[v])) store_evict(v);
      v = next;
    }
  };
  if (cfg_.evict == "session") {
    // Ended sessions first, then those idle beyond twice their mean think time so far (all
    // sessions' mean before their first think; none observed yet: none is overdue).
    evict_while([](const StoreEntry& e) { return e.ended; });
    evict_while([&](const StoreEntry& e) {
      const auto a = static_cast<uint32_t>(&e - store_.data());
      return now_ - e.last_use > 2 * expected_think(a, 1e300);
    });
  }
  evict_while([](const StoreEntry&) { return true; });
  return store_tokens_ + tokens <= store_capacity_tokens_;
}

void ClusterSim::tier_account() {
  tier_used_integral_ += tier_used_ * (now_ - tier_accounted_at_);
  tier_accounted_at_ = now_;
}

void ClusterSim::tier_remove(uint32_t a) {
  TierEntry& e = tier_[a];
  TierNode& n = tier_nodes_[e.node];
  (e.prev != kNone ? tier_[e.prev].next : n.head) = e.next;
  (e.next != kNone ? tier_[e.next].prev : n.tail) = e.prev;
  const double bytes = kv_bytes(e.tokens);
  // Left without serving a turn (a staging one is counted when its read ends).
  if (e.prefetched && !e.staging) prefetch_wasted_bytes_ += bytes;
  if (e.pinned || e.staging) n.locked -= bytes;
  tier_account();
  n.used -= bytes;
  tier_used_ -= bytes;
  e = TierEntry{};
}

// A session between turns lost its DRAM copy (expired, evicted for space).
void ClusterSim::tier_lost(uint32_t a) {
  if (!prefetch_on() || clocks_[a].in_turn || reqs_[a].kv_tokens <= 0) return;
  if (prefetch_mode_ == 1) {
    prefetch_start(a);
    return;
  }
  // predict: land it by the expected return, reading at the NIC's rate (twice, for slack).
  const double lead = 2 * kv_bytes(reqs_[a].kv_tokens) / snic_rate();
  events_.push(std::max(now_, clocks_[a].last_end + expected_think(a, 0.0) - lead), kPrefetchDue,
               a);
}

void ClusterSim::on_prefetch_due(uint32_t a) {
  if (clocks_[a].in_turn || tier_[a].node != kNone || reqs_[a].kv_tokens <= 0) return;
  prefetch_start(a);
}

// Stages agent a's stored KV into the decode node with the most free tier space (never evicting).
void ClusterSim::prefetch_start(uint32_t a) {
  const int64_t tokens = reqs_[a].kv_tokens;
  const double bytes = kv_bytes(tokens);
  uint32_t best = kNone;
  double best_free = -1;
  for (uint32_t v = 0; v < nodes_.size(); ++v) {
    if (nodes_[v].prefill || !sched_->node_alive(static_cast<int>(v))) continue;
    const double free = cfg_.de_dram_bytes - tier_nodes_[v].used;
    if (free >= bytes && free > best_free) {
      best = v;
      best_free = free;
    }
  }
  if (best == kNone || tier_[a].node != kNone || prefetch_job_bytes_[a] > 0) {
    ++prefetch_skipped_;  // no room, or its earlier prefetch has not ended yet
    return;
  }
  tier_insert(a, best, tokens);
  tier_[a].prefetched = true;
  tier_set_lock(a, false, true);
  ++prefetches_;
  prefetch_job_bytes_[a] = bytes;
  Node& nd = nodes_[best];
  nd.prefetch.advance(now_);
  nd.prefetch.add(a, bytes);
  reschedule_prefetch(best);
}

// The lowest priority: the NIC's whole rate while no demand read runs, nothing otherwise.
void ClusterSim::reschedule_prefetch(uint32_t node) {
  Node& nd = nodes_[node];
  PsServer& link = nd.prefetch;
  link.advance(now_);
  link.set_rate(nd.reads.active() == 0 ? snic_rate() : 0.0);
  const double t = link.next_departure();
  if (std::isfinite(t)) events_.push(t, kPrefetchDone, node, link.version());
}

void ClusterSim::on_prefetch_done(uint32_t node, uint64_t version) {
  Node& nd = nodes_[node];
  if (version != nd.prefetch.version()) return;
  nd.prefetch.advance(now_);
  const uint32_t a = nd.prefetch.pop();
  // An agent has one prefetch at a time (prefetch_start), so this is its entry's, if it is
  // still there. The read happened whatever became of the entry meanwhile (its session came
  // back and read from storage, or ended): then it was wasted.
  const double bytes = prefetch_job_bytes_[a];
  prefetch_job_bytes_[a] = 0;
  prefetch_bytes_ += bytes;
  TierEntry& e = tier_[a];
  if (e.node == node && e.staging) {
    tier_set_lock(a, e.pinned, false);
  } else {
    prefetch_wasted_bytes_ += bytes;
  }
  reschedule_prefetch(node);
}

// Keeps `tokens` of agent a's KV in `node`'s DRAM tier (replacing what it kept before, here or
// elsewhere): expired entries go first, then the least recently stored that no placed turn is
// pulling. A session larger than the whole tier is not kept.
void ClusterSim::tier_store(uint32_t a, uint32_t node, int64_t tokens) {
  if (tier_[a].node != kNone) {
    if (tier_[a].pinned) return;  // its next turn is placed already (no think time): keep it
    tier_remove(a);
  }
  const double bytes = kv_bytes(tokens);
  const double cap = cfg_.de_dram_bytes;
  if (bytes > cap || tokens <= 0) return;
  TierNode& n = tier_nodes_[node];
  // Not even evicting every entry no turn or prefetch holds would make room: evict nothing.
  if (n.locked + bytes > cap) return;
  std::vector<uint32_t>& lost = scratch_lost_;
  lost.clear();
  for (uint32_t v = n.head; v != kNone && n.used + bytes > cap;) {
    const uint32_t next = tier_[v].next;
    if (!tier_[v].pinned && !tier_[v].staging) {
      (now_ > tier_[v].expire ? tier_expired_ : tier_evicted_) += 1;
      tier_remove(v);
      lost.push_back(v);
    }
    v = next;
  }
  if (n.used + bytes <= cap) {  // else the rest is pinned
    tier_insert(a, node, tokens);
    ++tier_stored_;
  }
  // Prefetches of the evicted see the space this session took (none goes back where it was
  // just evicted from to make room).
  for (uint32_t v : lost) tier_lost(v);
}

// Appends agent a's `tokens` to `node`'s tier list (the newest; it expires last).
void ClusterSim::tier_insert(uint32_t a, uint32_t node, int64_t tokens) {
  TierNode& n = tier_nodes_[node];
  TierEntry& e = tier_[a];
  e.node = node;
  e.tokens = tokens;
  e.expire = now_ + cfg_.de_dram_ttl_s;
  e.prev = n.tail;
  e.next = kNone;
  (n.tail != kNone ? tier_[n.tail].next : n.head) = a;
  n.tail = a;
  const double bytes = kv_bytes(tokens);
  tier_account();
  n.used += bytes;
  tier_used_ += bytes;
  tier_peak_ = std::max(tier_peak_, tier_used_);
}

void ClusterSim::on_arrive(uint32_t a) {
  Req& r = reqs_[a];
  r.turn += 1;
  const workload::TurnShape& t = r.turns[r.turn];
  r.prompt = t.prompt_tokens;
  const AgentPlan& plan = agents_[a];
  // The cached prefix: the turn's context, or (content-addressed) the leading full blocks that
  // earlier requests have stored.
  int64_t cached = t.context_tokens;
  if (r.addressed) {
    const int64_t full = r.prompt / plan.prefix_block_tokens;
    int64_t lead = 0;
    while (lead < full && stored_block_[plan.prefix_blocks[static_cast<size_t>(lead)]]) ++lead;
    cached = lead * plan.prefix_block_tokens;
  }
  if (!clocks_.empty() && !r.addressed) {
    SessionClock& c = clocks_[a];
    if (r.turn > 0) {
      c.think_sum += now_ - c.last_end;
      c.thinks += 1;
      clock_think_sum_ += now_ - c.last_end;
      ++clock_thinks_;
    }
    c.in_turn = true;
  }
  if (store_bounded() && !r.addressed) {
    StoreEntry& se = store_[a];
    cached = std::min(cached, r.kv_tokens);  // 0 once its session was evicted
    se.busy = true;
    store_busy_tokens_ += se.tokens;
    if (se.tokens > 0) store_touch(a);
  }
  if (r.turn == 0) {
    ++agents_arrived_;
    const workload::TurnShape& last = r.turns[r.nturns - 1];
    arrived_length_sum_ += static_cast<double>(last.prompt_tokens + last.gen_tokens);
    arrived_turns_sum_ += static_cast<double>(r.nturns);
    for (uint32_t i = 0; i < r.nthink; ++i) arrived_think_sum_ += r.think_s[i];
  }
  r.gen = std::max<int64_t>(1, t.gen_tokens);
  // The scheduler's request, as the live service builds it (sched/turn_plan.h).
  sched::TurnInputs in;
  in.id = static_cast<int64_t>(a);
  in.prompt_tokens = r.prompt;
  in.gen_tokens = r.gen;
  in.cached_tokens = cached;
  if (recompute_always_) in.path = ReadPath::kRecompute;
  if (tier_on() && !r.addressed) {
    TierEntry& te = tier_[a];
    if (te.node != kNone && te.staging) tier_remove(a);  // still being read: too late
    if (te.node != kNone && now_ > te.expire) {
      ++tier_expired_;
      tier_remove(a);
    }
    if (te.node != kNone) {
      in.dram_node = static_cast<int>(te.node);
      in.dram_tokens = te.tokens;
      // Held for the placement: evicting or expiring it while the turn waits would leave the
      // scheduler offering a copy that is gone.
      tier_set_lock(a, true, false);
    }
  }
  const sched::TurnCosts costs{cfg_.block_tokens,
                               static_cast<double>(cfg_.model.stored_bytes_per_token()),
                               de_hbm_budget_};
  // Its prefill work is priced at the best batching (no fixed pass cost): the request's load for
  // the scheduler (PePolicy::kTail) and its share of the compute floor.
  sched::SchedRequest& request = requests_[a];
  request = sched::make_sched_request(in, costs, &cost_);
  r.hit = request.hit_tokens;
  r.dram_hit = r.recomputed_hit = 0;
  if (in.path == ReadPath::kRecompute) {
    // Forced: the store holds the prefix, the prefill computes it.
    r.recomputed_hit = sched::plan_hit_tokens(cached, r.prompt, cfg_.block_tokens);
    src_recompute_ += static_cast<double>(r.recomputed_hit);
    recompute_turns_ += r.recomputed_hit > 0 ? 1 : 0;
    hit_tokens_ += static_cast<double>(r.recomputed_hit);
  }
  r.new_left = r.prompt - r.hit;
  r.cached = r.hit;
  r.hbm_need = request.hbm_need_bytes;
  r.pe = r.de = kNone;
  r.read_done = r.streamed_hit = r.hbm_reserved = r.prefilled = false;
  r.t_arrive = now_;
  r.t_pe = r.t_assigned = r.t_admitted = r.t_read_start = r.t_read_done = now_;
  r.t_pass = -1;
  prompt_tokens_ += static_cast<double>(r.prompt);
  hit_tokens_ += static_cast<double>(r.hit);
  compute_floor_work_s_ += request.pe_work_s;
  r.pe_work = request.pe_work();
  if (scheduled()) {
    (void)sched_->submit(request);  // placed by a fetch
    ensure_tick();
    return;
  }
  // Round robin: placed at once; DE HBM is reserved in FIFO order per engine as it frees.
  const sched::Placement p = *sched_->submit(request);
  assign_pe(a, static_cast<uint32_t>(p.pe));
  reserve_round_robin(a, static_cast<uint32_t>(p.de));
  after_assigned(a, p);
}

// The slowest agent's turns back to back on an idle cluster: each prefill alone in one pass of
// the fastest PE group (chunks only add passes; a batch only adds work), then gen - 1 decode
// steps alone at the prompt's context (a step grows with the batch and the context), then the
// think time. Reads, copies and queues are left out, so every mode's JCT is at least this.
double ClusterSim::chain_floor() const {
  std::vector<int> sizes;  // distinct PE group sizes (one or two)
  for (const PeGroup& grp : pe_groups_) {
    if (std::find(sizes.begin(), sizes.end(), static_cast<int>(grp.count)) == sizes.end())
      sizes.push_back(static_cast<int>(grp.count));
  }
  double floor = 0;
  for (const AgentPlan& plan : agents_) {
    double t = online_ ? 0.0 : plan.start_s;  // online: the longest lifetime, not its end
    for (size_t i = 0; i < plan.turns.size(); ++i) {
      const workload::TurnShape& turn = plan.turns[i];
      // A trace request hits at most its full prefix blocks (earlier requests stored them).
      const int64_t hit =
          plan.prefix_blocks.empty()
              ? hit_tokens(turn, cfg_.block_tokens)
              : turn.prompt_tokens / plan.prefix_block_tokens * plan.prefix_block_tokens /
                    cfg_.block_tokens * cfg_.block_tokens;
      const int64_t fresh = turn.prompt_tokens - hit;
      double prefill = std::numeric_limits<double>::infinity();
      const double attention = cost_.attention_s({hit, fresh});
      for (int size : sizes) {
        prefill =
            std::min(prefill, cost_.group_pass_s(attention, static_cast<double>(fresh), size));
      }
      const int64_t gen = std::max<int64_t>(1, turn.gen_tokens);
      t += prefill +
           static_cast<double>(gen - 1) *
               cost_.decode_step_s(1, static_cast<double>(turn.prompt_tokens), de_ep_gpus_);
      if (i + 1 < plan.turns.size() && i + 1 < plan.think_s.size()) t += plan.think_s[i + 1];
    }
    floor = std::max(floor, t);
  }
  return floor;
}

void ClusterSim::ensure_tick() {
  if (tick_pending_) return;
  tick_pending_ = true;
  // Groups pull on a fixed period; the next pull is at the next multiple of it.
  // Integer tick numbers: floor(now / period) of a time that was itself k * period can round
  // down to k - 1 and schedule the tick at `now` again, forever.
  double period = cfg_.scheduler.fetch_interval_s;
  uint64_t k = std::max(last_tick_ + 1, static_cast<uint64_t>(now_ / period) + 1);
  while (static_cast<double>(k) * period <= now_) ++k;
  last_tick_ = k;
  events_.push(static_cast<double>(k) * period, kTick, 0);
}

void ClusterSim::on_tick() {
  tick_pending_ = false;
  const sched::FetchResult fetched = sched_->fetch();
  for (const sched::PePlacement& p : fetched.pe_assigned)
    assign_pe(static_cast<uint32_t>(p.request_id), static_cast<uint32_t>(p.pe));
  for (const sched::Placement& p : fetched.placed) {
    auto a = static_cast<uint32_t>(p.request_id);
    reqs_[a].de = static_cast<uint32_t>(p.de);
    reqs_[a].hbm_reserved = true;  // by the DE scheduler
    after_assigned(a, p);
  }
  if (sched_->has_queued()) ensure_tick();
}

void ClusterSim::assign_pe(uint32_t a, uint32_t pe) {
  Req& r = reqs_[a];
  r.pe = pe;
  r.t_pe = now_;
  pes_[pe].fifo.push_back({a, r.read_done, r.cached, r.new_left});
  count_open(pes_[pe].node, +1);
}

void ClusterSim::reserve_round_robin(uint32_t a, uint32_t de) {
  Req& r = reqs_[a];
  r.de = de;
  DeEngine& e = des_[de];
  if (e.reserve_wait.empty() && sched_->hbm_free(static_cast<int>(de)) >= r.hbm_need) {
    sched_->reserve_hbm(static_cast<int>(de), r.hbm_need);
    r.hbm_reserved = true;
  } else {
    e.reserve_wait.push_back(a);
  }
}

// The scheduler has chosen the read path (sched::PathPolicy of the mode), split the hit between
// the sides where it splits, and counted each side's part into its node's read-queue ledger.
void ClusterSim::after_assigned(uint32_t a, const sched::Placement& p) {
  Req& r = reqs_[a];
  r.t_assigned = r.t_admitted = r.t_read_start = now_;
  r.path = p.path;
  count_open(des_[r.de].node, +1);
  if (oracle()) {
    if (opt_.on_plan) opt_.on_plan(sched::plan_turn(requests_[a], p));
    read_finished(a);
    return;
  }
  // The plan's read ranges (sched/turn_plan.h), as the live nodes receive them.
  const sched::TurnPlan plan = sched::plan_turn(requests_[a], p);
  if (opt_.on_plan) opt_.on_plan(plan);
  r.pe_hit = plan.pe_read.tokens();
  r.de_hit = plan.de_read.tokens();
  r.dram_hit = plan.de_dram.tokens();
  src_pe_storage_ += static_cast<double>(r.pe_hit);
  src_de_storage_ += static_cast<double>(r.de_hit);
  if (tier_on() && tier_[a].node != kNone) {
    if (r.dram_hit > 0) {
      ++tier_hits_;
      src_dram_ += static_cast<double>(r.dram_hit);
      if (tier_[a].prefetched) {
        prefetch_used_bytes_ += kv_bytes(tier_[a].tokens);
        tier_[a].prefetched = false;  // used: not wasted when it leaves
      }
    } else {
      ++tier_misplaced_;  // placed on another node: read from storage
      tier_set_lock(a, false, false);
    }
  }
  if (r.path == ReadPath::kRecompute && r.hit > 0) {
    // The scheduler found computing the hit sooner than reading it: nothing is read, and the
    // PE's queued entry now has every prompt token to compute.
    ++recompute_turns_;
    src_recompute_ += static_cast<double>(r.hit);
    r.recomputed_hit = r.hit;
    r.hit = 0;
    r.cached = 0;
    r.new_left = r.prompt;
    PeEngine::Queued& q = pes_[r.pe].find(a);
    q.cached = 0;
    q.new_left = r.prompt;
  }
  (r.path == ReadPath::kSplit ? split_path_ : r.path == ReadPath::kPe ? pe_path_ : de_path_) += 1;
  if (r.path == ReadPath::kSplit) {
    split_bytes_pe_ += pe_hit_bytes(r);
    split_bytes_de_ += de_hit_bytes(r);
  }
  r.reads_left = (r.pe_hit > 0 ? 1 : 0) + (r.de_hit > 0 ? 1 : 0);
  if (r.reads_left == 0) {
    read_finished(a);
    return;
  }
  if (r.pe_hit > 0) start_read(a, pe_node_of(r.pe));
  if (r.de_hit > 0) start_read(a, de_node_of(r.de));
}

void ClusterSim::start_read(uint32_t a, uint32_t node) {
  Req& r = reqs_[a];
  Node& nd = nodes_[node];
  // Admission into the node's DRAM buffer; an empty buffer always admits (no deadlock on a
  // request larger than the buffer).
  const double bytes = read_bytes_on(r, node);
  if (nd.buffer_wait.empty() && (nd.buffer_used + bytes <= nd.buffer_cap || nd.buffer_used == 0)) {
    admit_read(a, node);
  } else {
    nd.buffer_wait.push_back(a);
  }
}

void ClusterSim::admit_read(uint32_t a, uint32_t node) {
  Node& nd = nodes_[node];
  Req& r = reqs_[a];
  const double bytes = read_bytes_on(r, node);
  nd.buffer_used += bytes;
  // The later part sets the times (a split read waits for both).
  r.t_admitted = std::max(r.t_admitted, now_);
  nd.reads.advance(now_);
  if (nd.reads.add(a, bytes)) r.t_read_start = std::max(r.t_read_start, now_);
  // else: queued for a read slot; t_read_start is set when one frees
  reschedule_reads(node);
}

void ClusterSim::admit_buffer_waiters(uint32_t node) {
  Node& nd = nodes_[node];
  while (!nd.buffer_wait.empty()) {
    uint32_t a = nd.buffer_wait.front();
    if (nd.buffer_used > 0 && nd.buffer_used + read_bytes_on(reqs_[a], node) > nd.buffer_cap)
      break;
    nd.buffer_wait.pop_front();
    admit_read(a, node);
  }
}

// One direction of a storage NIC: its usable bandwidth shared equally by the transfers in
// flight; schedules the next departure as `kind` (stale events are dropped by version).
void ClusterSim::reschedule_link(PsServer& link, uint32_t kind, uint32_t node) {
  link.advance(now_);
  size_t n = link.active();
  link.set_rate(n > 0 ? snic_rate() / static_cast<double>(n) : 0.0);
  double t = link.next_departure();
  if (std::isfinite(t)) events_.push(t, kind, node, link.version());
}

void ClusterSim::reschedule_reads(uint32_t node) {
  reschedule_link(nodes_[node].reads, kReadDone, node);
  if (prefetch_on()) reschedule_prefetch(node);
}

void ClusterSim::on_read_done(uint32_t node, uint64_t version) {
  Node& nd = nodes_[node];
  if (version != nd.reads.version()) return;  // superseded by a later change
  nd.reads.advance(now_);
  uint32_t admitted = kNone;
  uint32_t a = nd.reads.pop(&admitted);
  if (admitted != kNone) {
    Req& w = reqs_[admitted];
    w.t_read_start = std::max(w.t_read_start, now_);
  }
  Req& r = reqs_[a];
  const double bytes = read_bytes_on(r, node);
  sched_->read_finished(static_cast<int>(node), reads_on_pe(r, node) ? r.pe_hit : r.de_hit);
  (nd.prefill ? hops_.storage_read_pe : hops_.storage_read_de) += bytes;
  auto bucket = static_cast<size_t>(now_ / cfg_.timeseries_bucket_s);
  if (nd.read_bytes_by_bucket.size() <= bucket) nd.read_bytes_by_bucket.resize(bucket + 1, 0.0);
  nd.read_bytes_by_bucket[bucket] += bytes;
  reschedule_reads(node);
  if (--r.reads_left == 0) read_finished(a);
}

void ClusterSim::read_finished(uint32_t a) {
  Req& r = reqs_[a];
  r.read_done = true;
  r.t_read_done = now_;
  pes_[r.pe].find(a).ready = true;
  try_start_pass(pes_[r.pe].group);
}

void ClusterSim::try_start_pass(uint32_t gi) {
  PeGroup& grp = pe_groups_[gi];
  if (grp.busy) return;
  double max_attn = 0, total_new = 0, max_xfer = 0, max_h2d = 0;
  bool any = false;
  for (uint32_t i = 0; i < grp.count; ++i) {
    PeEngine& e = pes_[grp.first + i];
    auto& batch = grp.batches[i];
    batch.clear();
    size_t n_ready = 0;  // requests whose KV is in place, offered or not
    {
      std::vector<model::PrefillWork>& ready = scratch_ready_;
      std::vector<uint32_t>& ready_agents = scratch_ready_agents_;
      ready.clear();
      ready_agents.clear();
      for (const PeEngine::Queued& q : e.fifo) {
        if (!q.ready) continue;
        ++n_ready;
        if (!scheduled() && ready.size() >= static_cast<size_t>(cfg_.max_batch_requests)) continue;
        ready.push_back({q.cached, q.new_left});
        ready_agents.push_back(q.agent);
      }
      if (ready.empty()) continue;
      if (scheduled()) {
        const auto planned = sched::plan_quota_batch(ready, cost_, cfg_.scheduler.quota_s);
        for (const auto& item : planned)
          batch.push_back({ready_agents[item.index], item.new_tokens});
        const bool quota_bound = planned.size() < ready.size() ||
                                 planned.back().new_tokens < ready[planned.back().index].new_tokens;
        quota_bound_engine_passes_ += quota_bound ? 1 : 0;
      } else if (cfg_.scheduler.mode == Mode::kBasic) {
        // Without layerwise prefill every layer's KV of the batch sits in HBM at once.
        for (const auto& item : sched::plan_capacity_batch(
                 ready, static_cast<double>(cfg_.model.stored_bytes_per_token()), pe_hbm_budget_,
                 static_cast<size_t>(cfg_.max_batch_requests)))
          batch.push_back({ready_agents[item.index], item.new_tokens});
      } else {
        for (size_t k = 0; k < ready.size(); ++k)
          batch.push_back({ready_agents[k], ready[k].new_tokens});
      }
    }
    if (batch.empty()) continue;
    any = true;
    for (const auto& it : batch) {
      if (reqs_[it.agent].t_pass < 0) reqs_[it.agent].t_pass = now_;
    }
    engine_passes_ += 1;
    batched_requests_ += static_cast<double>(batch.size());
    ready_requests_ += static_cast<double>(n_ready);
    double attn = 0, news = 0, in_bytes = 0, out_bytes = 0;
    for (const auto& it : batch) {
      const Req& r = reqs_[it.agent];
      attn += cost_.attention_s({r.cached, it.new_tokens});
      news += static_cast<double>(it.new_tokens);
      if (layerwise() && !oracle()) {
        if (!r.streamed_hit) in_bytes += hit_bytes(r);  // hit KV streams in on the first chunk
        double chunk_kv = kv_bytes(it.new_tokens);
        // The PE side's hit KV goes on to the DE buffer; the DE side's is there already.
        out_bytes += chunk_kv + (!r.streamed_hit ? pe_hit_bytes(r) : 0.0);
      }
    }
    max_attn = std::max(max_attn, attn);
    total_new += news;
    if (cfg_.scheduler.mode == Mode::kBasic) {
      // The whole KV is copied DRAM -> HBM before the pass can start: not overlapped.
      double h2d = 0;
      for (const auto& it : batch)
        h2d += reqs_[it.agent].streamed_hit ? 0 : hit_bytes(reqs_[it.agent]);
      max_h2d = std::max(max_h2d, h2d / cfg_.hw.cnic_bytes_per_s);
    }
    if (layerwise() && !oracle()) {
      // KV shares the CNIC with the high-priority EP traffic of the same pass (PAPER.md §7):
      // it gets what the model class leaves, never less than the floor.
      double compute_guess =
          cost_.group_pass_s(attn, news * grp.count, static_cast<int>(grp.count));
      double model_bytes =
          news * static_cast<double>(cfg_.model.ep_bytes_per_token_per_layer) * cfg_.model.layers;
      double model_share = model_bytes / (cfg_.hw.cnic_bytes_per_s * std::max(compute_guess, 1e-9));
      double kv_rate = cfg_.hw.cnic_bytes_per_s * std::max(cfg_.kv_class_floor, 1.0 - model_share);
      max_xfer = std::max(max_xfer, std::max(in_bytes, out_bytes) / kv_rate);
    }
  }
  if (!any) return;
  double compute = cost_.group_pass_s(max_attn, total_new, static_cast<int>(grp.count));
  // Layer l+1's KV is in flight while layer l computes: the pass takes the longer of the two
  // streams plus one layer of pipeline fill.
  double t =
      std::max(compute, max_xfer) + std::min(compute, max_xfer) / cfg_.model.layers + max_h2d;
  passes_ += 1;
  pass_new_tokens_ += total_new;
  if (max_xfer > compute) transfer_bound_passes_ += 1;
  grp.busy = true;
  grp.busy_s += t;
  events_.push(now_ + t, kPassDone, gi);
}

void ClusterSim::on_pass_done(uint32_t gi) {
  PeGroup& grp = pe_groups_[gi];
  grp.busy = false;
  for (uint32_t i = 0; i < grp.count; ++i) {
    PeEngine& e = pes_[grp.first + i];
    for (const auto& it : grp.batches[i]) {
      Req& r = reqs_[it.agent];
      if (!oracle()) {
        if (!r.streamed_hit) {
          hops_.pe_h2d += pe_hit_bytes(r);
          hops_.de_to_pe += de_hit_bytes(r) + kv_bytes(r.dram_hit);
          if (layerwise()) hops_.pd_transfer += pe_hit_bytes(r);
        }
        if (layerwise()) hops_.pd_transfer += kv_bytes(it.new_tokens);
      }
      r.streamed_hit = true;
      r.cached += it.new_tokens;
      r.new_left -= it.new_tokens;
      PeEngine::Queued& q = e.find(it.agent);
      q.cached = r.cached;
      q.new_left = r.new_left;
      if (r.new_left > 0) continue;  // chunked: the rest stays queued, its KV is now cached
      e.fifo.erase(e.fifo.begin() + (&q - e.fifo.data()));
      sched_->prefill_finished(static_cast<int>(grp.first + i), r.prompt, r.pe_work);
      prefill_finished(it.agent);
    }
    grp.batches[i].clear();
  }
  try_start_pass(gi);
}

void ClusterSim::prefill_finished(uint32_t a) {
  Req& r = reqs_[a];
  r.prefilled = true;
  count_open(pes_[r.pe].node, -1);
  r.t_first = now_;  // the PE samples the first token at the end of the last layer
  record_first_token(r);
  if (r.dram_hit > 0) tier_set_lock(a, false, false);  // the PE has every layer of it
  if (!oracle() && r.pe_hit > 0) {
    Node& nd = nodes_[pe_node_of(r.pe)];
    nd.buffer_used -= pe_hit_bytes(r);
    admit_buffer_waiters(pe_node_of(r.pe));
  }
  if (r.hbm_reserved) begin_decode_copy(a);
  // else: grant_reservations() starts the copy once HBM frees up
}

void ClusterSim::begin_decode_copy(uint32_t a) {
  Req& r = reqs_[a];
  if (oracle()) {
    events_.push(now_, kDecodeStart, a);
    return;
  }
  DeEngine& e = des_[r.de];
  // Decode start: DE buffer -> DE HBM (Basic: PE HBM -> DE HBM, the PD transfer) over the DE's
  // CNIC, whole-prompt copies served in FIFO order.
  double start = std::max(now_, e.cnic_free_at);
  double dur = prompt_bytes(r) / cfg_.hw.cnic_bytes_per_s;
  e.cnic_free_at = start + dur;
  if (cfg_.scheduler.mode == Mode::kBasic) {
    hops_.pd_transfer += prompt_bytes(r);
  } else {
    hops_.de_h2d += prompt_bytes(r);
  }
  events_.push(start + dur, kDecodeStart, a);
}

void ClusterSim::grant_reservations(uint32_t de) {
  DeEngine& e = des_[de];
  while (!e.reserve_wait.empty()) {
    uint32_t a = e.reserve_wait.front();
    Req& r = reqs_[a];
    const double free = sched_->hbm_free(static_cast<int>(de));
    if (free < r.hbm_need && free < e.hbm_budget) break;
    e.reserve_wait.pop_front();
    sched_->reserve_hbm(static_cast<int>(de), r.hbm_need);
    r.hbm_reserved = true;
    if (r.prefilled) begin_decode_copy(a);
  }
}

void ClusterSim::on_decode_start(uint32_t a) {
  Req& r = reqs_[a];
  r.t_decode = now_;
  // The DE buffer is released once its KV is in HBM (DE path: the hit KV it read).
  if (layerwise() && !oracle() && r.de_hit > 0) {
    uint32_t node = de_node_of(r.de);
    nodes_[node].buffer_used -= de_hit_bytes(r);
    admit_buffer_waiters(node);
  }
  DeEngine& e = des_[r.de];
  e.decode.advance(now_);
  double step = cost_.decode_step_s(static_cast<int>(e.decode.active()) + 1,
                                    e.ctx_sum + static_cast<double>(r.prompt), e.ep_gpus);
  ttst_.push_back({now_ + step, static_cast<float>(now_ + step - r.t_first)});
  if (r.gen <= 1) {
    finish_turn(a);
    return;
  }
  e.ctx_sum += static_cast<double>(r.prompt);
  // The prompt rides with the job: its departure updates ctx_sum before reading the agent's Req.
  e.decode.add(a, static_cast<double>(r.gen - 1), static_cast<uint32_t>(r.prompt));
  reschedule_decode(r.de);
}

void ClusterSim::reschedule_decode(uint32_t de) {
  DeEngine& e = des_[de];
  e.decode.advance(now_);
  size_t n = e.decode.active();
  double step = n > 0 ? cost_.decode_step_s(static_cast<int>(n), e.ctx_sum, e.ep_gpus) : 0.0;
  e.decode.set_rate(step > 0 ? 1.0 / step : 0.0);
  double t = e.decode.next_departure();
  if (std::isfinite(t)) events_.push(t, kDecodeDone, de, e.decode.version());
}

void ClusterSim::on_decode_done(uint32_t de, uint64_t version) {
  DeEngine& e = des_[de];
  if (version != e.decode.version()) return;
  e.decode.advance(now_);
  uint32_t prompt = 0;
  uint32_t a = e.decode.pop(nullptr, &prompt);
  prefetch_req(a);  // finish_turn reads it once the next departure is scheduled
  e.ctx_sum -= static_cast<double>(prompt);
  reschedule_decode(de);
  finish_turn(a);
}

void ClusterSim::finish_turn(uint32_t a) {
  Req& r = reqs_[a];
  count_open(des_[r.de].node, -1);
  sched_->turn_finished(static_cast<int>(r.de), r.prompt + r.gen,
                        r.hbm_reserved ? r.hbm_need : 0.0);
  r.hbm_reserved = false;
  grant_reservations(r.de);

  turn_time_.push_back({now_, static_cast<float>(now_ - r.t_arrive)});
  if (r.gen > 1)
    tpot_.push_back({now_, static_cast<float>((now_ - r.t_decode) / static_cast<double>(r.gen - 1))});
  auto bucket = static_cast<size_t>(now_ / cfg_.timeseries_bucket_s);
  if (prompt_by_bucket_.size() <= bucket) prompt_by_bucket_.resize(bucket + 1, 0.0);
  prompt_by_bucket_[bucket] += static_cast<double>(r.prompt);

  // Persist the full blocks this turn added (prompt tail and generated tokens) through the DE
  // node's storage NIC; the next turn's hit is exactly the blocks stored so far.
  const int64_t block = cfg_.block_tokens;
  if (!r.addressed) {
    int64_t new_blocks = (r.prompt + r.gen) / block - (r.hit + r.recomputed_hit) / block;
    if (!oracle() && new_blocks > 0) write_bytes(de_node_of(r.de), kv_bytes(new_blocks * block));
    // The agent's KV in the store is now its whole context, read again by its next turn.
    const int64_t kv = (r.prompt + r.gen) / block * block;
    live_kv_tokens_ += static_cast<double>(kv - r.kv_tokens);
    r.kv_tokens = kv;
    if (!clocks_.empty()) {
      clocks_[a].in_turn = false;
      clocks_[a].last_end = now_;
    }
    if (store_bounded()) {
      StoreEntry& se = store_[a];
      const bool last = static_cast<uint32_t>(r.turn + 1) >= r.nturns;
      store_busy_tokens_ -= se.tokens;
      store_tokens_ -= se.tokens;  // replaced by its whole context
      se.tokens = 0;
      if (store_make_room(kv)) {
        se.tokens = kv;
        se.ended = last;
        store_tokens_ += kv;
        store_peak_tokens_ = std::max(store_peak_tokens_, static_cast<double>(store_tokens_));
        store_touch(a);
      } else {
        // Nothing left to evict (every other session is in a turn): not kept.
        ++store_rejected_;
        store_unlink(a);
        live_kv_tokens_ -= static_cast<double>(kv);
        r.kv_tokens = 0;
      }
      se.busy = false;  // (after make_room: it must not evict this session)
    }
    // The DE DRAM tier: the session's KV passed through its DE node's DRAM on its way to
    // storage; the node keeps it for the next turn (a last turn's is dropped: the session
    // ended).
    if (tier_on()) {
      if (static_cast<uint32_t>(r.turn + 1) < r.nturns) {
        tier_store(a, de_node_of(r.de), r.kv_tokens);  // 0: the store did not keep it
        if (tier_[a].node == kNone) tier_lost(a);  // no room now: a prefetch may find some
      } else if (tier_[a].node != kNone) {
        tier_remove(a);
      }
    }
  } else {
    // Content-addressed: the prompt's full blocks not stored yet (another request may have
    // stored some of them meanwhile). Generated tokens have no ids in the trace: no later
    // request can name them, so they are not stored.
    const AgentPlan& plan = agents_[a];
    int64_t fresh = 0;
    const int64_t full = r.prompt / plan.prefix_block_tokens;
    for (int64_t b = 0; b < full; ++b) {
      auto id = plan.prefix_blocks[static_cast<size_t>(b)];
      if (stored_block_[id]) continue;
      stored_block_[id] = true;
      ++fresh;
    }
    stored_blocks_ += fresh;
    live_kv_tokens_ += static_cast<double>(fresh * plan.prefix_block_tokens);
    if (!oracle() && fresh > 0) write_bytes(de_node_of(r.de), kv_bytes(fresh * plan.prefix_block_tokens));
  }

  ++turns_done_;
  const auto next = static_cast<uint32_t>(r.turn + 1);
  if (next < r.nturns) {
    __builtin_prefetch(&r.turns[next]);  // read by on_arrive, which writes requests_[a]
    __builtin_prefetch(&requests_[a], 1);
    double think = next < r.nthink ? r.think_s[next] : 0.0;
    events_.push(now_ + think, kArrive, a);
  } else {
    agent_finish_[a] = now_;
    --agents_left_;
    ++agents_finished_;
    finished_time_sum_ += now_ - agents_[a].start_s;
    if (!r.addressed) {
      live_kv_tokens_ -= static_cast<double>(r.kv_tokens);
      r.kv_tokens = 0;
    }
  }
}

void ClusterSim::record_first_token(const Req& r) {
  // Each part is the gap between two of the request's timestamps (see TtftBreakdown); a read
  // that never queued has t_read_start == t_admitted.
  const double read_start = std::max(r.t_read_start, r.t_admitted);
  first_tokens_.push_back(FirstToken{
      now_, static_cast<float>(r.t_first - r.t_arrive), static_cast<float>(r.t_pe - r.t_arrive),
      static_cast<float>(read_start - r.t_admitted), static_cast<float>(r.t_pass - r.t_read_done),
      static_cast<float>(r.t_assigned - r.t_pe), static_cast<float>(r.t_admitted - r.t_assigned),
      static_cast<float>(r.t_read_done - read_start), static_cast<float>(r.t_first - r.t_pass),
      r.hit + r.recomputed_hit > 0});
  // The stop rule sees the TTFT as stored (a float), as the report does; with slo_turns "hit",
  // only the turns that had a cached prefix.
  if (online_ && !trace_ && (!slo_hit_only_ || first_tokens_.back().hit))
    stop_rule_.add(now_, first_tokens_.back().ttft);
}

// Online: every check_interval_s, sample the working set and apply the stop rule of PAPER.md §9
// (OnlineConfig). A timestamped trace runs to its end (or the duration cap) instead.
void ClusterSim::on_check() {
  const OnlineConfig& o = cfg_.online;
  // The tier's expired sessions leave it (their DRAM is free for others).
  for (TierNode& n : tier_nodes_) {
    // Stored order is expiry order: walk the expired head, past the entries a turn or a
    // prefetch holds.
    for (uint32_t v = n.head; v != kNone && now_ > tier_[v].expire;) {
      const uint32_t next = tier_[v].next;
      if (!tier_[v].pinned && !tier_[v].staging) {
        ++tier_expired_;
        tier_remove(v);
        tier_lost(v);
      }
      v = next;
    }
  }
  gauges_.push_back({now_, live_kv_tokens_, static_cast<int>(agents_arrived_ - agents_finished_)});
  const std::string_view stop = stop_rule_.check(now_, !trace_);
  if (!stop.empty()) {
    stopped_ = true;
    stop_reason_ = std::string(stop);
    return;
  }
  if (!trace_) {
    // Only the last window is ever reported or watched: drop what is older.
    const double keep_from = now_ - o.window_s - o.check_interval_s;
    while (!first_tokens_.empty() && first_tokens_.front().t < keep_from) first_tokens_.pop_front();
    while (!ttst_.empty() && ttst_.front().t < keep_from) ttst_.pop_front();
    while (!tpot_.empty() && tpot_.front().t < keep_from) tpot_.pop_front();
    while (!turn_time_.empty() && turn_time_.front().t < keep_from) turn_time_.pop_front();
  }
  events_.push(now_ + o.check_interval_s, kCheck, 0);
}

void ClusterSim::write_bytes(uint32_t node, double bytes) {
  Node& nd = nodes_[node];
  hops_.persist += bytes;
  storage_write_ += bytes;
  nd.writes.advance(now_);
  nd.writes.add(0, bytes);
  reschedule_writes(node);
}

void ClusterSim::reschedule_writes(uint32_t node) {
  reschedule_link(nodes_[node].writes, kWriteDone, node);
}

void ClusterSim::on_write_done(uint32_t node, uint64_t version) {
  Node& nd = nodes_[node];
  if (version != nd.writes.version()) return;
  nd.writes.advance(now_);
  nd.writes.pop();
  reschedule_writes(node);
}

// The layouts a run may use: its own static split, and with adaptive P/D every static split of
// the same nodes that can run (the EP groups hold the weights), prefill nodes ascending. Their
// distinct groups become the scheduler's virtual node groups.
void ClusterSim::build_layouts() {
  phys_nodes_ = cfg_.prefill_nodes + cfg_.decode_nodes;
  std::vector<sched::PdLayout> layouts;
  if (cfg_.adaptive.enabled) {
    for (int p = 1; p < phys_nodes_; ++p) {
      SimConfig c = cfg_;
      c.prefill_nodes = p;
      c.decode_nodes = phys_nodes_ - p;
      c.adaptive.enabled = false;
      c.fit_ep_groups();
      if (!c.validate().is_ok()) continue;
      if (p == cfg_.prefill_nodes) layout_ = static_cast<int>(layouts.size());
      layouts.push_back(sched::static_pd_layout(phys_nodes_, p, c.pe_ep_nodes, c.de_ep_nodes));
    }
  } else {
    layouts.push_back(sched::static_pd_layout(phys_nodes_, cfg_.prefill_nodes, cfg_.pe_ep_nodes,
                                              cfg_.de_ep_nodes));
  }
  const int g = cfg_.hw.gpus_per_node;
  for (const sched::PdLayout& l : layouts) {
    std::vector<int> ids;
    int pe_gpus = 0;
    for (const sched::PdGroup& pg : l.groups) {
      int id = -1;
      for (size_t i = 0; i < vgroups_.size(); ++i) {
        const VGroup& v = vgroups_[i];
        if (v.prefill == pg.prefill && static_cast<int>(v.phys.front()) == pg.first_node &&
            static_cast<int>(v.vnodes) == pg.nodes)
          id = static_cast<int>(i);
      }
      if (id < 0) {
        VGroup v;
        v.prefill = pg.prefill;
        for (int n = pg.first_node; n < pg.first_node + pg.nodes; ++n)
          v.phys.push_back(static_cast<uint32_t>(n));
        v.vnodes = static_cast<uint32_t>(pg.nodes);
        v.ep_gpus = pg.nodes * g;
        id = static_cast<int>(vgroups_.size());
        vgroups_.push_back(std::move(v));
      }
      ids.push_back(id);
      if (pg.prefill) pe_gpus += pg.nodes * g;
    }
    layout_groups_.push_back(std::move(ids));
    layout_pe_gpus_.push_back(pe_gpus);
  }
}

void ClusterSim::on_pd_check() {
  if (agents_left_ == 0) return;
  if (!tr_.active) {
    const double since =
        last_change_ < 0 ? std::numeric_limits<double>::infinity() : now_ - last_change_;
    const int next = sched::decide_pd(cfg_.adaptive.controller, sched::pd_pressure(*sched_), layout_,
                                      static_cast<int>(layout_groups_.size()), since,
                                      cfg_.adaptive.switch_s);
    if (next != layout_) begin_transition(next);
  }
  // Nothing else pending: the run is over or stalled, and the run loop reports which.
  if (!events_.empty() || tr_.active)
    events_.push(now_ + cfg_.adaptive.controller.interval_s, kPdCheck, 0);
}

// The groups that leave stop taking work: prefill groups first, so that what they hold still
// finds a DE; the decode groups that leave stop once those have drained. A node that has
// drained restarts in its new group when all of that group's nodes have.
void ClusterSim::begin_transition(int to) {
  tr_ = Transition{};
  tr_.active = true;
  tr_.to = to;
  tr_.started = now_;
  const auto& cur = layout_groups_[static_cast<size_t>(layout_)];
  const auto& next = layout_groups_[static_cast<size_t>(to)];
  auto has = [](const std::vector<int>& v, int x) {
    return std::find(v.begin(), v.end(), x) != v.end();
  };
  for (int gi : cur) {
    if (has(next, gi)) continue;
    (vgroups_[static_cast<size_t>(gi)].prefill ? tr_.leave_pe : tr_.leave_de).push_back(gi);
  }
  for (int gi : next)
    if (!has(cur, gi)) tr_.join.push_back(gi);
  for (int gi : tr_.leave_pe) kill_group(gi);
  tr_.stage = 1;
  advance_transition();
}

void ClusterSim::kill_group(int gi) {
  VGroup& vg = vgroups_[static_cast<size_t>(gi)];
  vg.alive = false;
  vg.alive_s += now_ - vg.alive_since;
  for (uint32_t v = vg.first_vnode; v < vg.first_vnode + vg.vnodes; ++v)
    sched_->set_node_alive(static_cast<int>(v), false);
  if (sched_->has_queued()) ensure_tick();  // a dead DE group's queue went back to the global one
}

bool ClusterSim::drained(int gi) const {
  const VGroup& vg = vgroups_[static_cast<size_t>(gi)];
  if (vg.open > 0) return false;
  if (vg.prefill && pe_groups_[vg.sim_group].busy) return false;
  for (uint32_t v = vg.first_vnode; v < vg.first_vnode + vg.vnodes; ++v) {
    const Node& nd = nodes_[v];
    if (!nd.reads.idle() || !nd.writes.idle() || !nd.buffer_wait.empty()) return false;
  }
  return true;
}

void ClusterSim::free_group(int gi) {
  tr_.freed.push_back(gi);
  for (uint32_t p : vgroups_[static_cast<size_t>(gi)].phys) {
    owner_[p] = -1;
    left_group_[p] = gi;
    freed_at_[p] = now_;
  }
  record_pd_point();
}

void ClusterSim::advance_transition() {
  auto freed = [&](int gi) {
    return std::find(tr_.freed.begin(), tr_.freed.end(), gi) != tr_.freed.end();
  };
  if (tr_.stage == 1) {
    bool all = true;
    for (int gi : tr_.leave_pe) {
      if (freed(gi)) continue;
      if (drained(gi)) {
        free_group(gi);
      } else {
        all = false;
      }
    }
    if (all) {
      tr_.stage = 2;
      for (int gi : tr_.leave_de) kill_group(gi);
    }
  }
  if (tr_.stage == 2) {
    for (int gi : tr_.leave_de)
      if (!freed(gi) && drained(gi)) free_group(gi);
  }
  for (int gi : tr_.join) {
    if (std::find(tr_.scheduled.begin(), tr_.scheduled.end(), gi) != tr_.scheduled.end()) continue;
    const VGroup& vg = vgroups_[static_cast<size_t>(gi)];
    bool ready = true, reload = false;
    for (uint32_t p : vg.phys) {
      ready = ready && owner_[p] < 0;
      const int left = left_group_[p];
      reload = reload || left < 0 || vgroups_[static_cast<size_t>(left)].ep_gpus != vg.ep_gpus;
    }
    if (!ready) continue;
    // The engine restarts in its role; with a new EP size each GPU loads its new weight shard
    // first, the node's GPUs together over its storage NIC.
    double t = cfg_.adaptive.switch_s;
    if (reload)
      t += cfg_.model.weight_bytes_per_gpu(vg.ep_gpus) * cfg_.hw.gpus_per_node / snic_rate();
    tr_.scheduled.push_back(gi);
    events_.push(now_ + t, kActivate, static_cast<uint32_t>(gi));
  }
}

void ClusterSim::on_activate(int gi) {
  VGroup& vg = vgroups_[static_cast<size_t>(gi)];
  vg.alive = true;
  vg.alive_since = now_;
  for (uint32_t v = vg.first_vnode; v < vg.first_vnode + vg.vnodes; ++v)
    sched_->set_node_alive(static_cast<int>(v), true);
  auto role = [](bool prefill) { return std::string(prefill ? "prefill" : "decode"); };
  for (uint32_t p : vg.phys) {
    owner_[p] = gi;
    const VGroup& left = vgroups_[static_cast<size_t>(left_group_[p])];
    RoleChange c{now_,       static_cast<int>(p),      role(left.prefill), role(vg.prefill),
                 freed_at_[p] - tr_.started, now_ - freed_at_[p], left.ep_gpus, vg.ep_gpus};
    (left.prefill == vg.prefill ? ep_regroups_ : role_changes_).push_back(std::move(c));
  }
  if (++tr_.activated == static_cast<int>(tr_.join.size())) {
    layout_ = tr_.to;
    tr_.active = false;
    last_change_ = now_;
  }
  record_pd_point();
  if (sched_->has_queued()) ensure_tick();
}

void ClusterSim::record_pd_point() {
  PdPoint pt;
  pt.t_s = now_;
  for (int o : owner_) {
    if (o < 0) {
      pt.switching_nodes++;
    } else {
      (vgroups_[static_cast<size_t>(o)].prefill ? pt.prefill_nodes : pt.decode_nodes)++;
    }
  }
  if (!pd_points_.empty()) {
    const PdPoint& last = pd_points_.back();
    if (last.prefill_nodes == pt.prefill_nodes && last.decode_nodes == pt.decode_nodes &&
        last.switching_nodes == pt.switching_nodes)
      return;
    if (last.t_s == pt.t_s) pd_points_.pop_back();
  }
  pd_points_.push_back(pt);
}

Result<SimResult> ClusterSim::run() {
  auto wall0 = std::chrono::steady_clock::now();
  auto last_progress = wall0;
  build();
  while (!events_.empty() && agents_left_ > 0 && !stopped_) {
    Event ev = events_.pop();
    now_ = ev.t;
    // The state the next event reads is scattered over tens of megabytes (per agent, node and
    // engine): ask for its first line now, to arrive while this event is handled.
    if (const Event* next = events_.peek()) prefetch_for(*next);
    switch (ev.kind) {
      case kArrive:
        on_arrive(ev.a);
        break;
      case kTick:
        on_tick();
        break;
      case kReadDone:
        on_read_done(ev.a, ev.b);
        break;
      case kWriteDone:
        on_write_done(ev.a, ev.b);
        break;
      case kPassDone:
        on_pass_done(ev.a);
        break;
      case kDecodeStart:
        on_decode_start(ev.a);
        break;
      case kDecodeDone:
        on_decode_done(ev.a, ev.b);
        break;
      case kCheck:
        on_check();
        break;
      case kPdCheck:
        on_pd_check();
        break;
      case kActivate:
        on_activate(static_cast<int>(ev.a));
        break;
      case kPrefetchDone:
        on_prefetch_done(ev.a, ev.b);
        break;
      case kPrefetchDue:
        on_prefetch_due(ev.a);
        break;
      default:
        return Status::internal(fmt::format("unknown event kind {}", ev.kind));
    }
    if (tr_.active) advance_transition();
    if (opt_.progress && (events_.popped() & 0xffff) == 0) {
      auto t = std::chrono::steady_clock::now();
      if (std::chrono::duration<double>(t - last_progress).count() >= opt_.progress_interval_s) {
        last_progress = t;
        opt_.progress(now_, turns_done_, turns_total_);
      }
    }
  }
  if (agents_left_ > 0 && !stopped_) {
    return Status::internal(fmt::format(
        "simulation stalled at t={:.1f}s with {} agents unfinished ({} of {} turns done); "
        "this is a bug: please report the config and seed",
        now_, agents_left_, turns_done_, turns_total_));
  }
  double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
  return collect(wall);
}

// The latencies, the SLO and the working set over the reported window: the last window of an
// online run; every request offline and for a timestamped trace.
void ClusterSim::collect_latencies(SimResult& res) const {
  const OnlineConfig& o = cfg_.online;
  const bool windowed = online_ && !trace_;
  res.online = online_;
  res.report_to_s = now_;
  res.report_from_s = windowed ? std::max(0.0, now_ - o.window_s) : 0.0;
  const double from = windowed ? now_ - o.window_s : -1.0;
  std::vector<double> ttft;
  ttft.reserve(first_tokens_.size());
  for (const FirstToken& f : first_tokens_)
    if (f.t > from) ttft.push_back(f.ttft);
  res.ttft = summarize(std::move(ttft));
  {
    // Turns with a cached prefix, and the rest (a session's first turn, all prefill).
    std::vector<double> hit, first;
    for (const FirstToken& f : first_tokens_) {
      if (f.t <= from) continue;
      (f.hit ? hit : first).push_back(f.ttft);
    }
    res.ttft_hit = summarize(std::move(hit));
    res.ttft_first = summarize(std::move(first));
  }
  // The mean breakdown of every reported request, and of the tail: those at or above the p99.
  auto breakdown = [&](double min_ttft) {
    TtftBreakdown b;
    double n = 0;
    for (const FirstToken& f : first_tokens_) {
      if (f.t <= from || f.ttft < min_ttft) continue;
      b.scheduler_queue += f.scheduler_queue;
      b.read_queue += f.read_queue;
      b.engine_queue += f.engine_queue;
      b.hbm_wait += f.hbm_wait;
      b.buffer_wait += f.buffer_wait;
      b.read += f.read;
      b.prefill += f.prefill;
      n += 1;
    }
    if (n > 0) {
      for (double* part : {&b.scheduler_queue, &b.read_queue, &b.engine_queue, &b.hbm_wait,
                           &b.buffer_wait, &b.read, &b.prefill})
        *part /= n;
    }
    b.schedule = b.scheduler_queue + b.read_queue + b.engine_queue;
    b.allocate = b.hbm_wait + b.buffer_wait;
    return b;
  };
  res.ttft_breakdown = breakdown(-1.0);
  // float samples against a double percentile: compare in float, as they were stored.
  res.ttft_tail_breakdown = breakdown(static_cast<float>(res.ttft.p99));
  auto values = [from](const SampleLog<Sample>& log) {
    std::vector<double> v;
    v.reserve(log.size());
    for (const Sample& x : log)
      if (x.t > from) v.push_back(x.v);
    return v;
  };
  res.ttst = summarize(values(ttst_));
  res.tpot = summarize(values(tpot_));
  res.ttft_p50_s = res.ttft.p50;
  res.ttft_p99_s = res.ttft.p99;
  res.ttft_mean_s = res.ttft.mean;
  res.ttst_p50_s = res.ttst.p50;
  res.tpot_p50_s = res.tpot.p50;
  res.tpot_p99_s = res.tpot.p99;

  res.aps = o.aps;
  res.slo_statistic = o.slo_statistic;
  res.slo_ttft_s = o.slo_ttft_s;
  res.slo_tpot_s = o.slo_tpot_s;
  res.stop_reason = stopped_ ? stop_reason_ : (trace_ ? "trace_end" : "all_done");
  res.slo_turns = o.slo_turns;
  const LatencyStats& judged = o.slo_turns == "hit" ? res.ttft_hit : res.ttft;
  res.slo_met = judged.count > 0 && sim::slo_met(o, res.stop_reason, judged.get(o.slo_statistic),
                                                 res.tpot.get(o.slo_statistic));
  res.agents_arrived = agents_arrived_;
  res.agents_finished = agents_finished_;
  res.finished_agent_time_mean_s =
      agents_finished_ > 0 ? finished_time_sum_ / static_cast<double>(agents_finished_) : 0;
  res.agent_length_mean_tokens =
      agents_arrived_ > 0 ? arrived_length_sum_ / static_cast<double>(agents_arrived_) : 0;
  res.hit_ratio = prompt_tokens_ > 0 ? hit_tokens_ / prompt_tokens_ : 0;
  res.stored_blocks = stored_blocks_;
  const double bpt = static_cast<double>(cfg_.model.stored_bytes_per_token());
  if (trace_) {
    res.working_set_bytes = live_kv_tokens_ * bpt;  // every stored block stays hit-eligible
  } else if (online_) {
    double kv = 0, running = 0, n = 0;
    for (const Gauge& g : gauges_) {
      if (g.t <= from) continue;
      kv += g.live_kv_tokens;
      running += g.running;
      n += 1;
    }
    if (n > 0) {
      res.working_set_bytes = kv / n * bpt;
      res.running_agents_mean = running / n;
    }
    // PAPER.md §10.8: aps * T * len / 2. T, an agent's mean lifetime, is its mean number of turns
    // times the mean turn time of the window (plus its think times): agents that have not finished
    // yet count too, where a mean over finished agents would favour the short ones.
    const double turn_s = mean(values(turn_time_));
    res.agent_time_mean_s =
        agents_arrived_ > 0 ? arrived_turns_sum_ / static_cast<double>(agents_arrived_) * turn_s +
                                  arrived_think_sum_ / static_cast<double>(agents_arrived_)
                            : 0;
    res.working_set_formula_bytes =
        o.aps * res.agent_time_mean_s * res.agent_length_mean_tokens / 2 * bpt;
  }
}

SimResult ClusterSim::collect(double wall_s) {
  SimResult res;
  res.mode = std::string(mode_name(cfg_.scheduler.mode));
  res.model = cfg_.model.name;
  res.pd = cfg_.pd_label();
  res.dataset = cfg_.dataset;
  res.agents = static_cast<int>(agents_.size());
  res.turns = turns_done_;
  res.jct_s = now_;
  res.prompt_tokens = prompt_tokens_;
  res.hit_tokens = hit_tokens_;
  res.prompt_tokens_per_s = now_ > 0 ? prompt_tokens_ / now_ : 0;
  collect_latencies(res);
  res.hops = hops_;
  res.storage_read_bytes = hops_.storage_read_pe + hops_.storage_read_de;
  res.storage_write_bytes = storage_write_;
  res.pe_path_turns = pe_path_;
  res.de_path_turns = de_path_;
  res.split_path_turns = split_path_;
  res.hit_source_tokens = {src_dram_, src_pe_storage_, src_de_storage_, src_recompute_};
  if (store_bounded()) {
    const double bpt = static_cast<double>(cfg_.model.stored_bytes_per_token());
    StoreStats& st = res.store;
    st.bounded = true;
    st.capacity_bytes = cfg_.store_capacity_bytes;
    st.evict = cfg_.evict;
    st.evicted_bytes = store_evicted_tokens_ * bpt;
    st.evicted_sessions = store_evicted_sessions_;
    st.peak_bytes = store_peak_tokens_ * bpt;
    st.rejected_sessions = store_rejected_;
    st.evicted_running_sessions = store_evicted_running_;
  }
  res.recompute_turns = recompute_turns_;
  if (tier_on()) {
    tier_account();
    DramTierStats& t = res.dram_tier;
    t.enabled = true;
    t.bytes_per_node = cfg_.de_dram_bytes;
    t.ttl_s = cfg_.de_dram_ttl_s;
    t.peak_bytes = tier_peak_;
    t.mean_bytes = now_ > 0 ? tier_used_integral_ / now_ : 0;
    t.hits = tier_hits_;
    t.misplaced = tier_misplaced_;
    t.expired = tier_expired_;
    t.evicted = tier_evicted_;
    t.stored = tier_stored_;
    t.prefetch = cfg_.prefetch;
    t.prefetches = prefetches_;
    t.prefetch_skipped = prefetch_skipped_;
    t.prefetch_used_bytes = prefetch_used_bytes_;
    res.prefetch_bytes = prefetch_bytes_;
    res.prefetch_wasted_bytes = prefetch_wasted_bytes_;
  }
  res.split_read_bytes_pe = split_bytes_pe_;
  res.split_read_bytes_de = split_bytes_de_;
  res.sim_events = events_.popped();
  res.prefill_passes = passes_;
  res.new_tokens_per_pass = passes_ > 0 ? pass_new_tokens_ / static_cast<double>(passes_) : 0;
  res.transfer_bound_passes = transfer_bound_passes_;
  if (engine_passes_ > 0) {
    const auto n = static_cast<double>(engine_passes_);
    res.ready_requests_per_engine_pass = ready_requests_ / n;
    res.batched_requests_per_engine_pass = batched_requests_ / n;
    res.quota_bound_fraction = static_cast<double>(quota_bound_engine_passes_) / n;
  }
  res.wall_s = wall_s;

  // Floors: storage bytes over the usable storage bandwidth of the nodes allowed to read, and
  // the prefill work at its best efficiency spread over every PE GPU.
  // Adaptive P/D: the floors take the most PE GPUs any layout has (they stay lower bounds).
  int readers = dual() ? cfg_.prefill_nodes + cfg_.decode_nodes : cfg_.prefill_nodes;
  res.io_floor_s = res.storage_read_bytes / (snic_rate() * readers);
  res.compute_floor_s =
      compute_floor_work_s_ /
      static_cast<double>(*std::max_element(layout_pe_gpus_.begin(), layout_pe_gpus_.end()));
  res.chain_floor_s = chain_floor();
  double busy = 0, alive_s = 0;
  for (const auto& g : pe_groups_) busy += g.busy_s;
  for (const VGroup& vg : vgroups_)
    if (vg.prefill) alive_s += vg.alive_s + (vg.alive ? now_ - vg.alive_since : 0.0);
  res.pe_busy_fraction = alive_s > 0 ? busy / alive_s : 0;
  res.adaptive_pd = cfg_.adaptive.enabled;
  res.role_changes = role_changes_;
  res.ep_regroups = ep_regroups_;
  if (cfg_.adaptive.enabled) {
    record_pd_point();
    res.pd_over_time = pd_points_;
    // The end of the run, as a last point.
    if (res.pd_over_time.back().t_s < now_) {
      PdPoint end = res.pd_over_time.back();
      end.t_s = now_;
      res.pd_over_time.push_back(end);
    }
  }

  // Time series and SNIC balance: max/avg of per-node read throughput over the nodes allowed to
  // read, averaged over the buckets of the busy period (the first 90 % of the run; the drain at
  // the end is underloaded, where the ratio means little, PAPER.md §10.6).
  size_t buckets = static_cast<size_t>(now_ / cfg_.timeseries_bucket_s) + 1;
  // The agents running over a bucket (started before its end, not finished before it) counted
  // from the sorted start and finish times: an agent finishes no earlier than it starts, so those
  // started before t_end less those finished before it (a scan per bucket took seconds at 49k
  // agents and thousands of buckets).
  std::vector<double> starts(agents_.size()), finishes(agent_finish_);
  for (size_t a = 0; a < agents_.size(); ++a) starts[a] = agents_[a].start_s;
  std::sort(starts.begin(), starts.end());
  std::sort(finishes.begin(), finishes.end());
  double ratio_sum = 0, ratio_n_bytes = 0;
  for (size_t b = 0; b < buckets; ++b) {
    TimePoint tp;
    tp.t_s = static_cast<double>(b) * cfg_.timeseries_bucket_s;
    double total = 0, mx = 0;
    std::vector<double> phys_bytes(static_cast<size_t>(phys_nodes_), 0.0);
    for (size_t n = 0; n < nodes_.size(); ++n) {
      const auto& v = nodes_[n].read_bytes_by_bucket;
      phys_bytes[phys_of_[n]] += b < v.size() ? v[b] : 0.0;
    }
    for (int n = 0; n < phys_nodes_; ++n) {
      const double bytes = phys_bytes[static_cast<size_t>(n)];
      tp.snic_read_gbps.push_back(bytes * 8 / 1e9 / cfg_.timeseries_bucket_s);
      if (n < readers) {
        total += bytes;
        mx = std::max(mx, bytes);
      }
    }
    double t_end = tp.t_s + cfg_.timeseries_bucket_s;
    const auto started = std::lower_bound(starts.begin(), starts.end(), t_end) - starts.begin();
    const auto finished =
        std::lower_bound(finishes.begin(), finishes.end(), t_end) - finishes.begin();
    tp.running_agents = static_cast<int>(started - finished);
    tp.prompt_tokens_per_s =
        (b < prompt_by_bucket_.size() ? prompt_by_bucket_[b] : 0.0) / cfg_.timeseries_bucket_s;
    if (total > 0 && t_end <= 0.9 * now_) {
      // Byte-weighted: sum of per-bucket maxima over sum of per-bucket means, so that the
      // nearly empty start-up buckets (first rounds hit nothing) do not dominate.
      ratio_sum += mx;
      ratio_n_bytes += total / readers;
    }
    res.timeseries.push_back(std::move(tp));
  }
  res.snic_read_max_over_avg = ratio_n_bytes > 0 ? ratio_sum / ratio_n_bytes : 0.0;
  return res;
}

}  // namespace

sched::TypicalTurn typical_turn(const std::vector<AgentPlan>& agents) {
  double mean_ctx = 0, mean_new = 0, n = 0;
  for (const auto& ag : agents) {
    for (const auto& t : ag.turns) {
      mean_ctx += static_cast<double>(t.context_tokens);
      mean_new += static_cast<double>(t.prompt_tokens - t.context_tokens);
      n += 1;
    }
  }
  if (n > 0) {
    mean_ctx /= n;
    mean_new /= n;
  }
  return {static_cast<int64_t>(mean_ctx), static_cast<int64_t>(mean_new)};
}

Result<SimResult> simulate(const SimConfig& cfg,
                           const std::vector<AgentPlan>& agents,
                           const SimOptions& options) {
  DP_RETURN_IF_ERROR(cfg.validate());
  if (agents.empty()) return Status::invalid_argument("no agents to simulate: workload.agents must be at least 1");
  ClusterSim sim(cfg, agents, options);
  return sim.run();
}

}  // namespace dualpath::sim
