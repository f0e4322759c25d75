// The stateful cluster scheduler (PAPER.md §8) on hand-made clusters: what it places, when, and
// how its ledger and liveness steer the next decisions.
#include "sched/cluster_scheduler.h"

#include "sched/turn_plan.h"

#include <gtest/gtest.h>

namespace dualpath::sched {
namespace {

ClusterShape two_by_two() {
  return {.prefill_nodes = 2, .decode_nodes = 2, .pe_engines_per_node = 1,
          .de_engines_per_node = 1, .pe_ep_nodes = 1, .de_ep_nodes = 1};
}

ClusterSchedulerParams paper(double hbm = 100) {
  ClusterSchedulerParams p;
  p.engines = EnginePolicy::kPaper;
  p.paths = PathPolicy::kShortestQueue;
  p.pe = {.alpha_tokens = 1000, .beta_tokens = 100000};
  p.de_hbm_bytes = hbm;
  return p;
}

SchedRequest req(int64_t id, int64_t prompt = 100, int64_t hit = 90, double hbm = 10) {
  return {id, prompt, 10, hit, hbm, {}};
}

TEST(ClusterScheduler, PaperPolicyPlacesQueuedRequestsAtTheNextFetch) {
  ClusterScheduler s(two_by_two(), paper());
  EXPECT_FALSE(s.submit(req(1)).has_value());
  EXPECT_FALSE(s.submit(req(2)).has_value());
  EXPECT_EQ(s.queued(), 2u);
  FetchResult f = s.fetch();
  ASSERT_EQ(f.placed.size(), 2u);
  EXPECT_EQ(f.pe_assigned.size(), 2u);
  EXPECT_FALSE(s.has_queued());
  // Two PE groups take turns: one request each.
  EXPECT_NE(f.placed[0].pe, f.placed[1].pe);
  EXPECT_NE(f.placed[0].de, f.placed[1].de);
  for (const Placement& p : f.placed) {
    EXPECT_EQ(p.read_tokens, 90);
    EXPECT_TRUE(p.path == ReadPath::kPe || p.path == ReadPath::kDe);
  }
  EXPECT_EQ(s.pe_load(f.placed[0].pe).tok, 100);
  EXPECT_EQ(s.de_load(f.placed[0].de).tok, 110);
  EXPECT_DOUBLE_EQ(s.hbm_free(f.placed[0].de), 90);
}

TEST(ClusterScheduler, ARequestWaitsForDeHbmUntilATurnFinishes) {
  ClusterScheduler s({.prefill_nodes = 1, .decode_nodes = 1}, paper(/*hbm=*/15));
  s.submit(req(1));
  s.submit(req(2));
  FetchResult f = s.fetch();
  ASSERT_EQ(f.placed.size(), 1u);     // 10 of 15 bytes taken; the second needs 10 more
  EXPECT_EQ(f.pe_assigned.size(), 2u);  // both have a PE already
  EXPECT_TRUE(s.has_queued());
  EXPECT_EQ(s.queued_pe(2), 0);
  EXPECT_TRUE(s.fetch().placed.empty());
  s.turn_finished(f.placed[0].de, 110, 10);
  FetchResult g = s.fetch();
  ASSERT_EQ(g.placed.size(), 1u);
  EXPECT_EQ(g.placed[0].request_id, 2);
}

TEST(ClusterScheduler, TheReadPathFollowsTheLedgerAndTheReportedQueue) {
  ClusterScheduler s({.prefill_nodes = 1, .decode_nodes = 1}, paper());
  // Nodes: 0 = prefill, 1 = decode. Empty queues tie, and ties go to the DE side.
  s.submit(req(1));
  Placement p1 = s.fetch().placed.at(0);
  EXPECT_EQ(p1.path, ReadPath::kDe);
  EXPECT_EQ(s.read_queue(1), 90);
  // The DE node's read is still queued, so the next one reads on the PE side.
  s.submit(req(2));
  EXPECT_EQ(s.fetch().placed.at(0).path, ReadPath::kPe);
  s.read_finished(1, 90);
  s.read_finished(0, 90);
  EXPECT_EQ(s.read_queue(0), 0);
  // A report of a long queue on the decode node counts even with an empty ledger.
  s.set_reported_read_queue(1, 5000);
  EXPECT_EQ(s.read_queue(1), 5000);
  s.submit(req(3));
  EXPECT_EQ(s.fetch().placed.at(0).path, ReadPath::kPe);
}

TEST(ClusterScheduler, AFixedPathIsKeptAndRecomputeReadsNothing) {
  ClusterScheduler s(two_by_two(), paper());
  SchedRequest r = req(1);
  r.path = ReadPath::kRecompute;
  s.submit(r);
  Placement p = s.fetch().placed.at(0);
  EXPECT_EQ(p.path, ReadPath::kRecompute);
  EXPECT_EQ(p.read_tokens, 0);
  for (int n = 0; n < s.nodes(); ++n) EXPECT_EQ(s.read_queue(n), 0);
}

TEST(ClusterScheduler, AHitInADecodeNodesDramIsPushedFromThereWithNoStorageRead) {
  // Nodes 0, 1 prefill; 2, 3 decode (one DE group each). The session's KV is in node 3's DRAM.
  ClusterScheduler s(two_by_two(), paper());
  SchedRequest r = req(1);
  r.dram_node = 3;
  r.dram_tokens = 90;
  s.submit(r);
  Placement p = s.fetch().placed.at(0);
  EXPECT_EQ(s.de_node_of(p.de), 3);
  EXPECT_EQ(p.path, ReadPath::kDe);
  EXPECT_EQ(p.dram_tokens, 90);
  EXPECT_EQ(p.read_tokens, 0);
  for (int n = 0; n < s.nodes(); ++n) EXPECT_EQ(s.read_queue(n), 0);
  const TurnPlan plan = plan_turn(r, p);
  EXPECT_EQ(plan.de_dram, (ReadRange{0, 90}));
  EXPECT_TRUE(plan.pe_read.empty() && plan.de_read.empty());
  EXPECT_TRUE(plan.de_pushes_layers);
  EXPECT_NE(to_string(plan).find("de_dram [0, 90)"), std::string::npos);

  // Part of the hit in DRAM: the rest is read from storage after it.
  SchedRequest q = req(2, 300, 256);
  q.dram_node = 2;
  q.dram_tokens = 128;
  s.submit(q);
  Placement pq = s.fetch().placed.at(0);
  EXPECT_EQ(s.de_node_of(pq.de), 2);
  EXPECT_EQ(pq.dram_tokens, 128);
  EXPECT_EQ(pq.read_tokens, 128);
  const TurnPlan plan_q = plan_turn(q, pq);
  EXPECT_EQ(plan_q.de_dram, (ReadRange{0, 128}));
  EXPECT_EQ(plan_q.pe_read.tokens() + plan_q.de_read.tokens(), 128);
  EXPECT_EQ(std::max(plan_q.pe_read.end_tokens, plan_q.de_read.end_tokens), 256);
}

TEST(ClusterScheduler, AutoRecomputeWhenTheReadQueueMakesReadingSlower) {
  ClusterSchedulerParams params = paper();
  params.recompute_auto = true;
  params.read_tokens_per_s = 1000;  // 90 tokens: 0.09 s on an idle node
  ClusterScheduler s({.prefill_nodes = 1, .decode_nodes = 1}, params);
  SchedRequest r = req(1);
  r.recompute_extra_s = 0.5;
  r.pe_work_s = 0.01;  // its own prefill work, in the cost model's seconds
  s.submit(r);
  Placement p = s.fetch().placed.at(0);
  EXPECT_EQ(p.path, ReadPath::kDe);  // idle: reading is sooner
  EXPECT_EQ(p.read_tokens, 90);
  // Both nodes now queue 2,000 tokens: 2 s behind them, recompute (0.5 s) wins and reads nothing.
  s.set_reported_read_queue(0, 2000);
  s.set_reported_read_queue(1, 2000);
  r.id = 2;
  s.submit(r);
  p = s.fetch().placed.at(0);
  EXPECT_EQ(p.path, ReadPath::kRecompute);
  EXPECT_EQ(p.read_tokens, 0);
  EXPECT_EQ(plan_turn(r, p).hit_tokens, 0);
  // A request that fixed its path is not second-guessed.
  r.id = 3;
  r.path = ReadPath::kPe;
  s.submit(r);
  EXPECT_EQ(s.fetch().placed.at(0).path, ReadPath::kPe);
}

TEST(ClusterScheduler, SplitReadsChargeEachSidesPartToItsOwnNode) {
  ClusterSchedulerParams params = paper();
  params.paths = PathPolicy::kSplit;
  params.block_tokens = 10;
  params.split_min_tokens = 20;
  ClusterScheduler s({.prefill_nodes = 1, .decode_nodes = 1}, params);
  // Empty queues: the 9 blocks split 5 / 4 (the PE side takes the odd one).
  s.submit(req(1, 100, 90));
  Placement p = s.fetch().placed.at(0);
  EXPECT_EQ(p.path, ReadPath::kSplit);
  EXPECT_EQ(p.pe_read_tokens, 50);
  EXPECT_EQ(p.de_read_tokens, 40);
  EXPECT_EQ(p.read_tokens, 90);
  EXPECT_EQ(s.read_queue(0), 50);
  EXPECT_EQ(s.read_queue(1), 40);
  // The next request balances against those parts: PE 50 + x = DE 40 + (90 - x) -> x = 40.
  s.submit(req(2, 100, 90));
  Placement q = s.fetch().placed.at(0);
  EXPECT_EQ(q.pe_read_tokens, 40);
  EXPECT_EQ(q.de_read_tokens, 50);
  EXPECT_EQ(s.read_queue(0), s.read_queue(1));
  s.read_finished(0, 90);
  s.read_finished(1, 90);
  EXPECT_EQ(s.read_queue(0) + s.read_queue(1), 0);
  // A short hit (2 blocks, under twice the 2-block minimum) is read whole.
  s.submit(req(3, 100, 20));
  Placement r = s.fetch().placed.at(0);
  EXPECT_NE(r.path, ReadPath::kSplit);
  EXPECT_EQ(r.pe_read_tokens + r.de_read_tokens, 20);
}

TEST(ClusterScheduler, AForcedSplitSplitsAnyTwoBlocks) {
  ClusterSchedulerParams params = paper();  // shortest queue, but the request forces a split
  params.block_tokens = 10;
  params.split_min_tokens = 1000;
  ClusterScheduler s({.prefill_nodes = 1, .decode_nodes = 1}, params);
  SchedRequest r = req(1, 100, 20);
  r.path = ReadPath::kSplit;
  s.submit(r);
  Placement p = s.fetch().placed.at(0);
  EXPECT_EQ(p.path, ReadPath::kSplit);
  EXPECT_EQ(p.pe_read_tokens, 10);
  EXPECT_EQ(p.de_read_tokens, 10);
}

TEST(ClusterScheduler, DeadNodesGetNoWorkUntilTheyComeBack) {
  ClusterScheduler s(two_by_two(), paper());
  s.set_node_alive(0, false);  // prefill node 0
  s.set_node_alive(2, false);  // decode node 0 (global node P + 0)
  for (int i = 0; i < 4; ++i) s.submit(req(i));
  FetchResult f = s.fetch();
  ASSERT_EQ(f.placed.size(), 4u);
  for (const Placement& p : f.placed) {
    EXPECT_EQ(s.pe_node_of(p.pe), 1);
    EXPECT_EQ(s.de_node_of(p.de), 3);
  }
  s.set_node_alive(0, true);
  s.set_node_alive(2, true);
  s.submit(req(8));
  s.submit(req(9));
  FetchResult g = s.fetch();
  ASSERT_EQ(g.placed.size(), 2u);
  // Each PE group takes one again, and phase 1 sends both to the idle DE group.
  EXPECT_NE(s.pe_node_of(g.placed[0].pe), s.pe_node_of(g.placed[1].pe));
  EXPECT_EQ(s.de_node_of(g.placed[0].de), 2);
  EXPECT_EQ(s.de_node_of(g.placed[1].de), 2);
}

TEST(ClusterScheduler, RoundRobinPlacesAtOnceAndSkipsDeadEngines) {
  ClusterSchedulerParams p = paper();
  p.engines = EnginePolicy::kRoundRobin;
  p.paths = PathPolicy::kAlternate;
  ClusterScheduler s(two_by_two(), p);
  auto a = s.submit(req(1));
  auto b = s.submit(req(2));
  ASSERT_TRUE(a && b);
  EXPECT_NE(a->pe, b->pe);
  EXPECT_NE(a->path, b->path);  // the sides alternate
  EXPECT_FALSE(s.has_queued());
  s.set_node_alive(s.pe_node_of(0), false);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(s.submit(req(10 + i))->pe, 1);
  s.set_node_alive(s.pe_node_of(1), false);
  EXPECT_FALSE(s.submit(req(20)).has_value());
}

TEST(ClusterScheduler, CancelRemovesAQueuedRequestFromEitherSide) {
  ClusterScheduler s({.prefill_nodes = 1, .decode_nodes = 1}, paper(/*hbm=*/5));
  s.submit(req(1));  // needs 10 bytes: gets a PE, waits for the DE
  s.submit(req(2));
  s.fetch();
  EXPECT_EQ(s.queued(), 2u);
  EXPECT_TRUE(s.cancel_queued(1));
  EXPECT_TRUE(s.cancel_queued(2));
  EXPECT_FALSE(s.cancel_queued(3));
  EXPECT_FALSE(s.has_queued());
}

TEST(ClusterScheduler, ADeQueueBlockedOnHbmMovesOnceHbmFreesOrItsHeadIsCancelled) {
  ClusterScheduler s({.prefill_nodes = 1, .decode_nodes = 1}, paper(/*hbm=*/25));
  for (int64_t id = 1; id <= 4; ++id) s.submit(req(id));  // 10 bytes each: two fit
  FetchResult f = s.fetch();
  ASSERT_EQ(f.placed.size(), 2u);
  EXPECT_EQ(s.queued(), 2u);
  EXPECT_TRUE(s.fetch().placed.empty());  // still no room: nothing moves
  EXPECT_EQ(s.queued_pe(3), f.pe_assigned[2].pe);
  s.turn_finished(f.placed[0].de, 110, 10);  // frees one slot
  f = s.fetch();
  ASSERT_EQ(f.placed.size(), 1u);
  EXPECT_EQ(f.placed[0].request_id, 3);
  EXPECT_TRUE(s.fetch().placed.empty());
  s.reserve_hbm(0, 5);  // less room than before: 4 still waits
  s.turn_finished(f.placed[0].de, 110, 10);
  s.reserve_hbm(0, 10);  // the freed slot taken again by someone else
  EXPECT_TRUE(s.fetch().placed.empty());
  EXPECT_EQ(s.queued(), 1u);
  EXPECT_TRUE(s.cancel_queued(4));
  EXPECT_EQ(s.queued(), 0u);
  EXPECT_EQ(s.queued_pe(4), -1);
}

}  // namespace
}  // namespace dualpath::sched
