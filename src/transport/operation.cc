#include "transport/operation.h"

#include <chrono>
#include <utility>

#include "common/log.h"

namespace dualpath::transport {

void OpState::complete(const Status& status) {
  CompletionCallback callback;
  {
    MutexLock lock(mu_);
    if (done_ || completing_) return;
    completing_ = true;
    callback = std::move(callback_);
    canceller_ = nullptr;
  }
  // The callback runs before waiters wake, so a waiter sees its effects.
  if (callback) callback(status);
  {
    MutexLock lock(mu_);
    done_ = true;
    status_ = status;
  }
  cv_.notify_all();
}

bool OpState::done() const {
  MutexLock lock(mu_);
  return done_;
}

Status OpState::status() const {
  MutexLock lock(mu_);
  return done_ ? status_ : Status::in_progress();
}

Status OpState::wait_for(Duration timeout) {
  if (std::this_thread::get_id() == progress_thread_) {
    MutexLock lock(mu_);
    if (done_) return status_;
    return Status::failed_precondition(
        "an operation was waited on from the progress thread that completes it; wait from "
        "another thread or use OpOptions::on_complete");
  }
  MutexLock lock(mu_);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!done_) {
    if (!cv_.wait_until(lock, deadline) && !done_) {
      return Status::timed_out("operation still running after the wait's timeout");
    }
  }
  return status_;
}

void OpState::request_cancel() {
  std::function<void()> canceller;
  {
    MutexLock lock(mu_);
    if (done_ || completing_) return;
    canceller = std::exchange(canceller_, nullptr);
  }
  if (canceller) canceller();
}

void OpState::set_canceller(std::function<void()> canceller) {
  MutexLock lock(mu_);
  if (!done_ && !completing_) canceller_ = std::move(canceller);
}

Operation& Operation::operator=(Operation&& other) noexcept {
  if (this != &other) {
    release();
    state_ = std::move(other.state_);
  }
  return *this;
}

Operation::~Operation() { release(); }

void Operation::release() {
  if (!state_ || state_->done()) return;
  state_->request_cancel();
  if (std::this_thread::get_id() == state_->progress_thread()) {
    // The progress thread cannot wait for itself; the worker still owns the state and completes
    // it, so dropping our reference is safe.
    DP_LOG_WARN("transport: an unfinished operation was dropped on its progress thread");
    return;
  }
  // Bounded: every operation completes by its deadline (see the class comment).
  while (state_->wait_for(std::chrono::seconds(1)).is_timed_out() && !state_->done()) {
  }
}

Status Operation::wait_for(Duration timeout) {
  return state_ ? state_->wait_for(timeout) : Status::ok();
}

Status Operation::wait() {
  if (!state_) return Status::ok();
  for (;;) {
    Status s = state_->wait_for(std::chrono::seconds(1));
    if (!s.is_timed_out() || state_->done()) return s;
  }
}

}  // namespace dualpath::transport
