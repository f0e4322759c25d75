// Hand-made cases for the scheduling policies (PAPER.md §8).
#include <gtest/gtest.h>

#include "sched/batcher.h"
#include "sched/de_scheduler.h"
#include "sched/path_choice.h"
#include "sched/pe_scheduler.h"

namespace dualpath::sched {
namespace {

std::deque<RequestInfo> requests(std::initializer_list<int64_t> tokens, double hbm = 1.0) {
  std::deque<RequestInfo> q;
  int64_t id = 0;
  for (int64_t t : tokens) q.push_back({id++, t, hbm});
  return q;
}

TEST(PeScheduler, PrefersEnginesWhoseNodeHasAShortReadQueue) {
  // Engine 0 on node 0 (long read queue) has fewer tokens than engine 1 on node 1 (short queue):
  // the short-queue engine still wins, because its SNIC would otherwise idle.
  std::vector<PeEngineLoad> engines = {{0, 0, 10}, {1, 0, 500}};
  std::vector<int64_t> read_q = {5000, 100};
  auto q = requests({100});
  auto a = schedule_pe(q, engines, read_q, {.alpha_tokens = 1000, .beta_tokens = 10000});
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0].engine, 1);
  EXPECT_EQ(engines[1].tok, 600);
  EXPECT_EQ(engines[1].seq, 1);
}

TEST(PeScheduler, PicksFewestTokensWithinACategory) {
  std::vector<PeEngineLoad> engines = {{0, 0, 300}, {0, 0, 100}, {0, 0, 200}};
  std::vector<int64_t> read_q = {0};
  auto q = requests({50, 50, 50});
  auto a = schedule_pe(q, engines, read_q, {.alpha_tokens = 10, .beta_tokens = 10000});
  ASSERT_EQ(a.size(), 3u);
  EXPECT_EQ(a[0].engine, 1);  // 100 -> 150
  EXPECT_EQ(a[1].engine, 1);  // 150 < 200: still the least -> 200
  EXPECT_EQ(a[2].engine, 1);  // 200 ties engine 2's 200: the lower index wins
  EXPECT_EQ(engines[1].tok, 250);
}

TEST(PeScheduler, TheTailPolicyRanksByPrefillWorkNotTokens) {
  // Engine 0 holds fewer prompt tokens but more work (a long append); engine 1 the reverse
  // (a long, almost fully cached context). The paper's rule picks engine 0, the tail rule 1.
  auto engines_now = [] {
    std::vector<PeEngineLoad> e = {{0, 1, 1000, 0.9}, {0, 1, 5000, 0.2}};
    return e;
  };
  std::vector<int64_t> read_q = {0};
  for (PePolicy policy : {PePolicy::kPaper, PePolicy::kTail}) {
    std::vector<PeEngineLoad> engines = engines_now();
    std::deque<RequestInfo> q = {{7, 100, 1.0, 0.5}};
    auto a = schedule_pe(q, engines, read_q,
                         {.policy = policy, .alpha_tokens = 10, .beta_tokens = 100000});
    ASSERT_EQ(a.size(), 1u);
    const int want = policy == PePolicy::kTail ? 1 : 0;
    EXPECT_EQ(a[0].engine, want) << pe_policy_name(policy);
    EXPECT_DOUBLE_EQ(engines[static_cast<size_t>(want)].work,
                     engines_now()[static_cast<size_t>(want)].work + 0.5);
  }
  EXPECT_EQ(*parse_pe_policy("tail"), PePolicy::kTail);
  auto bad = parse_pe_policy("fastest");
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("scheduler.pe_policy"), std::string::npos);
}

TEST(PeScheduler, StopsWhenEveryEngineIsOverloadedAndKeepsTheRestQueued) {
  std::vector<PeEngineLoad> engines = {{0, 0, 900}, {0, 0, 950}};
  std::vector<int64_t> read_q = {0};
  auto q = requests({200, 200, 200});
  auto a = schedule_pe(q, engines, read_q, {.alpha_tokens = 10, .beta_tokens = 1000});
  // 900 -> 1100 (now overloaded), 950 -> 1150 (overloaded), then nothing.
  EXPECT_EQ(a.size(), 2u);
  EXPECT_EQ(q.size(), 1u);
  EXPECT_EQ(q.front().id, 2);
}

