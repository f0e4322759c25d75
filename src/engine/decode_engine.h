#pragma once
// DecodeEngine: the DE side of a turn (PAPER.md §4 "Decode start", "Persistence") on the
// engines of a decode node: each request names its engine (PrepareRequest::engine), whose HBM
// arena and traffic manager serve it; the DE buffer is the node's.
//
//   prepare: allocate the request's DE buffer (Full Blocks for prompt + generation) and, on the
//            DE read path, read the hit blocks into it from storage (the DE node's SNIC). The
//            leading dram_tokens come from the node's DRAM tier instead (issue 35): a block it
//            no longer holds is read from storage with the rest.
//   push:    (DE read path, asked by the PE per layer) put layer l's hit Layer Blocks from the DE
//            buffer into the PE's HBM slot, then answer kLayerPushedAm.
//            The PE meanwhile puts the layer's miss KV (or, on the PE path, hit + miss KV)
//            straight into the same DE buffer: the merge is positional, no copy.
//   decode:  DE buffer -> DE HBM (traffic-manager puts on the loopback endpoint, layer-major
//            [layer][token][bytes] in HBM so each layer's KV is one span for attention), release
//            the buffer, greedy decoding for gen_tokens, and persistence: the prompt's new full
//            blocks at once, and each generated block as soon as it is full, each as
//            DE HBM -> DE buffer (a one-block staging lease) -> storage; the copies and writes
//            run behind the decode (up to kPersistsInFlight per request) and the turn ends once
//            all are durable. A block that cannot be persisted (no staging room, a failed
//            write) is skipped and counted: the cache degrades, the turn does not fail.
//            With a DRAM tier, the sequence's whole blocks are then kept in it (Full Block
//            layout) for the session's next turn, by the tier thread after the decode has
//            answered (a GPU's copy engine runs beside the kernels: the client never waits for
//            it), the HBM lease held until the copy is done. Only blocks the tier does not hold
//            yet are copied. The CPU emulation copies them from the HBM arena (host memory here);
//            on a GPU the prompt's blocks are in the DE buffer at decode start and the generated
//            ones pass through the staging leases. A prepare that takes blocks from the tier
//            first waits for the copies queued before it (at most a quarter of its time), so a
//            session that comes straight back finds its last turn there. At most
//            kTierJobsQueued copies wait; a sequence beyond that is not kept (its HBM goes back
//            at once), and its next turn reads from storage.
//
// Lifetimes. A prepared request whose decode never comes (its scheduler died, its PE failed and
// the release was lost) is freed by reap_expired() once it is older than the setup's buffer TTL.
// Pushes are answered only for requests younger than the request timeout: a PE quarantines its
// HBM slots for twice that (prefill_engine.h), so no put can land in a reused slot.
// Cancellation (NodeRuntime::cancels()) is checked between decode steps.
//
// Threads: thread-safe; prepare/decode/release run on the node's control workers, several
// requests at once. Push requests arrive on the worker's progress thread (kPushLayerAm) and are
// queued to the engine's push thread, which is completion-driven: it starts each push's put
// without waiting for it, and sends the answer when the put's completion (queued to it by the
// progress thread) arrives, so one slow push never holds up the others. A handler never blocks.

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <thread>

#include "common/mutex.h"
#include "engine/layer_messages.h"
#include "engine/node_runtime.h"
#include "engine/engine_types.h"

namespace dualpath::engine {

class DecodeEngine {
 public:
  static Result<std::unique_ptr<DecodeEngine>> create(NodeRuntime& runtime);
  // Stops the push thread (queued pushes are answered kAborted).
  ~DecodeEngine();
  DecodeEngine(const DecodeEngine&) = delete;
  DecodeEngine& operator=(const DecodeEngine&) = delete;

  // Called with the tokens of a running decode as they are generated: [start, start + n).
  using TokenSink = std::function<void(int64_t start, std::span<const int32_t> tokens)>;

  Result<PrepareReply> prepare(const PrepareRequest& request);
  // `sink` (optional) gets the output tokens in order as they are generated, a few at a time.
  Result<DecodeReply> decode(const DecodeRequest& request, const TokenSink& sink = {});
  // Drops a request's state (after a failed turn, or a cancel).
  Status release(uint64_t request_id);
  // Frees prepared requests older than the buffer TTL; returns how many.
  size_t reap_expired();
  // Requests prepared and not yet decoding.
  size_t prepared() const;

