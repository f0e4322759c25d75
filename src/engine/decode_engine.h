#pragma once
// DecodeEngine: the DE side of a turn (PAPER.md §4 "Decode start", "Persistence") on the
// engines of a decode node: each request names its engine (PrepareRequest::engine), whose HBM
// arena and traffic manager serve it; the DE buffer is the node's.
//
//   prepare: allocate the request's DE buffer (Full Blocks for prompt + generation) and, on the
//            DE read path, read the hit blocks into it from storage (the DE node's SNIC).
//   push:    (DE read path, asked by the PE per layer) put layer l's hit Layer Blocks from the DE
//            buffer into the PE's HBM slot, then answer kLayerPushedAm.
//            The PE meanwhile puts the layer's miss KV (or, on the PE path, hit + miss KV)
//            straight into the same DE buffer: the merge is positional, no copy.
//   decode:  DE buffer -> DE HBM (traffic-manager puts on the loopback endpoint, layer-major
//            [layer][token][bytes] in HBM so each layer's KV is one span for attention), release
//            the buffer, greedy decoding for gen_tokens, and persistence: the prompt's new full
//            blocks at once, and each generated block as soon as it is full, each as
//            DE HBM -> DE buffer (a one-block staging lease) -> storage; the writes run behind
//            the decode (up to kPersistsInFlight per request) and the turn ends once all are
//            durable.
//
// Threads: thread-safe; prepare/decode/release run on the node's control workers, several
// requests at once. Push requests arrive on the
// worker's progress thread (kPushLayerAm) and are queued to the engine's push thread, which does
// the put, waits for it and sends the answer: a handler must never block.

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include "engine/control_channel.h"
#include "engine/layer_messages.h"
#include "engine/node_runtime.h"
#include "engine/request_fields.h"

namespace dualpath::engine {

class DecodeEngine {
 public:
  static Result<std::unique_ptr<DecodeEngine>> create(NodeRuntime& runtime);
  // Stops the push thread (queued pushes are answered kAborted).
  ~DecodeEngine();
  DecodeEngine(const DecodeEngine&) = delete;
  DecodeEngine& operator=(const DecodeEngine&) = delete;

  // Reply: dram_offset, bytes {storage_read}.
  Result<Json> prepare(const Json& request);
  // Request: {request_id, first_token}. Reply: output_tokens, bytes {de_to_pe, de_h2d, persist},
  // decode_s, tpot_s.
  Result<Json> decode(const Json& request);
  // Drops a request's state (after a failed turn).
  Status release(uint64_t request_id);

 private:
  struct Request {
    PrepareRequest prepare;
    SlotLease buffer;  // the DE buffer: Full Blocks of prompt + generation
    int64_t hit_blocks = 0;
    int64_t de_to_pe_bytes = 0;  // guarded by the engine's mu_
  };

  explicit DecodeEngine(NodeRuntime& runtime) : rt_(runtime) {}
  void push_loop();
  Status push_layer(const PushLayerMsg& msg);
  // A block on its way to storage: its staging lease and its write. Member order matters: the
  // batch (which waits for the write when destroyed) goes before the lease it writes from.
  struct PendingPersist {
    SlotLease staging;
    store::IoBatch batch;
    int64_t block = 0;
  };
  // Blocks a decode keeps in flight to storage before it waits for the oldest.
  static constexpr size_t kPersistsInFlight = 4;
  // DE HBM -> staging in the DE buffer (waited for), then the write to storage (started, not
  // waited for). nullopt when the store already holds the block.
  Result<std::optional<PendingPersist>> start_persist(int engine,
                                                      const store::BlockKey& key,
                                                      std::span<std::byte> hbm,
                                                      int64_t block,
                                                      int64_t layer_stride_bytes);
  // Waits for the write; counts its bytes.
  Status finish_persist(PendingPersist& p, HopBytes& bytes);

  NodeRuntime& rt_;
  std::mutex mu_;
  std::condition_variable cv_;
  // Co-owned by the push thread while it puts from the request's buffer, so a release on the
  // control thread (after a failed turn) never frees a buffer under a put.
  std::map<uint64_t, std::shared_ptr<Request>> requests_;  // guarded by mu_
  std::deque<PushLayerMsg> pushes_;                        // guarded by mu_
  bool stopping_ = false;                                  // guarded by mu_
  std::thread push_thread_;
};

}  // namespace dualpath::engine
