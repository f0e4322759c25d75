#include "common/clock.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

namespace dualpath {
namespace {

using namespace std::chrono_literals;

TEST(ManualClock, AWaitWithADeadlineEndsOnlyWhenTheClockIsAdvancedPastIt) {
  ManualClock clock;
  Mutex mu;
  CondVar cv;
  std::atomic<bool> done{false};  // release by the waiter, acquire by the test
  std::thread waiter([&] {
    MutexLock lock(mu);
    while (clock.wait_until(cv, lock, 10s)) {
    }
    done.store(true, std::memory_order_release);
  });
  std::this_thread::sleep_for(20ms);  // real time passes; the manual clock does not
  EXPECT_FALSE(done.load(std::memory_order_acquire));
  clock.advance(9s);
  std::this_thread::sleep_for(20ms);
  EXPECT_FALSE(done.load(std::memory_order_acquire)) << "woke before its deadline";
  clock.advance(1s);
  waiter.join();
  EXPECT_TRUE(done.load(std::memory_order_acquire));
}

TEST(ManualClock, ANotifiedWaitReturnsTrueBeforeItsDeadline) {
  ManualClock clock;
  Mutex mu;
  CondVar cv;
  bool ready = false;
  bool timed_out = false;
  std::thread waiter([&] {
    MutexLock lock(mu);
    while (!ready) {
      if (!clock.wait_until(cv, lock, 1s)) {
        timed_out = true;
        return;
      }
    }
  });
  {
    MutexLock lock(mu);
    ready = true;
  }
  cv.notify_all();
  waiter.join();
  EXPECT_FALSE(timed_out);
  EXPECT_EQ(clock.now(), Duration(0));
}

TEST(SteadyClock, AWaitTimesOutAtItsDeadline) {
  SteadyClock clock;
  Mutex mu;
  CondVar cv;
  MutexLock lock(mu);
  const Duration deadline = clock.now() + 5ms;
  bool timed_out = false;
  for (int i = 0; i < 10000 && !timed_out; ++i) timed_out = !clock.wait_until(cv, lock, deadline);
  EXPECT_TRUE(timed_out);
  EXPECT_GE(clock.now(), deadline);
}

TEST(DilatedClock, MapsItsTimeOntoTheSteadyClockAtItsDilation) {
  DilatedClock clock(10);
  const auto a = *clock.to_steady(1s);
  const auto b = *clock.to_steady(2s);
  EXPECT_EQ(std::chrono::duration_cast<std::chrono::milliseconds>(b - a).count(), 10000);
  EXPECT_FALSE(ManualClock().to_steady(1s).has_value());
}

}  // namespace
}  // namespace dualpath