 private:
  struct Request {
    PrepareRequest prepare;
    SlotLease buffer;  // the DE buffer: Full Blocks of prompt + generation
    int64_t hit_blocks = 0;
    int64_t first_read_block = 0;  // the hit blocks [first_read_block, hit_blocks) are read here
    int64_t dram_blocks = 0;       // [0, dram_blocks) come from the DRAM tier (or storage)
    // The blocks this node pushes to the PE: its DRAM part and its read part.
    int64_t pushed_blocks() const { return dram_blocks + (hit_blocks - first_read_block); }
    // Added by the push thread per answered push; read by the decode (relaxed: the PE's prefill,
    // which waited for every push's answer, came before the decode's call).
    std::atomic<int64_t> de_to_pe_bytes{0};
    Duration prepared_at{0};  // on the runtime's clock
  };
  // A push whose put is in flight: the request (its buffer must outlive the put) and the put.
  struct PushInFlight {
    PushLayerMsg msg;
    std::shared_ptr<Request> request;
    std::shared_ptr<PeerNode> pe;
    transport::Operation put;
  };
  struct PushDone {
    uint64_t key;
    Status status;
  };

  explicit DecodeEngine(NodeRuntime& runtime) : rt_(runtime) {}
  void push_loop();
  // Starts the put of one push (or answers it at once when it cannot run).
  void start_push(const PushLayerMsg& msg);
  // Sends the answer of a push to its PE.
  void answer_push(const PushLayerMsg& msg, const std::shared_ptr<PeerNode>& pe,
                   const std::shared_ptr<Request>& request, const Status& status);
  // A block on its way to storage: DE HBM -> its staging lease (a put, not waited for by the
  // decode: a GPU's copy engine runs beside the kernels) -> its write. Member order matters: the
  // batch (which waits for the write when destroyed) and the copy go before the lease they use.
  struct PendingPersist {
    SlotLease staging;
    transport::Operation copy;
    store::IoBatch batch;
    store::BlockKey key;
    bool written = false;  // the write was submitted (the copy is done)
    int64_t block = 0;
  };
  // Blocks a decode keeps in flight to storage before it waits for the oldest.
  static constexpr size_t kPersistsInFlight = 8;
  // Starts DE HBM -> staging. nullopt when the store already holds the block; an error when no
  // staging slot is free or the put cannot start (the block is skipped).
  Result<std::optional<PendingPersist>> start_persist(int engine,
                                                      const store::BlockKey& key,
                                                      std::span<std::byte> hbm,
                                                      int64_t block,
                                                      int64_t layer_stride_bytes);
  // Submits the write once the copy is done; with `wait`, waits for the copy first.
  Status advance_persist(PendingPersist& p, bool wait);
  // Waits for the copy and the write; counts its bytes.
  Status finish_persist(PendingPersist& p, HopBytes& bytes);
  // Keeps the decoded sequence's whole blocks (keys) in the DRAM tier, from the HBM copy laid
  // out [layer][token][bytes] with `layer_stride_bytes`.
  void keep_in_tier(std::span<const store::BlockKey> keys,
                    std::span<const std::byte> hbm,
                    int64_t layer_stride_bytes);
  // A decoded sequence on its way into the tier: its keys and its HBM lease.
  struct TierJob {
    std::vector<store::BlockKey> keys;
    SlotLease hbm;
    int64_t layer_stride_bytes = 0;
  };
  void tier_loop();

  NodeRuntime& rt_;
  mutable Mutex mu_;
  CondVar cv_;
  // Co-owned by the push thread while it puts from the request's buffer, so a release on the
  // control thread (after a failed turn) never frees a buffer under a put.
  std::map<uint64_t, std::shared_ptr<Request>> requests_ DP_GUARDED_BY(mu_);
  std::deque<PushLayerMsg> pushes_ DP_GUARDED_BY(mu_);
  std::deque<PushDone> push_done_ DP_GUARDED_BY(mu_);  // from completions
  bool stopping_ DP_GUARDED_BY(mu_) = false;
  std::deque<TierJob> tier_jobs_ DP_GUARDED_BY(mu_);
  // Jobs ever queued and ever finished (one thread, in order): a prepare waits for the jobs
  // queued before it, not for those queued after.
  uint64_t tier_queued_ DP_GUARDED_BY(mu_) = 0;
  uint64_t tier_done_ DP_GUARDED_BY(mu_) = 0;
  // Jobs waiting beyond this are not queued (the sequence is not kept; its HBM goes back at
  // once): each holds a whole HBM lease the scheduler has already counted as free.
  static constexpr size_t kTierJobsQueued = 4;
  CondVar tier_cv_;                       // a job queued, one done, or stopping
  // Owned by the push thread.
  std::map<uint64_t, PushInFlight> push_in_flight_;
  std::deque<transport::Operation> answers_in_flight_;
  uint64_t next_push_key_ = 1;
  std::thread push_thread_;
  std::thread tier_thread_;  // with a DRAM tier only
};

}  // namespace dualpath::engine
