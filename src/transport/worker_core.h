#pragma once
// WorkerCore: the progress-thread side of a Worker (transport/ internal; includes UCX).
// Everything here except post() and stop() runs on the progress thread only.

#include <ucp/api/ucp.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/mutex.h"
#include "dualpath/status.h"
#include "transport/am_buffer_pool.h"
#include "transport/worker.h"

namespace dualpath::transport {

using SteadyTime = std::chrono::steady_clock::time_point;
// Called once on the progress thread with the result of a started operation.
using DoneFn = std::function<void(const Status&)>;

// Per-endpoint state shared by the Endpoint handle and the progress thread.
struct EndpointState {
  ucp_ep_h ep = nullptr;  // progress thread only; null once closed
  uint64_t peer_worker_id = 0;
  uint64_t peer_context_id = 0;
  std::string peer_name;
  WorkerCore* core = nullptr;
  // UCP_ERR_HANDLING_MODE_PEER (UCX reports a lost peer); false on shared memory and for the
  // loopback endpoint, where only deadlines detect trouble.
  bool peer_failure_mode = true;
  // Set (release) by fail() on the progress thread; read (acquire) by callers' validation so a
  // failed endpoint refuses new work without a trip through the inbox.
  std::atomic<bool> failed{false};
  mutable Mutex mu;
  Status failure DP_GUARDED_BY(mu);  // the error that closed the endpoint

  Status health() const;
};

// The inbox: the named queue through which other threads hand work to the progress thread.
// Thread-safe. push() wakes the progress thread through an eventfd.
class TaskInbox {
 public:
  TaskInbox();
  ~TaskInbox();
  void push(std::function<void()> task);
  // Moves every queued task into `out` (progress thread; `out` empty). An empty inbox costs
  // neither a lock nor an allocation.
  void take_all(std::deque<std::function<void()>>& out);
  bool empty() const { return !has_tasks_.load(std::memory_order_acquire); }
  int fd() const { return event_fd_; }
  // Drains the eventfd if a push signalled it since the last call (a polling loop calls this
  // every iteration: without the flag that was a read() syscall each time), or always with
  // `force` (after ppoll saw it readable: a push between its write and its flag must not leave
  // the eventfd readable, or every ppoll would return at once until that pusher runs again).
  void clear_signal(bool force = false);

 private:
  int event_fd_;
  mutable Mutex mu_;
  std::deque<std::function<void()>> tasks_ DP_GUARDED_BY(mu_);
  // Mirrors !tasks_.empty() (written under mu_), so an empty inbox costs no lock.
  std::atomic<bool> has_tasks_{false};
  // Set after each write to the eventfd; clear_signal() reads the eventfd only when it is set.
  std::atomic<bool> signalled_{false};
};

class WorkerCore {
 public:
  WorkerCore(ucp_context_h context,
             ucp_worker_h worker,
             std::string name,
             Duration poll_before_sleep,
             Duration poll_while_in_flight = Duration::zero());
  ~WorkerCore();  // destroys the UCP worker; the progress thread must have stopped

  // Thread-safe.
  void post(std::function<void()> task) { inbox_.push(std::move(task)); }
  void stop();

  // The progress thread's main loop; returns after stop().
  void run();

  ucp_worker_h native() const { return worker_; }
  const std::string& name() const { return name_; }

  // Runs `task` at `when` (progress thread); the returned key cancels it. Used by the traffic
  // manager's rate limiter and queue deadlines.
  using TimerKey = std::pair<SteadyTime, uint64_t>;
  TimerKey post_at(SteadyTime when, std::function<void()> task);
  void cancel_timer(const TimerKey& key) { timers_.erase(key); }

  // Posts `ops` on `ep` (puts or gets, requests released at once) followed by one endpoint flush
  // whose completion completes the batch: the doorbell batching of PAPER.md §7.
  void start_rma(
      RmaKind kind, EndpointState& ep, std::vector<RmaOp> ops, SteadyTime deadline, DoneFn done);
  void start_am(EndpointState& ep,
                uint16_t am_id,
                std::vector<std::byte> header,
                std::span<const std::byte> data,
                ucp_mem* data_memh,
                SteadyTime deadline,
                DoneFn done);
  void set_am_handler(uint16_t am_id, AmHandler handler, Status& result);

  // Creates the UCX endpoint of `state` from a raw UCX worker address.
  Status create_endpoint(EndpointState& state, std::span<const std::byte> ucx_address);
  // Marks the endpoint failed with `why` (new work is refused). In peer mode it is then
  // force-closed from the main loop and UCX completes every request on it with an error;
  // without peer mode its pending operations are completed here (abandon). Safe inside UCX
  // callbacks: it makes no UCX call.
  void fail_endpoint(EndpointState& state, const Status& why);
  // Closes an endpoint now (forced in peer mode; see the .cc). Not from inside a UCX callback.
  void close_endpoint(EndpointState& state);

 private:
  struct Pending;
  struct AmSlot;
  struct AmRecv;

  Pending& add_pending(EndpointState& ep,
                       SteadyTime deadline,
                       DoneFn done,
                       const char* verb,
                       uint64_t bytes,
                       size_t pieces,
                       int am_id);
  void finish(Pending& p, ucs_status_t status);
  std::optional<AmBufferPool::Buffer> allocate_am_buffer(ucp_context_h context, size_t capacity);
  void expire(SteadyTime now);
  // Closes the endpoints fail_endpoint scheduled (main loop only, outside UCX callbacks).
  void close_scheduled();
  // Completes a pending operation without UCX (its request stays parked, see fail_endpoint).
  void abandon(uint64_t id, const Status& status);
  bool run_timers(SteadyTime now);
  SteadyTime next_wakeup() const;
  static void on_send_done(void* request, ucs_status_t status, void* user_data);
  static void on_ep_error(void* arg, ucp_ep_h ep, ucs_status_t status);
  static ucs_status_t on_am(void* arg,
                            const void* header,
                            size_t header_length,
                            void* data,
                            size_t length,
                            const ucp_am_recv_param_t* param);
  static void on_am_data(void* request, ucs_status_t status, size_t length, void* user_data);

  ucp_worker_h worker_;
  std::string name_;
  Duration poll_before_sleep_;     // WorkerOptions::poll_before_sleep
  Duration poll_while_in_flight_;  // WorkerOptions::poll_while_in_flight, resolved
  uint64_t am_receiving_ = 0;      // rendezvous receives not yet complete (on_am .. on_am_data)
  TaskInbox inbox_;
  bool stopping_ = false;
  uint64_t next_pending_id_ = 1;
  std::unordered_map<uint64_t, std::unique_ptr<Pending>> pending_;
  std::set<std::pair<SteadyTime, uint64_t>> deadlines_;  // (deadline, pending id)
  std::vector<std::unique_ptr<Pending>> abandoned_;      // completed by us, UCX may still call back
  int closing_ = 0;  // endpoint closes in flight (their callback frees the request)
  uint64_t next_timer_id_ = 1;
  std::map<TimerKey, std::function<void()>> timers_;
  std::map<uint16_t, std::unique_ptr<AmSlot>> am_slots_;
  AmBufferPool am_buffers_;               // rendezvous receive buffers (on_am, on_am_data)
  std::vector<EndpointState*> to_close_;  // failed in peer mode, to close from the main loop
};

}  // namespace dualpath::transport
