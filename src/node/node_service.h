#pragma once
// NodeService: one node's engines behind the Node service of the control plane (control.proto),
// called by the scheduler it registered with.
//
//   - A call must carry the session token of the node's current registration: a call from
//     another scheduler (or an earlier session of this one) is refused, never run.
//   - Every message becomes an engine value through control/convert.h's range checks: a
//     malformed call is an error status and the node goes on.
//   - Calls run on gRPC's handler pool, bounded by the server (control/rpc.h): a call beyond it
//     is refused as busy and the scheduler places the turn elsewhere.
//   - A call its caller cancels (the scheduler gave up, the client went away, the turn's node
//     died), or whose deadline passed, cancels its request here within kCancelPoll: a watcher
//     thread looks at every running call's context, since the synchronous API does not call back.
//   - A decode streams its tokens as they are generated; a client that stops reading cancels it.
//
// Threads: thread-safe; handlers run on gRPC's pool; one watcher thread.

#include <atomic>
#include <map>
#include <memory>
#include <string>
#include <thread>

#include "common/mutex.h"
#include "control/control.grpc.pb.h"
#include "engine/decode_engine.h"
#include "engine/node_runtime.h"
#include "engine/prefill_engine.h"

namespace dualpath::node {

namespace pb = ::dualpath::control::v1;

class NodeService final : public pb::Node::Service {
 public:
  // The service starts before the node has its runtime (its address goes in the registration):
  // until install(), every call is answered UNAVAILABLE ("starting").
  NodeService();
  ~NodeService() override;
  // Once, from the thread that built them: the runtime and its engine, which must outlive the
  // service's server.
  void install(engine::NodeRuntime& runtime,
               std::unique_ptr<engine::PrefillEngine> pe,
               std::unique_ptr<engine::DecodeEngine> de);
  NodeService(const NodeService&) = delete;
  NodeService& operator=(const NodeService&) = delete;

  // The token a call must carry: this registration's (control::kSessionMetadata).
  void set_session(std::string token);
  // The session with the scheduler ended: what runs now is cancelled (nobody waits for it).
  void cancel_all();
  // Housekeeping, every report interval: expired DE buffers, safe quarantined HBM.
  void tick();
  engine::LoadReport report() const;

  grpc::Status Peers(grpc::ServerContext* ctx, const pb::PeersRequest* req, pb::Ack*) override;
  grpc::Status Prepare(grpc::ServerContext* ctx, const pb::PrepareRequest* req,
                       pb::PrepareReply* reply) override;
  grpc::Status Prefill(grpc::ServerContext* ctx, const pb::PrefillRequest* req,
                       grpc::ServerWriter<pb::PrefillEvent>* writer) override;
  grpc::Status Decode(grpc::ServerContext* ctx, const pb::DecodeRequest* req,
                      grpc::ServerWriter<pb::DecodeEvent>* writer) override;
  grpc::Status Release(grpc::ServerContext* ctx, const pb::RequestRef* req, pb::Ack*) override;
  grpc::Status Cancel(grpc::ServerContext* ctx, const pb::RequestRef* req, pb::Ack*) override;
  grpc::Status Stop(grpc::ServerContext* ctx, const pb::RequestRef* req, pb::Ack*) override;
  grpc::Status Status(grpc::ServerContext* ctx, const pb::StatusRequest*,
                      pb::LoadReport* reply) override;

 private:
  // Refuses a call without this registration's token.
  grpc::Status check_session(const grpc::ServerContext& ctx) const;
  // While alive, the watcher cancels `request_id` once `ctx` is cancelled or past its deadline.
  class Watch;
  void watch_loop();
  void cancel_request(uint64_t request_id);
  engine::NodeId self() const;

  // Set by install(), before ready_ (release); handlers read them after ready_ (acquire).
  engine::NodeRuntime* rt_ = nullptr;
  std::unique_ptr<engine::PrefillEngine> pe_;
  std::unique_ptr<engine::DecodeEngine> de_;
  std::atomic<bool> ready_{false};
  mutable Mutex mu_;
  CondVar cv_;
  std::string session_ DP_GUARDED_BY(mu_);
  std::map<grpc::ServerContext*, uint64_t> watched_ DP_GUARDED_BY(mu_);
  bool stopping_ DP_GUARDED_BY(mu_) = false;
  std::thread watcher_;
};

}  // namespace dualpath::node