TEST(PeScheduler, FallsBackToLongQueueEnginesWhenNoShortOneIsFree) {
  std::vector<PeEngineLoad> engines = {{0, 0, 2000}, {1, 0, 10}};
  std::vector<int64_t> read_q = {0, 9999};
  auto q = requests({10});
  auto a = schedule_pe(q, engines, read_q, {.alpha_tokens = 100, .beta_tokens = 1000});
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0].engine, 1);  // engine 0 is overloaded although its queue is short
}

TEST(DeScheduler, PhaseOneSendsToTheLeastLoadedGroup) {
  std::vector<int64_t> sums = {500, 200, 200, 900};
  EXPECT_EQ(pick_de_group(sums), 1);
  EXPECT_EQ(pick_de_group(std::vector<int64_t>{}), -1);
}

TEST(DeScheduler, BalancesRequestsUnderZThenTokensAbove) {
  // Two engines, equal tokens, engine 1 has fewer requests: under Z, fewest requests wins.
  std::vector<DeEngineLoad> engines = {{5, 1000, 100.0}, {1, 1000, 100.0}};
  auto q = requests({100});
  auto a = schedule_de(q, engines, {});
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0].engine, 1);
}

TEST(DeScheduler, AboveZGoesToFewestTokens) {
  // Z = 1.05 * (10000 + 0 + 3000) / 2 = 6825: both engines would exceed it with 10000 tokens.
  std::vector<DeEngineLoad> engines = {{0, 0, 100.0}, {9, 3000, 100.0}};
  auto q = requests({10000});
  auto a = schedule_de(q, engines, {});
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0].engine, 0);
}

TEST(DeScheduler, EndsTheFetchWhenNoEngineHasHbmForTheHead) {
  std::vector<DeEngineLoad> engines = {{0, 0, 5.0}, {0, 0, 5.0}};
  auto q = requests({10, 10, 10}, 4.0);
  auto a = schedule_de(q, engines, {});
  EXPECT_EQ(a.size(), 2u);  // one per engine; the third finds no room
  EXPECT_EQ(q.size(), 1u);
  EXPECT_NE(a[0].engine, a[1].engine);
}

// Ties between engines go to the node with the fewest requests: an idle group of two nodes with
// four engines each takes four requests on alternate nodes, not on the first node's engines.
TEST(DeScheduler, TiesGoToTheNodeWithFewestRequests) {
  const std::vector<int> nodes = {10, 10, 10, 10, 11, 11, 11, 11};
  std::vector<DeEngineLoad> engines(8, DeEngineLoad{0, 0, 100.0});
  auto q = requests({100, 100, 100, 100});
  auto a = schedule_de(q, engines, {}, nodes);
  ASSERT_EQ(a.size(), 4u);
  std::vector<int> on_node(2, 0);
  for (const Assignment& x : a) ++on_node[static_cast<size_t>(nodes[static_cast<size_t>(x.engine)] - 10)];
  EXPECT_EQ(on_node, (std::vector<int>{2, 2}));
  EXPECT_EQ(a[0].engine, 0);  // then the lowest index
  EXPECT_EQ(a[1].engine, 4);
  // A node already holding more requests loses the tie at equal engine loads.
  std::vector<DeEngineLoad> busy = {{3, 500, 100.0}, {0, 0, 100.0}, {0, 0, 100.0}, {1, 100, 100.0}};
  auto q2 = requests({100});
  auto b = schedule_de(q2, busy, {}, std::vector<int>{1, 1, 2, 2});
  ASSERT_EQ(b.size(), 1u);
  EXPECT_EQ(b[0].engine, 2);
  // Without the engines' nodes: by index, as before.
  std::vector<DeEngineLoad> plain(8, DeEngineLoad{0, 0, 100.0});
  auto q3 = requests({100, 100});
  auto c = schedule_de(q3, plain, {});
  ASSERT_EQ(c.size(), 2u);
  EXPECT_EQ(c[0].engine, 0);
  EXPECT_EQ(c[1].engine, 1);
}

