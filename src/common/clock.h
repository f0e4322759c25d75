#pragma once
// Clocks: the one seam for wall time (STYLE.md). SteadyClock is real time; ManualClock is advanced
// by tests; DilatedClock runs an emulated cluster's time `dilation` times slower than real time
// (dilation 10: one emulated second takes ten real seconds), so that a 2-core machine can play a
// GPU cluster at a fraction of its speed with every ratio intact.

#include <chrono>
#include <optional>

#include "common/mutex.h"
#include "dualpath/units.h"

namespace dualpath {

// Thread-safe.
class Clock {
 public:
  virtual ~Clock() = default;
  // Time since this clock's epoch.
  virtual Duration now() const = 0;
  // Blocks the calling thread until now() >= deadline.
  virtual void sleep_until(Duration deadline) = 0;
  void sleep_for(Duration d) { sleep_until(now() + d); }
  // The steady-clock instant at which this clock reads `t`, for a clock that follows real time;
  // nullopt (the default) for one that does not (ManualClock, tests' virtual clocks).
  virtual std::optional<std::chrono::steady_clock::time_point> to_steady(Duration) const {
    return std::nullopt;
  }
  // Blocks on `cv` (whose mutex `lock` holds) until notified or this clock reaches `deadline`;
  // false when it did. A clock that follows real time sleeps until then; a ManualClock is looked
  // at every millisecond of real time, so that a test's advance() ends the wait. Callers loop on
  // their own condition (common/mutex.h).
  bool wait_until(CondVar& cv, MutexLock& lock, Duration deadline) const;
};

class SteadyClock final : public Clock {
 public:
  SteadyClock();
  Duration now() const override;
  void sleep_until(Duration deadline) override;
  std::optional<std::chrono::steady_clock::time_point> to_steady(Duration t) const override;

 private:
  std::chrono::steady_clock::time_point epoch_;
};

// The process's real clock, for objects whose owner injects none (production code paths).
Clock& real_clock();

// Emulated time = real elapsed time / dilation.
class DilatedClock final : public Clock {
 public:
  explicit DilatedClock(double dilation);
  Duration now() const override;
  void sleep_until(Duration deadline) override;
  double dilation() const { return dilation_; }
  std::optional<std::chrono::steady_clock::time_point> to_steady(Duration t) const override;

 private:
  double dilation_;
  std::chrono::steady_clock::time_point epoch_;
};

// Time moves only when advance() is called; sleepers wake when it passes their deadline.
class ManualClock final : public Clock {
 public:
  Duration now() const override;
  void sleep_until(Duration deadline) override;
  void advance(Duration d);

 private:
  mutable Mutex mu_;
  CondVar cv_;
  Duration now_ DP_GUARDED_BY(mu_){0};
};

}  // namespace dualpath
