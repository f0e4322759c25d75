#pragma once
// PrefillEngine: the layerwise prefill of requests on the engines of a PE node (each request
// names its engine: that engine's HBM arena, traffic manager and compute slots), by either read
// path
// (PAPER.md §4, §5; DESIGN.md "Data paths"):
//
//   PE read path: storage -> PE buffer (Full Blocks), then per layer l
//                 PE buffer -> PE HBM slot (traffic-manager put on the loopback endpoint),
//                 compute layer l over hit + miss tokens,
//                 PE HBM -> DE buffer (hit + miss KV of layer l, put over UCX).
//   DE read path: the DE has read the hit blocks into its DE buffer; per layer l the PE asks it
//                 (kPushLayerAm) to put layer l's hit Layer Blocks into a PE HBM slot, computes,
//                 and puts only the miss tokens' KV into the DE buffer, next to the hit KV.
//   recompute:    no reads; every prompt token is a miss.
//
// The HBM arena holds `pipeline_depth` layer slots of [token][bytes] rows: while layer l computes
// in one slot, layer l+1's hit KV is already in flight to the next and (with the default 3)
// layer l-1's KV is on its way to the DE buffer from a third; a slot is reused only after its
// previous layer's KV has reached the DE buffer. Since the PE HBM slot rows are token-major
// and the DE buffer holds Full Blocks, block b of layer l is one contiguous put each way: Layer
// Blocks are views, never converted.
//
// Lifetimes. A request id is unique per attempt (a retried turn gets a new one), so it is the
// epoch of everything the request owns: a "layer pushed" answer of an earlier attempt can never
// complete a later one. A DE push is an RDMA put into this engine's HBM slot, which the PE cannot
// refuse once it is in flight; so a prefill that fails with pushes still unanswered does not
// return its HBM lease to the pool, it quarantines it until every push is answered or twice the
// request timeout has passed (the DE drops pushes for requests older than the timeout). The slot
// is never reused under a late push.
//
// Cancellation (NodeRuntime::cancels()): checked before every layer; a cancelled prefill stops
// with kAborted and releases its buffers (after the quarantine rule above).
//
// Threads: thread-safe; prefill() runs on the node's control workers, several requests at once
// (each with its own leases and pass); the kLayerPushedAm handler runs on the worker's progress
// thread and only records arrivals. Destruction removes the handler.

#include <cstdint>
#include <map>
#include <functional>
#include <utility>
#include <vector>

#include "common/mutex.h"
#include "engine/engine_types.h"
#include "engine/node_runtime.h"

namespace dualpath::engine {

class PrefillEngine {
 public:
  // Installs the kLayerPushedAm handler on the runtime's worker.
  static Result<std::unique_ptr<PrefillEngine>> create(NodeRuntime& runtime);
  // Replaces the handler by one that drops messages; the worker outlives the engine.
  ~PrefillEngine();
  PrefillEngine(const PrefillEngine&) = delete;
  PrefillEngine& operator=(const PrefillEngine&) = delete;

  // Errors: kInvalidArgument (a malformed request: hits not whole blocks, a token outside the
  // vocabulary, no such engine or DE node), kAborted (cancelled), kNotFound (a hit block
  // vanished: recompute), kTimedOut / kUnavailable (a peer, the store or a transfer).
  // `on_read_done` (may be empty) is called once, on the calling thread, when this node's part of
  // the hit is in its buffer; not at all when the node reads nothing.
  Result<PrefillReply> prefill(const PrefillRequest& request,
                               const std::function<void()>& on_read_done = {});
  // Wakes prefills waiting for a push or a GPU, so a cancelled one stops at once.
  void notify_cancel();
  // HBM leases held back from failed prefills (see above) that are now safe: returned.
  void release_quarantined();
  size_t quarantined() const;

 private:
  // One of the node's GPUs (setup().compute_slots of them), held for a prefill's layers.
  class ComputeSlot {
   public:
    ComputeSlot() = default;
    ComputeSlot(PrefillEngine* owner, int engine) : owner_(owner), engine_(engine) {}
    ComputeSlot(ComputeSlot&& o) noexcept
        : owner_(std::exchange(o.owner_, nullptr)), engine_(o.engine_) {}
    ComputeSlot& operator=(ComputeSlot&& o) noexcept {
      release();
      owner_ = std::exchange(o.owner_, nullptr);
      engine_ = o.engine_;
      return *this;
    }
    ~ComputeSlot() { release(); }
    void release() {
      if (owner_ != nullptr) std::exchange(owner_, nullptr)->release_compute_slot(engine_);
    }

   private:
    PrefillEngine* owner_ = nullptr;
    int engine_ = 0;
  };

  explicit PrefillEngine(NodeRuntime& runtime) : rt_(runtime) {}
  // Waits until fewer than compute_slots prefills compute on `engine` (no wait when the limit
  // is 0).
  // `deadline` is a time on the runtime's clock.
  Result<ComputeSlot> acquire_compute_slot(int engine, uint64_t request_id, Duration deadline);
  void release_compute_slot(int engine);
  void on_layer_pushed(uint64_t request_id, uint32_t layer, int32_t code);
  // Waits for the DE's "layer pushed" of (request, layer) until `deadline`.
  Status wait_layer_pushed(uint64_t request_id, uint32_t layer, Duration deadline);

  NodeRuntime& rt_;
  mutable Mutex mu_;
  CondVar cv_;
  std::map<std::pair<uint64_t, uint32_t>, int32_t> pushed_ DP_GUARDED_BY(mu_);  // -> StatusCode
  std::map<int, int> busy_slots_ DP_GUARDED_BY(mu_);                           // per engine
  struct Quarantined {
    SlotLease hbm;
    uint64_t request_id = 0;
    uint32_t layers_answered = 0;  // pushes answered: layers [0, layers_answered)
    uint32_t layers_issued = 0;    // pushes asked for: layers [0, layers_issued)
    Duration release_at{0};  // on the runtime's clock
  };
  std::vector<Quarantined> quarantine_ DP_GUARDED_BY(mu_);
};

}  // namespace dualpath::engine
