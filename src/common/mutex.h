#pragma once
// Mutex, MutexLock and CondVar: std::mutex and std::condition_variable with clang's
// thread-safety annotations (thread_annotations.h), so that every member a mutex guards says so
// and clang checks each access (STYLE.md). Waits take a deadline on the injected dualpath::Clock
// (common/clock.h), so that leases and timeouts are tested with a ManualClock.
//
// Waits are written as loops in the caller, where the lock is visibly held:
//
//   MutexLock lock(mu_);
//   while (queue_.empty() && !stopping_) {
//     if (!clock_.wait_until(cv_, lock, deadline)) return Status::timed_out(...);
//   }
//
// (a predicate lambda would read guarded members where the analysis cannot see the lock).
//
// Thread-safe, as the standard types they wrap.

#include <chrono>
#include <condition_variable>
#include <mutex>

#include "dualpath/units.h"
#include "common/thread_annotations.h"

namespace dualpath {

class DP_CAPABILITY("mutex") Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void lock() DP_ACQUIRE() { mu_.lock(); }
  void unlock() DP_RELEASE() { mu_.unlock(); }
  bool try_lock() DP_TRY_ACQUIRE(true) { return mu_.try_lock(); }
  // Tells the analysis that the caller holds this mutex (a callback documented to run under it).
  void assert_held() const DP_ASSERT_CAPABILITY(this) {}

 private:
  friend class CondVar;
  std::mutex mu_;
};

// Holds a Mutex for its scope; unlock() / lock() release and retake it inside the scope (for a
// call that must not run under the lock: an RPC, a callback).
class DP_SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex& mu) DP_ACQUIRE(mu) : mu_(mu) { mu_.lock(); }
  ~MutexLock() DP_RELEASE() {
    if (held_) mu_.unlock();
  }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

  void unlock() DP_RELEASE() {
    mu_.unlock();
    held_ = false;
  }
  void lock() DP_ACQUIRE() {
    mu_.lock();
    held_ = true;
  }

 private:
  friend class CondVar;
  Mutex& mu_;
  bool held_ = true;
};

class CondVar {
 public:
  // Blocks until notified (or a spurious wakeup): only for waits that another thread is sure to
  // end (a shutdown flag it sets and notifies). Everything else waits with a deadline.
  void wait(MutexLock& lock) {
    std::unique_lock<std::mutex> l(lock.mu_.mu_, std::adopt_lock);
    cv_.wait(l);
    l.release();
  }
  // Blocks until notified or the steady clock reaches `deadline`; false when it did.
  bool wait_until(MutexLock& lock, std::chrono::steady_clock::time_point deadline) {
    std::unique_lock<std::mutex> l(lock.mu_.mu_, std::adopt_lock);
    const bool timed_out = cv_.wait_until(l, deadline) == std::cv_status::timeout;
    l.release();
    return !timed_out;
  }
  bool wait_for(MutexLock& lock, Duration timeout) {
    return wait_until(lock, std::chrono::steady_clock::now() + timeout);
  }
  void notify_one() { cv_.notify_one(); }
  void notify_all() { cv_.notify_all(); }

 private:
  std::condition_variable cv_;
};

}  // namespace dualpath
