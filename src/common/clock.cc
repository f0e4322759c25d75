#include "common/clock.h"

#include <thread>

namespace dualpath {

SteadyClock::SteadyClock() : epoch_(std::chrono::steady_clock::now()) {}
Duration SteadyClock::now() const {
  return std::chrono::duration_cast<Duration>(std::chrono::steady_clock::now() - epoch_);
}
void SteadyClock::sleep_until(Duration deadline) { std::this_thread::sleep_until(epoch_ + deadline); }
std::optional<std::chrono::steady_clock::time_point> SteadyClock::to_steady(Duration t) const {
  return epoch_ + std::chrono::duration_cast<std::chrono::steady_clock::duration>(t);
}

Clock& real_clock() {
  static SteadyClock clock;  // constructed once, thread-safely; never destroyed before its users
  return clock;
}

bool Clock::wait_until(CondVar& cv, MutexLock& lock, Duration deadline) const {
  if (auto real = to_steady(deadline)) return cv.wait_until(lock, *real);
  if (now() >= deadline) return false;
  (void)cv.wait_for(lock, std::chrono::milliseconds(1));
  return now() < deadline;
}

DilatedClock::DilatedClock(double dilation)
    : dilation_(dilation > 0 ? dilation : 1.0), epoch_(std::chrono::steady_clock::now()) {}
Duration DilatedClock::now() const {
  auto real = std::chrono::steady_clock::now() - epoch_;
  return std::chrono::duration_cast<Duration>(std::chrono::duration<double>(real) / dilation_);
}
void DilatedClock::sleep_until(Duration deadline) { std::this_thread::sleep_until(*to_steady(deadline)); }
std::optional<std::chrono::steady_clock::time_point> DilatedClock::to_steady(Duration t) const {
  return epoch_ + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                      std::chrono::duration<double>(t) * dilation_);
}

Duration ManualClock::now() const {
  MutexLock lock(mu_);
  return now_;
}
void ManualClock::sleep_until(Duration deadline) {
  MutexLock lock(mu_);
  while (now_ < deadline) cv_.wait(lock);  // advance() notifies
}
void ManualClock::advance(Duration d) {
  {
    MutexLock lock(mu_);
    now_ += d;
  }
  cv_.notify_all();
}

}  // namespace dualpath
