#pragma once
// TrafficManager: the one gate for every byte an engine moves (issue 4; PAPER.md §7, the
// CNIC-centric design): transfers to peers, control messages, and local host<->"HBM" copies,
// which are puts through the loopback endpoint, never a memcpy behind its back.
//
// Each submission names a class. The model class (latency-critical: control messages, model
// traffic) is served first by weight, ~99 % of the bytes while both classes are busy; the KV
// class takes the rest and all idle capacity, and is never starved (ClassArbiter). Work reaches
// UCX in pieces of at most chunk_bytes, and at most max_inflight_bytes are handed to UCX at
// once, so a model message waits behind at most that much KV data; the KV class may fill only
// max_inflight_bytes - model_reserve_bytes of the window. An active message is never split (a
// rendezvous message is one UCX operation): one larger than the window goes out alone, when
// nothing else is in flight, and cannot be preempted once handed to UCX; the model class keeps
// its reserve beside it. Many small pieces (layer blocks) go out as one doorbell batch: up to
// max_batch_ops puts, then one flush. An optional token bucket emulates a slower CNIC.
//
// Endpoints may belong to other workers than the manager's own: the production mapping gives each
// class its own Worker (and Context, with UCX_IB_SL / UCX_IB_TRAFFIC_CLASS set per class,
// docs/transport.md), so the NIC's arbiter separates the classes on the wire and a KV stream
// never occupies the progress thread that serves model messages. Submit each class on an
// endpoint of its worker; the arbitration state stays on the manager's worker, batches start on
// the endpoint's worker and their completions come back through the manager's inbox.
//
// Threads: the manager runs on its Worker's progress thread; its public methods are thread-safe
// (they validate on the calling thread, then queue the work through the worker's inbox).
// One per engine. Destroy it before its Worker and not on its progress thread; destruction
// cancels queued work and waits for what is in flight. Endpoints and buffers named in a transfer
// must outlive it.

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <span>

#include "dualpath/result.h"
#include "transport/class_arbiter.h"
#include "transport/worker.h"

namespace dualpath::transport {

struct Transfer;  // one queued submission (traffic_manager.cc)

// One active message of a batch (TrafficManager::send_am): header bytes are copied at
// submission; `data` must stay valid until the operation completes.
struct AmRequest {
  std::span<const std::byte> header;
  std::span<const std::byte> data;
};

struct TrafficManagerOptions {
  // PAPER.md §7: the IB VL arbiter reserves ≈99 % for the high-priority (model) VL.
  uint32_t model_weight = 99;
  uint32_t kv_weight = 1;
  // The largest piece handed to UCX at once; bounds how long a model message sharing the KV
  // class's worker waits behind one KV piece. Larger pieces mean fewer flushes (measured: with
  // 256 KiB pieces the per-batch cost was ~20 % of an in-cache 4 MiB shared-memory get).
  uint64_t chunk_bytes = 1024 * 1024;
  // Bytes handed to UCX and not yet complete (the queue we let build up in front of the NIC).
  uint64_t max_inflight_bytes = 4 * 1024 * 1024;
  // Part of the window only the model class may use, so it never waits for window space.
  uint64_t model_reserve_bytes = 256 * 1024;
  // Pieces per doorbell batch (one flush each).
  uint32_t max_batch_ops = 64;
  // CNIC emulation: limits both classes together to this rate; 0 turns it off.
  double rate_limit_gbps = 0;
  uint64_t rate_burst_bytes = 1024 * 1024;
};

// Counters, for benchmarks and tests.
struct TrafficStats {
  std::array<uint64_t, kTrafficClassCount> bytes{};
  std::array<uint64_t, kTrafficClassCount> transfers{};
  uint64_t batches = 0;  // doorbells: flushes or AM sends handed to UCX
  uint64_t pieces = 0;   // puts/gets handed to UCX
};

class TrafficManager {
 public:
  // Opens the loopback endpoint for local copies. kInvalidArgument for inconsistent options.
  static Result<std::unique_ptr<TrafficManager>> create(Worker& worker,
                                                        TrafficManagerOptions options);
  ~TrafficManager();
  TrafficManager(const TrafficManager&) = delete;
  TrafficManager& operator=(const TrafficManager&) = delete;

  // Puts every request (the same checks as Worker::put, returned as errors). The operation
  // completes when all bytes are at the target, with the first error otherwise; its timeout
  // runs from submission and covers queueing. Destroying an unfinished operation drops its
  // queued pieces and waits for those in flight.
  Result<Operation> put(TrafficClass cls,
                        Endpoint& endpoint,
                        std::span<const RmaRequest> requests,
                        OpOptions options = {});
  Result<Operation> get(TrafficClass cls,
                        Endpoint& endpoint,
                        std::span<const RmaRequest> requests,
                        OpOptions options = {});
  // An active message (control traffic is normally TrafficClass::kModel).
  Result<Operation> send_am(TrafficClass cls,
                            Endpoint& endpoint,
                            uint16_t am_id,
                            std::span<const std::byte> header,
                            std::span<const std::byte> data,
                            OpOptions options = {});
  // Several active messages to one endpoint as one submission: they go out in order, each as
  // its own UCX send, under the same arbitration and window as single ones; the operation
  // completes when every message has (with the first error otherwise). One submission instead
  // of one per message saves the caller a hand-off to the progress thread and a wake-up per
  // message: the AM counterpart of a put batch.
  Result<Operation> send_am(TrafficClass cls,
                            Endpoint& endpoint,
                            uint16_t am_id,
                            std::span<const AmRequest> messages,
                            OpOptions options = {});

  // The endpoint to this worker itself: host<->"HBM" copies are puts (or gets) through it, to a
  // region imported for it (Worker::import_region(local_endpoint(), arena.descriptor())).
  Endpoint& local_endpoint() { return *local_endpoint_; }
  Worker& worker() { return worker_; }
  const TrafficManagerOptions& options() const { return options_; }
  TrafficStats stats() const;

  struct Core;  // progress-thread state (traffic_manager.cc)

 private:
  TrafficManager(Worker& worker, TrafficManagerOptions options);
  // Stamps the deadline, id and completion state on `t` and queues it on the progress thread.
  std::shared_ptr<OpState> start_transfer(std::unique_ptr<Transfer> t, OpOptions& options);
  Result<Operation> submit_rma(RmaKind kind,
                               TrafficClass cls,
                               Endpoint& endpoint,
                               std::span<const RmaRequest> requests,
                               OpOptions options);

  Worker& worker_;
  TrafficManagerOptions options_;
  std::unique_ptr<Endpoint> local_endpoint_;
  // Shared with the cancel tasks of unfinished operations, which hold it weakly, so that a late
  // cancel finds either the core or nothing.
  std::shared_ptr<Core> core_;
  std::atomic<uint64_t> next_id_{1};
};

}  // namespace dualpath::transport
