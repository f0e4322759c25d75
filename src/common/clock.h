#pragma once
// Clocks: the one seam for wall time (STYLE.md). SteadyClock is real time; ManualClock is advanced
// by tests; DilatedClock runs an emulated cluster's time `dilation` times slower than real time
// (dilation 10: one emulated second takes ten real seconds), so that a 2-core machine can play a
// GPU cluster at a fraction of its speed with every ratio intact.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>

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
};

class SteadyClock final : public Clock {
 public:
  SteadyClock();
  Duration now() const override;
  void sleep_until(Duration deadline) override;

 private:
  std::chrono::steady_clock::time_point epoch_;
};

// Emulated time = real elapsed time / dilation.
class DilatedClock final : public Clock {
 public:
  explicit DilatedClock(double dilation);
  Duration now() const override;
  void sleep_until(Duration deadline) override;
  double dilation() const { return dilation_; }

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
  mutable std::mutex mu_;
  std::condition_variable cv_;
  Duration now_{0};
};

}  // namespace dualpath