TEST(DeScheduler, AffinityTakesTheHoldingNodeWhileItStaysNearItsShare) {
  // Engines 0, 1 on node 7, engines 2, 3 on node 8. The request's hit sits in node 8's DRAM.
  const std::vector<int> nodes = {7, 7, 8, 8};
  std::vector<DeEngineLoad> engines = {{1, 1000, 100.0}, {1, 1000, 100.0}, {5, 2000, 100.0},
                                       {6, 2100, 100.0}};
  auto q = requests({100});
  q.front().affinity_node = 8;
  // The mean engine holds 6100 / 4 = 1525; engine 2 would hold 2100 > 1.25 x (1525 + 100): too
  // hot, so the usual rule picks engine 0 (fewest requests under Z) and the hit is read from
  // storage.
  auto a = schedule_de(q, engines, {}, nodes);
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0].engine, 0);
  // Node 8 near its share: it takes the request (engine 2, the fewer requests of its two)
  // although the usual rule would give it to engine 0: 1100 + 100 <= 1.25 x (1050 + 100).
  engines = {{1, 1000, 100.0}, {1, 1000, 100.0}, {5, 1100, 100.0}, {6, 1100, 100.0}};
  q = requests({100});
  auto plain = schedule_de(q, engines, {}, nodes);
  ASSERT_EQ(plain.size(), 1u);
  EXPECT_EQ(plain[0].engine, 0);
  engines = {{1, 1000, 100.0}, {1, 1000, 100.0}, {5, 1100, 100.0}, {6, 1100, 100.0}};
  q = requests({100});
  q.front().affinity_node = 8;
  a = schedule_de(q, engines, {}, nodes);
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0].engine, 2);
  // No HBM on node 8: the usual rule.
  engines = {{1, 1000, 100.0}, {1, 1000, 100.0}, {5, 1100, 0.5}, {6, 1100, 0.5}};
  q = requests({100});
  q.front().affinity_node = 8;
  a = schedule_de(q, engines, {}, nodes);
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0].engine, 0);
}

TEST(DeScheduler, PhaseOneAffinityKeepsTheHoldingGroupWithinItsFactor) {
  const int64_t dead = int64_t{1} << 60;
  std::vector<int64_t> sums = {100, 120, 90};
  // Group 1 with the request: 220 <= 1.25 x (103.3 + 100).
  EXPECT_EQ(pick_de_group_with_affinity(sums, 1, 100, 1.25, dead), 1);
  // A hot group: 400 > 1.25 x (163.3 + 100): the least loaded.
  sums = {100, 300, 90};
  EXPECT_EQ(pick_de_group_with_affinity(sums, 1, 100, 1.25, dead), 2);
  // An idle cluster keeps the affinity.
  EXPECT_EQ(pick_de_group_with_affinity(std::vector<int64_t>{0, 0}, 1, 100, 1.25, dead), 1);
  sums = {100, dead, 90};  // a dead group is never chosen
  EXPECT_EQ(pick_de_group_with_affinity(sums, 1, 10, 1.25, dead), 2);
  EXPECT_EQ(pick_de_group_with_affinity(sums, -1, 10, 1.25, dead), 2);
}

TEST(PathChoice, RecomputesOnlyWhenComputingTheHitIsSooner) {
  EXPECT_TRUE(choose_recompute(0.5, 2.0));
  EXPECT_FALSE(choose_recompute(2.0, 0.5));
  EXPECT_FALSE(choose_recompute(1.0, 1.0));  // a tie reads
  EXPECT_FALSE(choose_recompute(0.0, 5.0));  // no price: never
  // The read overlaps the wait in the PE's queue: a busy PE reads.
  EXPECT_TRUE(choose_recompute(0.5, 2.0, 1.0));
  EXPECT_FALSE(choose_recompute(0.5, 2.0, 1.6));
}

TEST(PathChoice, PicksDecodeSideWhenItsReadQueueIsShorter) {
  EXPECT_EQ(choose_read_path(1000, 10), ReadPath::kDe);
  EXPECT_EQ(choose_read_path(10, 1000), ReadPath::kPe);
  EXPECT_EQ(choose_read_path(10, 10), ReadPath::kDe);
  EXPECT_EQ(choose_read_path(0, 0), ReadPath::kDe);
}

TEST(SplitRead, EqualQueuesSplitInHalfAtBlockGranularity) {
  // 10 blocks of 64, empty queues: 5 and 5.
  ReadSplit s = split_read(640, 64, 0, 0, 64);
  EXPECT_EQ(s.pe_tokens, 320);
  EXPECT_EQ(s.de_tokens, 320);
  EXPECT_EQ(s.path(), ReadPath::kSplit);
  // An odd count: the PE side gets the rounded-up half; both parts stay whole blocks.
  s = split_read(5 * 64, 64, 0, 0, 64);
  EXPECT_EQ(s.pe_tokens + s.de_tokens, 5 * 64);
  EXPECT_EQ(s.pe_tokens % 64, 0);
  EXPECT_EQ(s.pe_tokens, 3 * 64);
}

