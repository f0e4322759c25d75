#include "store/io_batch.h"

#include <utility>

#include <fmt/format.h>

#include "store/batch_state.h"
#include "store/file_store.h"

namespace dualpath::store {
namespace internal {

void BatchState::on_op_done(IoOp& op) {
  if (kind_ == Kind::kWrite) {
    Status status = store_.finish_write(*this, op);
    MutexLock lock(mu_);
    --ops_in_io_;
    results_[op.tag] = std::move(status);
    // Notify under the lock: a waiter may destroy its handle as soon as it sees zero; the
    // worker's own shared_ptr keeps this object alive until on_op_done returns.
    if (--remaining_ == 0 || ops_in_io_ == 0) cv_.notify_all();
    return;
  }
  store_.note_read_io_done();
  MutexLock lock(mu_);
  --ops_in_io_;
  ready_reads_.push_back(&op);
  cv_.notify_all();
}

void BatchState::complete(size_t i, Status status) {
  MutexLock lock(mu_);
  results_[i] = std::move(status);
  if (--remaining_ == 0) cv_.notify_all();
}

void BatchState::submit(std::shared_ptr<BatchState> self) {
  {
    MutexLock lock(self->mu_);
    self->submitted_ = true;
    self->ops_in_io_ = self->ops.size();
  }
  IoWorker& worker = self->worker_;
  worker.submit(std::move(self));
}

std::vector<Status> BatchState::verify_reads(std::span<IoOp* const> ready) {
  std::vector<Status> outcomes;
  outcomes.reserve(ready.size());
  for (IoOp* op : ready) outcomes.push_back(store_.finish_read(*this, *op));
  return outcomes;
}

void BatchState::record_reads(std::span<IoOp* const> ready, std::vector<Status> outcomes) {
  for (size_t i = 0; i < ready.size(); ++i) {
    results_[ready[i]->tag] = std::move(outcomes[i]);
    --remaining_;
  }
}

Status BatchState::wait_for(Duration timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  MutexLock lock(mu_);
  for (;;) {
    while (!ready_reads_.empty()) {
      const std::vector<IoOp*> ready = std::exchange(ready_reads_, {});
      lock.unlock();
      std::vector<Status> outcomes = verify_reads(ready);
      lock.lock();
      record_reads(ready, std::move(outcomes));
    }
    if (remaining_ == 0) return Status::ok();
    while (ready_reads_.empty() && remaining_ != 0) {
      if (!cv_.wait_until(lock, deadline) && ready_reads_.empty() && remaining_ != 0) {
        return Status::timed_out(fmt::format(
            "{} of {} block {}s still running after {:.3f} s; wait again, or destroy the batch "
            "to cancel them",
            remaining_, results_.size(), kind_ == Kind::kRead ? "read" : "write",
            to_seconds(timeout)));
      }
    }
  }
}

bool BatchState::poll() {
  MutexLock lock(mu_);
  while (!ready_reads_.empty()) {
    const std::vector<IoOp*> ready = std::exchange(ready_reads_, {});
    lock.unlock();
    std::vector<Status> outcomes = verify_reads(ready);
    lock.lock();
    record_reads(ready, std::move(outcomes));
  }
  return remaining_ == 0;
}

void BatchState::cancel_and_wait() {
  MutexLock lock(mu_);
  if (remaining_ == 0) return;
  if (submitted_ && ops_in_io_ > 0 && !cancel_requested_) {
    cancel_requested_ = true;
    worker_.cancel(this);
  }
  // No deadline: the contract is that no completion outlives the handle. Cancelled ops complete
  // promptly; ops already in the device finish on their own.
  while (ops_in_io_ != 0) cv_.wait(lock);
  // Reads that completed but were never waited for: release them without verifying.
  for (IoOp* op : ready_reads_) {
    store_.abandon_read(*this, *op);
    results_[op->tag] = Status::aborted("the batch was destroyed before this read was waited for");
    --remaining_;
  }
  ready_reads_.clear();
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

Status IoBatch::poll() {
  if (!state_ || state_->poll()) return Status::ok();
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
