#include "store/io_batch.h"

#include <fmt/format.h>

#include "store/batch_state.h"
#include "store/file_store.h"

namespace dualpath::store {
namespace internal {

void BatchState::on_op_done(IoOp& op) { store_.finish_op(*this, op); }

void BatchState::complete(size_t i, Status status) {
  std::lock_guard lock(mu_);
  results_[i] = std::move(status);
  // Notify under the lock: a waiter may destroy its handle as soon as it sees zero, and the
  // worker's own shared_ptr keeps this object alive until on_op_done returns.
  if (--remaining_ == 0) cv_.notify_all();
}

void BatchState::submit(std::shared_ptr<BatchState> self) {
  {
    std::lock_guard lock(self->mu_);
    self->submitted_ = true;
  }
  IoWorker& worker = self->worker_;
  worker.submit(std::move(self));
}

Status BatchState::wait_for(Duration timeout) {
  std::unique_lock lock(mu_);
  if (cv_.wait_for(lock, timeout, [this] { return remaining_ == 0; })) return Status::ok();
  return Status::timed_out(fmt::format(
      "{} of {} block {}s still running after {:.3f} s; wait again, or destroy the batch to "
      "cancel them",
      remaining_, results_.size(), kind_ == Kind::kRead ? "read" : "write", to_seconds(timeout)));
}

bool BatchState::done() const {
  std::lock_guard lock(mu_);
  return remaining_ == 0;
}

void BatchState::cancel_and_wait() {
  std::unique_lock lock(mu_);
  if (remaining_ == 0) return;
  if (submitted_ && !cancel_requested_) {
    cancel_requested_ = true;
    worker_.cancel(this);
  }
  // No deadline: the contract is that no completion outlives the handle. Cancelled ops complete
  // promptly; ops already in the device finish on their own.
  cv_.wait(lock, [this] { return remaining_ == 0; });
}

}  // namespace internal

IoBatch::IoBatch(std::shared_ptr<internal::BatchState> state) : state_(std::move(state)) {}
IoBatch::IoBatch(IoBatch&&) noexcept = default;
IoBatch& IoBatch::operator=(IoBatch&& other) noexcept {
  if (this != &other) {
    cancel_and_wait();
    state_ = std::move(other.state_);
  }
  return *this;
}
IoBatch::~IoBatch() { cancel_and_wait(); }

Status IoBatch::wait_for(Duration timeout) {
  if (!state_) return Status::ok();
  return state_->wait_for(timeout);
}

Status IoBatch::poll() const {
  if (!state_ || state_->done()) return Status::ok();
  return Status::in_progress();
}

size_t IoBatch::size() const { return state_ ? state_->results().size() : 0; }

std::span<const Status> IoBatch::results() const {
  if (!state_) return {};
  return state_->results();
}

size_t IoBatch::ok_count() const {
  size_t n = 0;
  for (const Status& s : results()) n += s.is_ok() ? 1 : 0;
  return n;
}

void IoBatch::cancel_and_wait() {
  if (state_) state_->cancel_and_wait();
}

}  // namespace dualpath::store
