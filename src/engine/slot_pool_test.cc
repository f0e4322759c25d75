// SlotPool: contiguous runs, coalescing, and allocate_wait's backpressure (arrival order,
// deadline, cancel, a request larger than the pool). Deadlines are on a ManualClock: a wait ends
// at its deadline when the test moves the clock past it, and not before.

#include "engine/slot_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "transport/context.h"
#include "transport/worker.h"

namespace dualpath::engine {
namespace {

constexpr uint64_t kSlot = 4096;
using std::chrono::seconds;

class SlotPoolTest : public ::testing::Test {
 protected:
  void SetUp() override {
    transport::ContextOptions co;
    co.transports = "sm,self";
    auto ctx = transport::Context::create(co);
    ASSERT_TRUE(ctx.is_ok()) << ctx.status().to_string();
    context_ = std::move(ctx).value();
    auto w = transport::Worker::create(*context_, {});
    ASSERT_TRUE(w.is_ok()) << w.status().to_string();
    worker_ = std::move(w).value();
    auto p =
        SlotPool::create(*worker_, "DE buffer", "live.de_dram_buffer_mb", 8 * kSlot, kSlot, clock_);
    ASSERT_TRUE(p.is_ok()) << p.status().to_string();
    pool_ = std::move(p).value();
  }

  ManualClock clock_;
  std::unique_ptr<transport::Context> context_;
  std::unique_ptr<transport::Worker> worker_;
  std::unique_ptr<SlotPool> pool_;
};

TEST_F(SlotPoolTest, RunsAreContiguousAndCoalesceWhenReturned) {
  auto a = pool_->allocate(3 * kSlot);
  auto b = pool_->allocate(3 * kSlot);
  ASSERT_TRUE(a.is_ok() && b.is_ok());
  EXPECT_EQ(a->size_bytes(), 3 * kSlot);
  EXPECT_EQ(b->offset_bytes(), 3 * kSlot);
  // 2 free slots: a run of 3 does not fit, and the error names the key to raise.
  auto c = pool_->allocate(3 * kSlot);
  ASSERT_FALSE(c.is_ok());
  EXPECT_TRUE(c.status().is_resource_exhausted());
  EXPECT_NE(c.status().message().find("live.de_dram_buffer_mb"), std::string::npos);
  a->release();
  b->release();
  auto whole = pool_->allocate(8 * kSlot);  // both runs and the tail coalesced into one
  EXPECT_TRUE(whole.is_ok()) << whole.status().to_string();
}

TEST_F(SlotPoolTest, WaitingRequestGetsTheRunOnceSlotsReturn) {
  auto held = pool_->allocate(6 * kSlot);
  ASSERT_TRUE(held.is_ok());
  std::atomic<bool> got{false};
  std::thread waiter([&] {
    auto lease = pool_->allocate_wait(4 * kSlot, clock_.now() + seconds(30));
    EXPECT_TRUE(lease.is_ok()) << lease.status().to_string();
    got = lease.is_ok();
  });
  while (pool_->waiting() == 0) std::this_thread::yield();
  EXPECT_FALSE(got.load());  // 2 free slots: it waits
  held->release();
  waiter.join();
  EXPECT_TRUE(got.load());
  EXPECT_EQ(pool_->waiting(), 0u);
}

TEST_F(SlotPoolTest, WaitersAreServedInArrivalOrder) {
  auto held = pool_->allocate(7 * kSlot);  // one slot free: the small request would fit at once
  ASSERT_TRUE(held.is_ok());
  std::vector<int> order;
  std::mutex mu;
  auto wait_for = [&](int who, uint64_t slots) {
    auto lease = pool_->allocate_wait(slots * kSlot, clock_.now() + seconds(30));
    ASSERT_TRUE(lease.is_ok()) << lease.status().to_string();
    std::lock_guard lock(mu);
    order.push_back(who);
  };
  // The big one takes the whole pool, so the small one can only be granted once the big one has
  // recorded itself and returned its run: the order is the pool's, not the threads' scheduling.
  std::thread big([&] { wait_for(0, 8); });
  while (pool_->waiting() < 1) std::this_thread::yield();
  std::thread small([&] { wait_for(1, 1); });
  while (pool_->waiting() < 2) std::this_thread::yield();
  held->release();
  big.join();
  small.join();
  ASSERT_EQ(order.size(), 2u);
  EXPECT_EQ(order[0], 0);  // the small one fit all along, yet waited behind the big one
}

TEST_F(SlotPoolTest, DeadlineCancelAndOversizeAreErrors) {
  auto held = pool_->allocate(8 * kSlot);
  ASSERT_TRUE(held.is_ok());
  std::atomic<bool> late_done{false};  // release by the waiter, acquire by the test
  Status late_status;
  std::thread late([&] {
    late_status = pool_->allocate_wait(kSlot, clock_.now() + seconds(30)).status();
    late_done.store(true, std::memory_order_release);
  });
  while (pool_->waiting() == 0) std::this_thread::yield();
  clock_.advance(seconds(29));
  std::this_thread::sleep_for(std::chrono::milliseconds(20));  // real time passes, not the clock's
  EXPECT_FALSE(late_done.load(std::memory_order_acquire)) << "gave up before its deadline";
  clock_.advance(seconds(2));
  late.join();
  EXPECT_TRUE(late_status.is_timed_out()) << late_status.to_string();

  std::atomic<bool> stop{false};
  std::thread canceller([&] {
    while (pool_->waiting() == 0) std::this_thread::yield();
    stop = true;
  });
  auto cancelled = pool_->allocate_wait(kSlot, clock_.now() + seconds(30),
                                        [&] { return stop.load(); });
  canceller.join();
  ASSERT_FALSE(cancelled.is_ok());
  EXPECT_TRUE(cancelled.status().is_aborted()) << cancelled.status().to_string();

  auto oversize = pool_->allocate_wait(9 * kSlot, clock_.now() + seconds(30));
  ASSERT_FALSE(oversize.is_ok());
  EXPECT_TRUE(oversize.status().is_resource_exhausted());
  EXPECT_NE(oversize.status().message().find("larger than the whole buffer"), std::string::npos);
  EXPECT_EQ(pool_->waiting(), 0u);
}

}  // namespace
}  // namespace dualpath::engine
