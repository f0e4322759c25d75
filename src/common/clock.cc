#include "common/clock.h"

#include <thread>

namespace dualpath {

SteadyClock::SteadyClock() : epoch_(std::chrono::steady_clock::now()) {}
Duration SteadyClock::now() const {
  return std::chrono::duration_cast<Duration>(std::chrono::steady_clock::now() - epoch_);
}
void SteadyClock::sleep_until(Duration deadline) { std::this_thread::sleep_until(epoch_ + deadline); }

DilatedClock::DilatedClock(double dilation)
    : dilation_(dilation > 0 ? dilation : 1.0), epoch_(std::chrono::steady_clock::now()) {}
Duration DilatedClock::now() const {
  auto real = std::chrono::steady_clock::now() - epoch_;
  return std::chrono::duration_cast<Duration>(std::chrono::duration<double>(real) / dilation_);
}
void DilatedClock::sleep_until(Duration deadline) {
  auto real = std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      std::chrono::duration<double>(deadline) * dilation_);
  std::this_thread::sleep_until(epoch_ + real);
}

Duration ManualClock::now() const {
  std::lock_guard lock(mu_);
  return now_;
}
void ManualClock::sleep_until(Duration deadline) {
  std::unique_lock lock(mu_);
  cv_.wait(lock, [&] { return now_ >= deadline; });
}
void ManualClock::advance(Duration d) {
  {
    std::lock_guard lock(mu_);
    now_ += d;
  }
  cv_.notify_all();
}

}  // namespace dualpath