TEST(SplitRead, TheLongerQueueTakesLessSoBothSidesFinishTogether) {
  // PE queue 256 tokens longer: PE takes (640 - 256) / 2 = 192 (3 blocks), DE 448.
  ReadSplit s = split_read(640, 64, 256, 0, 64);
  EXPECT_EQ(s.pe_tokens, 192);
  EXPECT_EQ(s.de_tokens, 448);
  EXPECT_EQ(256 + s.pe_tokens, 0 + s.de_tokens - 0);
  // The DE side's queue longer than the whole hit: all on the PE side.
  s = split_read(640, 64, 0, 10000, 64);
  EXPECT_EQ(s.pe_tokens, 640);
  EXPECT_EQ(s.path(), ReadPath::kPe);
}

TEST(SplitRead, PartsBelowTheMinimumAreNotSplitOff) {
  // 10 blocks; the balanced PE part would be 1 block, under the 2-block minimum: all on DE.
  ReadSplit s = split_read(640, 64, 512, 0, 128);
  EXPECT_EQ(s.pe_tokens, 0);
  EXPECT_EQ(s.de_tokens, 640);
  EXPECT_EQ(s.path(), ReadPath::kDe);
  // A hit under twice the minimum is read whole, on the side choose_read_path picks.
  s = split_read(192, 64, 0, 0, 128);
  EXPECT_EQ(s.path(), ReadPath::kDe);
  EXPECT_EQ(s.de_tokens, 192);
  s = split_read(192, 64, 0, 50, 128);
  EXPECT_EQ(s.path(), ReadPath::kPe);
  // Nothing to read: no part.
  s = split_read(0, 64, 0, 0, 64);
  EXPECT_EQ(s.pe_tokens + s.de_tokens, 0);
}

TEST(RoundRobin, CyclesOverChoices) {
  RoundRobin rr;
  EXPECT_EQ(rr.next(3), 0);
  EXPECT_EQ(rr.next(3), 1);
  EXPECT_EQ(rr.next(3), 2);
  EXPECT_EQ(rr.next(3), 0);
}

model::CostModel ds660b() {
  return model::CostModel(*model::model_preset("ds660b"), *model::hardware_preset("h800"));
}

TEST(QuotaBatcher, TakesWholeRequestsWhileAttentionFitsTheQuota) {
  auto cost = ds660b();
  std::vector<model::PrefillWork> fifo(10, {30000, 400});
  double one = cost.attention_s(fifo[0]);
  auto b = plan_quota_batch(fifo, cost, 3.5 * one);
  // Three whole requests, then the fourth chunked to the half request that still fits.
  ASSERT_EQ(b.size(), 4u);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(b[static_cast<size_t>(i)].new_tokens, 400);
  EXPECT_GT(b[3].new_tokens, 150);
  EXPECT_LT(b[3].new_tokens, 400);
  double total = 0;
  for (const auto& it : b) total += cost.attention_s({it.cached_tokens, it.new_tokens});
  EXPECT_LE(total, 3.5 * one + 1e-12);
  // The chunk is the largest that fits: one more token would exceed the quota.
  double over = total - cost.attention_s({b[3].cached_tokens, b[3].new_tokens}) +
                cost.attention_s({b[3].cached_tokens, b[3].new_tokens + 1});
  EXPECT_GT(over, 3.5 * one);
}

TEST(QuotaBatcher, AHugeFirstRequestIsChunkedNotSkipped) {
  auto cost = ds660b();
  std::vector<model::PrefillWork> fifo = {{0, 1'000'000}};
  auto b = plan_quota_batch(fifo, cost, 0.3);
  ASSERT_EQ(b.size(), 1u);
  EXPECT_GE(b[0].new_tokens, 1);
  EXPECT_LT(b[0].new_tokens, 1'000'000);
}

TEST(CapacityBatcher, StopsAtTheHbmBudget) {
  std::vector<model::PrefillWork> fifo(5, {900, 100});
  auto b = plan_capacity_batch(fifo, 1.0, 2500.0, 100);
  EXPECT_EQ(b.size(), 2u);
  auto one = plan_capacity_batch(fifo, 1.0, 10.0, 100);
  EXPECT_EQ(one.size(), 1u);  // the first always joins
}

}  // namespace
}  // namespace dualpath::sched
