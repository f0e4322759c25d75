#pragma once
// Operation: the move-only handle of one in-flight transfer (a put batch, a get batch, an active
// message, or a traffic-manager transfer made of many of them).
//
// Every operation completes exactly once, with OK or an error, by its deadline at the latest:
// when the deadline passes the worker force-closes the endpoint, which makes UCX release every
// request on it (kTimedOut for the late one, kUnavailable for its neighbours). A dead peer is
// reported the same way as soon as UCX notices (error handling mode "peer").
//
// Destruction cancels what has not been handed to UCX yet (traffic-manager queues) and then waits
// for the rest, so no completion can touch a freed buffer; the buffers must outlive the handle.
// Thread-safe: any thread may wait; the progress thread must never wait (it would wait on itself).

#include <functional>
#include <memory>
#include <thread>

#include "common/mutex.h"
#include "dualpath/status.h"
#include "dualpath/units.h"

namespace dualpath::transport {

// Called once, on the worker's progress thread, when the operation completes. Must not block.
using CompletionCallback = std::function<void(const Status&)>;

struct OpOptions {
  // How long the operation may take before it fails with kTimedOut; zero means the worker's
  // default (WorkerOptions::default_timeout).
  Duration timeout{0};
  CompletionCallback on_complete;
};

// Shared between the Operation handle (the waiter) and the worker or traffic manager that
// completes it; a shared_ptr because either side may go first.
class OpState {
 public:
  OpState(CompletionCallback callback, std::thread::id progress_thread)
      : callback_(std::move(callback)), progress_thread_(progress_thread) {}

  // Runs the callback, then records the result and wakes waiters. Later calls are ignored.
  void complete(const Status& status);
  bool done() const;
  Status status() const;  // kInProgress until done
  Status wait_for(Duration timeout);
  // Asks the owner to drop work not yet handed to UCX. Runs the canceller set by the owner, once.
  void request_cancel();
  void set_canceller(std::function<void()> canceller);
  std::thread::id progress_thread() const { return progress_thread_; }

 private:
  mutable Mutex mu_;
  CondVar cv_;
  bool done_ DP_GUARDED_BY(mu_) = false;
  bool completing_ DP_GUARDED_BY(mu_) = false;  // the callback is running
  Status status_ DP_GUARDED_BY(mu_);
  CompletionCallback callback_ DP_GUARDED_BY(mu_);  // until done_
  std::function<void()> canceller_ DP_GUARDED_BY(mu_);
  const std::thread::id progress_thread_;
};

class Operation {
 public:
  Operation() = default;  // an empty handle: done, OK
  explicit Operation(std::shared_ptr<OpState> state) : state_(std::move(state)) {}
  Operation(Operation&&) noexcept = default;
  Operation& operator=(Operation&& other) noexcept;
  Operation(const Operation&) = delete;
  Operation& operator=(const Operation&) = delete;
  ~Operation();

  bool done() const { return !state_ || state_->done(); }
  // The result, or kInProgress while running.
  Status status() const { return state_ ? state_->status() : Status::ok(); }
  // Blocks until done or `timeout` passes; kTimedOut then means "still running" (the operation
  // keeps going and will still complete by its own deadline). Returns the operation's result.
  // Called on the progress thread it returns kFailedPrecondition instead of deadlocking.
  Status wait_for(Duration timeout);
  // Blocks until done; bounded by the operation's own deadline.
  Status wait();
  // Lets the operation run on without this handle (fire-and-forget, e.g. a reply sent from an
  // active-message handler). It still completes and runs its callback; the buffers must still
  // outlive it.
  void detach() { state_.reset(); }
  // The shared state, for the code that completes the operation (transport/ internal).
  const std::shared_ptr<OpState>& state() const { return state_; }

 private:
  void release();
  std::shared_ptr<OpState> state_;
};

}  // namespace dualpath::transport
