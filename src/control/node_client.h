#pragma once
// NodeClient: the scheduler's client of one node's Node service (control.proto), over the
// node's channel, with the node's session token on every call.
//
// Every call has a deadline. close() (the node was declared dead: its session broke or its lease
// ran out) fails every call in flight to it at that moment and every later one, with the reason,
// so that no turn waits out a deadline on a node already known dead (issue 31: a turn once took
// 31 s this way). A decode call has no fixed deadline: it fails after `idle_timeout` without a
// message from the node (expire_idle), so a decode that keeps streaming is never cut off.
//
// Threads: thread-safe; calls block their caller (a turn's thread). expire_idle is called
// periodically by one housekeeping thread. No lock is held across an RPC.

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <set>
#include <string>

#include "common/clock.h"
#include "common/mutex.h"
#include "control/control.grpc.pb.h"
#include "control/convert.h"
#include "dualpath/result.h"

namespace dualpath::control {

// The calls of one unit of work (a turn's attempt), which another thread may cancel together:
// the attempt's other node died, the client went away. A call made after cancel() fails at once.
// Thread-safe; shared by the attempt and whoever may cancel it.
class CallGroup {
 public:
  // Cancels every call of the group in flight (they return `why`) and every later one.
  void cancel(const Status& why);
  bool cancelled() const;

 private:
  friend class NodeClient;
  // Adds a call's context; false (and nothing added) when the group is cancelled.
  bool add(grpc::ClientContext* ctx);
  void remove(grpc::ClientContext* ctx);
  Status why() const;

  mutable Mutex mu_;
  std::set<grpc::ClientContext*> calls_ DP_GUARDED_BY(mu_);
  Status why_ DP_GUARDED_BY(mu_);
  bool cancelled_ DP_GUARDED_BY(mu_) = false;
};

class NodeClient {
 public:
  // `name` ("decode node 1") prefixes errors; `clock` times the decode's idle deadline.
  NodeClient(std::shared_ptr<grpc::Channel> channel,
             std::string name,
             std::string session,
             const Clock& clock = real_clock());
  ~NodeClient();
  NodeClient(const NodeClient&) = delete;
  NodeClient& operator=(const NodeClient&) = delete;

  const std::string& name() const { return name_; }

  // Every call may belong to a CallGroup (`group`, may be null) that cancels it from another
  // thread.
  Status peers(const pb::PeersRequest& request, Duration timeout);
  Result<pb::PrepareReply> prepare(const pb::PrepareRequest& request,
                                   Duration timeout,
                                   CallGroup* group = nullptr);
  // A prefill: `on_read_done` (may be empty) is called on the calling thread when the node says
  // its storage read is in, with the tokens it read; returns the final reply.
  Result<pb::PrefillReply> prefill(const pb::PrefillRequest& request,
                                   Duration timeout,
                                   const std::function<void(int64_t)>& on_read_done = {},
                                   CallGroup* group = nullptr);
  // Streams a decode: each token batch goes to `on_tokens` on the calling thread, in order, as
  // it arrives; returns the final reply. kTimedOut after `idle_timeout` with no message.
  Result<pb::DecodeReply> decode(const pb::DecodeRequest& request,
                                 Duration idle_timeout,
                                 const std::function<void(const pb::TokenBatch&)>& on_tokens,
                                 CallGroup* group = nullptr);
  Status release(uint64_t request_id, Duration timeout);
  Status cancel(uint64_t request_id, Duration timeout);
  Status stop(uint64_t request_id, Duration timeout);
  Result<pb::LoadReport> status(Duration timeout);

  // Fails every call in flight now, and every later call, with `why` (kUnavailable). Idempotent.
  void close(const Status& why);
  bool closed() const;
  // Cancels the calls whose idle deadline has passed at `now` (a time on the clock).
  void expire_idle();
  // Calls in flight (tests).
  size_t in_flight() const;

 private:
  struct Call {
    grpc::ClientContext context;
    Duration idle_timeout{0};  // 0: the context's own deadline only
    // When the node last sent something, on clock_; relaxed: only moves the idle deadline.
    std::atomic<int64_t> last_progress_ns{0};
    bool expired = false;  // guarded by the client's mu_ (expire_idle cancelled it)
    CallGroup* group = nullptr;
  };
  // Registers a call (or returns the close reason); the caller runs the RPC without the lock.
  Status begin(Call& call, Duration timeout, CallGroup* group);
  // Unregisters it and turns the RPC's status into ours: the close reason when the client was
  // closed under it, kTimedOut when it went idle.
  Status end(Call& call, const grpc::Status& status, std::string_view what);
  // Reads a stream of events (a oneof whose `done` is the reply) to its end, each other event
  // to `on_event`; the call must have begun.
  template <class Reply, class Event, class OnEvent>
  Result<Reply> read_stream(Call& call,
                            std::unique_ptr<grpc::ClientReader<Event>> reader,
                            const OnEvent& on_event,
                            std::string_view what);
  template <class Reply, class Request, class Method>
  Result<Reply> unary(Method method,
                      const Request& request,
                      Duration timeout,
                      std::string_view what,
                      CallGroup* group = nullptr);

  const std::string name_;
  const std::string session_;
  const Clock& clock_;
  std::unique_ptr<pb::Node::Stub> stub_;
  mutable Mutex mu_;
  std::set<Call*> calls_ DP_GUARDED_BY(mu_);
  Status closed_ DP_GUARDED_BY(mu_);  // why the client was closed; OK while open
  bool is_closed_ DP_GUARDED_BY(mu_) = false;
};

}  // namespace dualpath::control
