// Adaptive P/D's pure half: the static layouts, the pressure read from the cluster scheduler,
// the controller's decisions, and the scheduler's behaviour when a DE group leaves with work
// queued on it (the requests go back to the global DE queue, not lost).
#include "sched/pd_controller.h"

#include <gtest/gtest.h>

#include "sched/cluster_scheduler.h"

namespace dualpath::sched {
namespace {

TEST(PdLayout, StaticSplitsGroupEachRoleFromItsFirstNodeWithASmallerLastGroup) {
  PdLayout l = static_pd_layout(6, 2, 2, 4);
  ASSERT_EQ(l.groups.size(), 2u);
  EXPECT_EQ(l.groups[0], (PdGroup{true, 0, 2}));
  EXPECT_EQ(l.groups[1], (PdGroup{false, 2, 4}));
  PdLayout m = static_pd_layout(6, 4, 2, 4);  // decode groups clamp to the 2 decode nodes
  ASSERT_EQ(m.groups.size(), 3u);
  EXPECT_EQ(m.groups[1], (PdGroup{true, 2, 2}));
  EXPECT_EQ(m.groups[2], (PdGroup{false, 4, 2}));
  PdLayout n = static_pd_layout(5, 3, 2, 1);
  ASSERT_EQ(n.groups.size(), 4u);
  EXPECT_EQ(n.groups[1], (PdGroup{true, 2, 1}));
  EXPECT_EQ(m.decode_nodes, 2);
}

TEST(PdController, MovesTowardPrefillOnlyWhenDecodeHasRoomAndBackWhenDecodeWaits) {
  PdControllerParams p;  // room 0.5, hold 60 s
  p.prefill_high_s = 30;
  p.prefill_low_s = 5;
  const double never = 1e9;
  const double sw = 10;
  // A big prefill backlog, mostly not assigned yet, decode idle: one more prefill group.
  EXPECT_EQ(decide_pd(p, {100, 5, 0, 0.1}, 0, 2, never, sw), 1);
  // ... not past the last layout, and not within the hold time.
  EXPECT_EQ(decide_pd(p, {100, 5, 0, 0.1}, 1, 2, never, sw), 1);
  EXPECT_EQ(decide_pd(p, {100, 5, 0, 0.1}, 0, 2, 59, sw), 0);
  // A big backlog, but decode is full (waiting requests or HBM): stay.
  EXPECT_EQ(decide_pd(p, {100, 5, 3, 0.1}, 0, 2, never, sw), 0);
  EXPECT_EQ(decide_pd(p, {100, 5, 0, 0.9}, 0, 2, never, sw), 0);
  // A big backlog already assigned (the leaving DEs must wait for it), or a slow switch: the
  // change would not finish well before the backlog clears, so stay.
  EXPECT_EQ(decide_pd(p, {100, 40, 0, 0.1}, 0, 2, never, sw), 0);
  EXPECT_EQ(decide_pd(p, {100, 5, 0, 0.1}, 0, 2, never, 60), 0);
  // Decode waits and prefill has little left: a decode group back.
  EXPECT_EQ(decide_pd(p, {2, 2, 5, 1.0}, 1, 2, never, sw), 0);
  // Decode waits but prefill still has a backlog between the marks: stay (no flapping).
  EXPECT_EQ(decide_pd(p, {10, 10, 5, 1.0}, 1, 2, never, sw), 1);
  EXPECT_EQ(decide_pd(p, {2, 2, 5, 1.0}, 0, 2, never, sw), 0);  // no layout with less prefill
}

ClusterSchedulerParams pd_params(double hbm) {
  ClusterSchedulerParams p;
  p.pe = {.alpha_tokens = 1000, .beta_tokens = 100000};
  p.de_hbm_bytes = hbm;
  return p;
}

TEST(PdPressure, ReadsTheBacklogPerLiveEngineTheDeWaitersAndHbmUse) {
  ClusterShape shape{.prefill_nodes = 2, .decode_nodes = 1, .pe_engines_per_node = 1,
                     .de_engines_per_node = 1};
  ClusterScheduler s(shape, pd_params(100));
  for (int64_t id = 0; id < 4; ++id) s.submit({id, 100, 10, 0, 40, {}, 3.0});
  PdPressure before = pd_pressure(s);
  EXPECT_DOUBLE_EQ(before.prefill_backlog_s, 4 * 3.0 / 2);
  EXPECT_DOUBLE_EQ(before.committed_backlog_s, 0);  // queued, not assigned
  s.set_node_alive(1, false);  // one PE left: the same work over one engine
  EXPECT_DOUBLE_EQ(pd_pressure(s).prefill_backlog_s, 4 * 3.0);
  s.set_node_alive(1, true);
  // Both PEs take all four (beta is large); the DE's 100 bytes hold two of 40.
  FetchResult f = s.fetch();
  EXPECT_EQ(f.pe_assigned.size(), 4u);
  EXPECT_EQ(f.placed.size(), 2u);
  PdPressure after = pd_pressure(s);
  EXPECT_DOUBLE_EQ(after.committed_backlog_s, after.prefill_backlog_s);
  EXPECT_EQ(after.decode_waiting, 2);
  EXPECT_DOUBLE_EQ(after.decode_hbm_used, 0.8);
}

TEST(ClusterScheduler, ADeGroupThatLeavesHandsItsQueuedRequestsToAnotherGroup) {
  // Two DE groups of different sizes and budgets (an adaptive layout's).
  ClusterShape shape{.prefill_nodes = 1, .decode_nodes = 3, .pe_engines_per_node = 1,
                     .de_engines_per_node = 1, .de_group_nodes = {1, 2}};
  ClusterSchedulerParams p = pd_params(0);
  p.de_group_hbm_bytes = {50, 30};
  ClusterScheduler s(shape, p);
  EXPECT_DOUBLE_EQ(s.hbm_free(0), 50);
  EXPECT_DOUBLE_EQ(s.hbm_free(2), 30);
  s.set_node_alive(2, false);  // group 1 (nodes 2, 3) is not running yet
  s.set_node_alive(3, false);
  for (int64_t id = 0; id < 3; ++id) s.submit({id, 100, 10, 0, 20, {}, 0});
  FetchResult f = s.fetch();
  ASSERT_EQ(f.placed.size(), 2u);  // group 0's 50 bytes hold two of 20
  EXPECT_EQ(f.placed[0].de, 0);
  // One waits in group 0's private queue. Group 0 leaves and group 1 starts: it moves over.
  s.set_node_alive(1, false);
  EXPECT_EQ(s.waiting_for_de(), 1u);
  s.set_node_alive(2, true);
  s.set_node_alive(3, true);
  f = s.fetch();
  ASSERT_EQ(f.placed.size(), 1u);
  EXPECT_GE(f.placed[0].de, 1);
  EXPECT_EQ(s.waiting_for_de(), 0u);
  // With no DE group alive, a request with a PE waits in the global queue.
  s.set_node_alive(1, false);
  s.set_node_alive(2, false);
  s.set_node_alive(3, false);
  s.submit({9, 100, 10, 0, 1, {}, 0});
  f = s.fetch();
  EXPECT_EQ(f.pe_assigned.size(), 1u);
  EXPECT_TRUE(f.placed.empty());
  s.set_node_alive(1, true);
  f = s.fetch();
  ASSERT_EQ(f.placed.size(), 1u);
  EXPECT_EQ(f.placed[0].de, 0);
}

}  // namespace
}  // namespace dualpath::sched
