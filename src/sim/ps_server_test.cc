#include "sim/ps_server.h"

#include <gtest/gtest.h>

#include <cmath>
#include <queue>
#include <vector>

#include "sim/event_queue.h"

namespace dualpath::sim {
namespace {

// The event queue must pop in (time, push order) exactly as a binary heap over the same events
// would, with events pushed at the current time (its FIFO) among them: the simulator's results
// are byte for byte those of the std::priority_queue it replaced.
TEST(EventQueue, PopsInTimeThenPushOrderLikeABinaryHeap) {
  struct Later {
    bool operator()(const Event& x, const Event& y) const {
      return x.t != y.t ? x.t > y.t : x.seq > y.seq;
    }
  };
  std::priority_queue<Event, std::vector<Event>, Later> reference;
  EventQueue q;
  uint64_t x = 7, seq = 0;
  auto next = [&x] {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    return x >> 33;
  };
  double now = 0;
  auto push = [&](double t) {
    const auto a = static_cast<uint32_t>(seq);
    q.push(t, 0, a);
    reference.push(Event{t, seq++, 0, a, 0});
  };
  for (int i = 0; i < 50; ++i) push(static_cast<double>(next() % 20));
  int popped = 0;
  while (!reference.empty()) {
    const Event want = reference.top();
    reference.pop();
    ASSERT_FALSE(q.empty());
    ASSERT_NE(q.peek(), nullptr);
    EXPECT_EQ(q.peek()->a, want.a);
    const Event got = q.pop();
    ASSERT_EQ(got.a, want.a) << "pop " << popped;
    ASSERT_EQ(got.t, want.t);
    now = got.t;
    ++popped;
    // Handling an event pushes more: some now (ties with what is queued for now), some later.
    if (popped < 3000) {
      const uint64_t r = next() % 4;
      if (r == 0) push(now);
      if (r == 1) push(now + static_cast<double>(next() % 5));
      if (r == 2) {
        push(now);
        push(now);
      }
    }
  }
  EXPECT_TRUE(q.empty());
  EXPECT_EQ(q.peek(), nullptr);
  EXPECT_GT(popped, 1000);
}

TEST(PsServer, TwoEqualJobsShareTheRateAndFinishTogether) {
  PsServer s;
  s.advance(0);
  s.add(1, 10.0);
  s.add(2, 10.0);
  s.set_rate(10.0 / 2);  // a 10 units/s link shared by two
  EXPECT_DOUBLE_EQ(s.next_departure(), 2.0);
}

TEST(PsServer, ShortJobLeavesFirstAndTheOtherSpeedsUp) {
  PsServer s;
  s.advance(0);
  s.add(1, 2.0);
  s.add(2, 10.0);
  s.set_rate(5.0);  // 10 units/s over two jobs
  EXPECT_DOUBLE_EQ(s.next_departure(), 0.4);
  s.advance(0.4);
  EXPECT_EQ(s.pop(), 1u);
  s.set_rate(10.0);  // alone now
  // Job 2 got 2 units by t=0.4, needs 8 more at 10/s.
  EXPECT_NEAR(s.next_departure(), 1.2, 1e-12);
}

TEST(PsServer, BoundedQueueDepthAdmitsWaitersInOrder) {
  PsServer s(1);
  s.advance(0);
  s.add(7, 1.0);
  s.add(8, 1.0);
  s.set_rate(1.0);
  EXPECT_EQ(s.active(), 1u);
  EXPECT_EQ(s.waiting(), 1u);
  s.advance(1.0);
  EXPECT_EQ(s.pop(), 7u);
  EXPECT_EQ(s.active(), 1u);
  EXPECT_NEAR(s.next_departure(), 2.0, 1e-12);
}

TEST(PsServer, StalledServerNeverDeparts) {
  PsServer s;
  s.advance(0);
  s.add(1, 1.0);
  s.set_rate(0.0);
  EXPECT_TRUE(std::isinf(s.next_departure()));
}

}  // namespace
}  // namespace dualpath::sim
