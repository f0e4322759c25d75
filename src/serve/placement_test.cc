// Placer on a ManualClock: turns are placed at once while the engines keep up, and wait for the
// next group fetch once a fetch leaves turns queued (the fetch interval batches a loaded cluster,
// it is not a floor on an idle one), and a claim gives its counts back exactly once.
#include "serve/placement.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

namespace dualpath::serve {
namespace {

using namespace std::chrono_literals;

sched::ClusterSchedulerParams paper_params() {
  sched::ClusterSchedulerParams p;
  p.engines = sched::EnginePolicy::kPaper;
  p.paths = sched::PathPolicy::kShortestQueue;
  p.pe.alpha_tokens = 1'000'000;
  p.pe.beta_tokens = 1'000'000;
  p.de_hbm_bytes = 1e12;
  return p;
}

sched::SchedRequest request(int64_t id) {
  sched::SchedRequest r;
  r.id = id;
  r.prompt_tokens = 1000;
  r.gen_tokens = 10;
  r.hit_tokens = 512;
  r.hbm_need_bytes = 1e6;
  return r;
}

// Places request `id` on a thread of its own; `placed` is set (release) once it is.
std::thread place_in_background(Placer& placer, const ManualClock& clock, int64_t id,
                                std::atomic<bool>& placed) {
  return std::thread([&placer, &clock, &placed, id] {
    auto c = placer.place(request(id), clock.now() + 10s, {});
    EXPECT_TRUE(c.is_ok()) << c.status().to_string();
    placed.store(true, std::memory_order_release);
  });
}

TEST(Placer, TurnsArePlacedAtOnceWhileTheEnginesKeepUpAndAtTheNextFetchOnceTheyWait) {
  ManualClock clock;
  Placer placer(sched::ClusterShape{}, paper_params(), 50ms, clock);
  placer.set_node_alive(0, true);
  placer.set_node_alive(1, true);
  // Idle: placed without the clock moving at all; so is the next one (the last fetch placed
  // every queued turn).
  auto first = placer.place(request(1), clock.now() + 10s, {});
  ASSERT_TRUE(first.is_ok()) << first.status().to_string();
  auto second = placer.place(request(2), clock.now() + 10s, {});
  ASSERT_TRUE(second.is_ok()) << second.status().to_string();
  // A turn no engine can take (its decode node is down) stays queued after a fetch: from then
  // on the groups fetch once per interval, on the clock.
  placer.set_node_alive(1, false);
  std::atomic<bool> placed{false};  // release by the placer's caller, acquire by the test
  std::thread third = place_in_background(placer, clock, 3, placed);
  std::this_thread::sleep_for(30ms);  // real time passes, not the clock's
  placer.set_node_alive(1, true);
  std::this_thread::sleep_for(30ms);
  EXPECT_FALSE(placed.load(std::memory_order_acquire)) << "placed before the group's next fetch";
  clock.advance(50ms);
  third.join();
  EXPECT_TRUE(placed.load(std::memory_order_acquire));
}

// A turn that its own fetch could not place (the engines were full) is placed by the fetch
// thread at the next interval once they free up, with no other turn arriving (review: the fetch
// thread was not woken, and the turn waited for its deadline).
TEST(Placer, ATurnQueuedByItsOwnFetchIsPlacedAtTheNextIntervalOnceTheEnginesFreeUp) {
  ManualClock clock;
  sched::ClusterSchedulerParams params = paper_params();
  params.de_hbm_bytes = 1.5e6;  // one turn's HBM need at a time
  Placer placer(sched::ClusterShape{}, params, 50ms, clock);
  placer.set_node_alive(0, true);
  placer.set_node_alive(1, true);
  auto first = placer.place(request(1), clock.now() + 10s, {});
  ASSERT_TRUE(first.is_ok()) << first.status().to_string();
  std::atomic<bool> placed{false};  // release by the placer's caller, acquire by the test
  std::thread second = place_in_background(placer, clock, 2, placed);
  std::this_thread::sleep_for(30ms);  // real time passes, not the clock's
  EXPECT_FALSE(placed.load(std::memory_order_acquire)) << "placed while the HBM was held";
  first->finish_all();  // the first turn ends: its HBM is free
  clock.advance(50ms);
  for (int i = 0; i < 500 && !placed.load(std::memory_order_acquire); ++i) {
    std::this_thread::sleep_for(10ms);
  }
  EXPECT_TRUE(placed.load(std::memory_order_acquire)) << "not placed at the next fetch";
  if (!placed.load(std::memory_order_acquire)) clock.advance(20s);  // let it time out
  second.join();
}

TEST(Placer, AClaimGivesItsReadsBackOnceAndATurnNobodyTakesTimesOut) {
  ManualClock clock;
  Placer placer(sched::ClusterShape{}, paper_params(), 50ms, clock);
  placer.set_node_alive(0, true);
  placer.set_node_alive(1, true);
  {
    auto c = placer.place(request(1), clock.now() + 10s, {});
    ASSERT_TRUE(c.is_ok());
    int64_t queued = 0;
    placer.with_scheduler([&](sched::ClusterScheduler& s) {
      queued = s.read_queue(0) + s.read_queue(1);
    });
    EXPECT_EQ(queued, 512);  // the hit, on the side the scheduler picked
    c->pe_read_finished();
    c->pe_read_finished();  // once only
    Claim moved = std::move(*c);
  }  // the claim's destructor gives the rest back
  placer.with_scheduler([&](sched::ClusterScheduler& s) {
    EXPECT_EQ(s.read_queue(0), 0);
    EXPECT_EQ(s.read_queue(1), 0);
    EXPECT_EQ(s.pe_load(0).tok, 0);
    EXPECT_EQ(s.de_load(0).tok, 0);
  });
  // With every decode node dead, no engine takes the turn: kUnavailable at its deadline.
  placer.set_node_alive(1, false);
  Status late;
  std::thread t([&] { late = placer.place(request(2), clock.now() + 2s, {}).status(); });
  std::this_thread::sleep_for(20ms);
  clock.advance(3s);
  t.join();
  EXPECT_TRUE(late.is_unavailable()) << late.to_string();
  EXPECT_NE(late.message().find("0 decode nodes alive of 1"), std::string::npos) << late.message();
}

TEST(Placer, ACancelledTurnLeavesTheQueue) {
  ManualClock clock;
  Placer placer(sched::ClusterShape{}, paper_params(), 50ms, clock);
  std::atomic<bool> cancel{false};
  Status s;
  std::thread t([&] {
    s = placer.place(request(3), clock.now() + 60s, [&] { return cancel.load(); }).status();
  });
  std::this_thread::sleep_for(20ms);
  cancel.store(true);
  t.join();
  EXPECT_TRUE(s.is_aborted()) << s.to_string();
  placer.with_scheduler([&](sched::ClusterScheduler& sc) { EXPECT_FALSE(sc.has_queued()); });
}

}  // namespace
}  // namespace dualpath::serve
