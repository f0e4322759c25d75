#include "engine/prefill_engine.h"

#include <fmt/format.h>

#include <chrono>

#include "compute/sampling.h"
#include "engine/layer_messages.h"
#include "engine/engine_types.h"

namespace dualpath::engine {


Result<std::unique_ptr<PrefillEngine>> PrefillEngine::create(NodeRuntime& runtime) {
  std::unique_ptr<PrefillEngine> e(new PrefillEngine(runtime));
  PrefillEngine* self = e.get();
  DP_RETURN_IF_ERROR(
      runtime.worker().set_am_handler(kLayerPushedAm, [self](const transport::AmMessage& m) {
        if (auto msg = parse_message<LayerPushedMsg>(m.header)) {
          self->on_layer_pushed(msg->request_id, msg->layer, msg->code);
        }
      }));
  return e;
}

PrefillEngine::~PrefillEngine() {
  (void)rt_.worker().set_am_handler(kLayerPushedAm, [](const transport::AmMessage&) {});
  MutexLock lock(mu_);
  quarantine_.clear();  // the DE side is gone with the node: nothing can still write
}

void PrefillEngine::release_quarantined() {
  MutexLock lock(mu_);
  const Duration now = rt_.clock().now();
  std::erase_if(quarantine_, [&](const Quarantined& q) DP_REQUIRES(mu_) {
    bool answered = true;
    for (uint32_t l = q.layers_answered; l < q.layers_issued && answered; ++l) {
      answered = pushed_.count({q.request_id, l}) > 0;
    }
    if (!answered && now < q.release_at) return false;
    std::erase_if(pushed_, [&](const auto& kv) { return kv.first.first == q.request_id; });
    return true;
  });
}

size_t PrefillEngine::quarantined() const {
  MutexLock lock(mu_);
  return quarantine_.size();
}

void PrefillEngine::on_layer_pushed(uint64_t request_id, uint32_t layer, int32_t code) {
  {
    MutexLock lock(mu_);
    pushed_[{request_id, layer}] = code;
  }
  cv_.notify_all();
}

void PrefillEngine::notify_cancel() {
  MutexLock lock(mu_);
  cv_.notify_all();
}

Result<PrefillEngine::ComputeSlot> PrefillEngine::acquire_compute_slot(
    int engine,
    uint64_t request_id,
    Duration deadline) {
  const int slots = rt_.setup().compute_slots;
  if (slots <= 0) return ComputeSlot();
  MutexLock lock(mu_);
  int& busy = busy_slots_[engine];
  while (busy >= slots && !rt_.cancels().cancelled(request_id)) {
    if (!rt_.clock().wait_until(cv_, lock, deadline)) {
      return Status::timed_out(fmt::format(
          "engine {} of the prefill node had no free GPU within the request timeout ({} busy)",
          engine, busy));
    }
  }
  if (busy >= slots) {
    return Status::aborted(fmt::format("request {} was cancelled while it waited for a GPU",
                                       request_id));
  }
  ++busy;
  return ComputeSlot(this, engine);
}

void PrefillEngine::release_compute_slot(int engine) {
  {
    MutexLock lock(mu_);
    --busy_slots_[engine];
  }
  cv_.notify_all();
}

Status PrefillEngine::wait_layer_pushed(uint64_t request_id, uint32_t layer, Duration deadline) {
  MutexLock lock(mu_);
  const auto key = std::pair{request_id, layer};
  // A cancel (the decode node died, the client went away) wakes the wait (notify_cancel()).
  while (pushed_.count(key) == 0 && !rt_.cancels().cancelled(request_id)) {
    if (!rt_.clock().wait_until(cv_, lock, deadline)) {
      return Status::timed_out(fmt::format(
          "the decode node did not push layer {} of request {} in time (is it alive?)", layer,
          request_id));
    }
  }
  if (pushed_.count(key) == 0) {
    return Status::aborted(fmt::format(
        "request {} was cancelled while it waited for layer {} from its decode node", request_id,
        layer));
  }
  const auto code = status_code_from_int(pushed_[key]);
  pushed_.erase(key);
  if (code != StatusCode::kOk) {
    return Status(code, fmt::format("the decode node failed to push layer {} of request {}", layer,
                                    request_id));
  }
  return Status::ok();
}

Result<PrefillReply> PrefillEngine::prefill(const PrefillRequest& req,
                                            const std::function<void()>& on_read_done) {
  const Clock& clock = rt_.clock();
  const Duration start = clock.now();
  const Duration deadline = start + rt_.setup().timeout;
  auto remaining = [&] {
    return std::max(Duration(std::chrono::milliseconds(1)), deadline - clock.now());
  };
  auto seconds_since = [&](Duration t) { return to_seconds(clock.now() - t); };
  release_quarantined();
  const int32_t vocab = rt_.backends().vocab();
  for (int32_t t : req.tokens) {
    if (t < 0 || (vocab > 0 && t >= vocab)) {
      return Status::invalid_argument(fmt::format(
          "request {}: token {} is outside the model's vocabulary of {}", req.request_id, t,
          vocab));
    }
  }
  rt_.cancels().begin(req.request_id);
  struct EndGuard {
    CancelRegistry& c;
    uint64_t id;
    ~EndGuard() { c.end(id); }
  } end_guard{rt_.cancels(), req.request_id};
  const store::BlockLayout& layout = rt_.layout();
  const auto n = static_cast<int64_t>(req.tokens.size());
  const int64_t bt = layout.block_tokens;
  const int64_t layers = layout.layers;
  const auto row = static_cast<size_t>(layout.bytes_per_token_per_layer);
  const auto lb = static_cast<size_t>(layout.layer_block_bytes());
  const auto fb = static_cast<size_t>(layout.full_block_bytes());
  if (n == 0 || req.hit_tokens < 0 || req.hit_tokens >= n || req.hit_tokens % bt != 0 ||
      (req.path == sched::ReadPath::kRecompute && req.hit_tokens != 0)) {
    return Status::invalid_argument(fmt::format(
        "request {}: hit_tokens {} must be whole blocks of {} below the prompt's {} tokens (0 "
        "for recompute)",
        req.request_id, req.hit_tokens, bt, n));
  }
  const int64_t hit_blocks = req.hit_tokens / bt;
  const int64_t blocks = (n + bt - 1) / bt;
  // The hit blocks this node reads, [pe_first, pe_first + pe_blocks) (the PE path: all; a split
  // read: its part, which starts after the DE DRAM tier's), and those the DE node pushes per
  // layer: every other hit block.
  if (req.path == sched::ReadPath::kSplit &&
      (req.pe_read_tokens <= 0 || req.pe_read_from_tokens < 0 ||
       req.pe_read_from_tokens + req.pe_read_tokens > req.hit_tokens ||
       req.pe_read_tokens >= req.hit_tokens || req.pe_read_tokens % bt != 0 ||
       req.pe_read_from_tokens % bt != 0)) {
    return Status::invalid_argument(fmt::format(
        "request {}: a split read's PE part [{}, +{}) must be whole blocks of {} strictly inside "
        "the hit's {} tokens",
        req.request_id, req.pe_read_from_tokens, req.pe_read_tokens, bt, req.hit_tokens));
  }
  const int64_t pe_blocks = req.path == sched::ReadPath::kPe      ? hit_blocks
                            : req.path == sched::ReadPath::kSplit ? req.pe_read_tokens / bt
                                                                  : 0;
  const int64_t pe_first = req.path == sched::ReadPath::kSplit ? req.pe_read_from_tokens / bt : 0;
  const auto pe_reads = [&](int64_t b) { return b >= pe_first && b < pe_first + pe_blocks; };
  const bool de_pushes = (req.path == sched::ReadPath::kDe || req.path == sched::ReadPath::kSplit) &&
                         hit_blocks > pe_blocks;
  DP_ASSIGN_OR_RETURN(std::shared_ptr<PeerNode> de, rt_.peer(NodeRole::kDecode, req.de_index));
  DP_RETURN_IF_ERROR(rt_.check_engine(req.pe_engine), "request {}", req.request_id);
  const int engine = req.pe_engine;
  transport::TrafficManager& tm = rt_.traffic(engine);
  SlotPool& hbm_pool = rt_.hbm(engine);
  HopBytes bytes;

  // Storage -> PE buffer (PE read path, a split read's PE part): those Full Blocks, read once.
  SlotLease pe_buffer;
  if (pe_blocks > 0) {
    DP_ASSIGN_OR_RETURN(pe_buffer, rt_.dram().allocate_wait(pe_blocks * fb, deadline, [&] {
      return rt_.cancels().cancelled(req.request_id);
    }), "request {}", req.request_id);
    const auto keys =
        store::block_key_chain(kv_fingerprint(rt_.setup().backend),
                               std::span(req.tokens).first((pe_first + pe_blocks) * bt), bt,
                               req.cache_namespace);
    std::vector<store::ReadRequest> reads;
    for (int64_t b = 0; b < pe_blocks; ++b) {
      reads.push_back({keys[pe_first + b], pe_buffer.bytes().subspan(b * fb, fb)});
    }
    DP_ASSIGN_OR_RETURN(store::IoBatch batch, rt_.store().read(reads));
    DP_RETURN_IF_ERROR(batch.wait_for(remaining()), "request {}: storage read of {} blocks",
                       req.request_id, pe_blocks);
    for (int64_t b = 0; b < pe_blocks; ++b) {
      DP_RETURN_IF_ERROR(batch.results()[b], "request {}: hit block {} of {}", req.request_id,
                         pe_first + b, hit_blocks);
    }
    bytes.storage_read = pe_blocks * static_cast<int64_t>(fb);
    if (on_read_done) on_read_done();
  }

  // HBM: pipeline_depth layer slots of `blocks` Layer Blocks each ([token][bytes] rows).
  const int depth = rt_.setup().pipeline_depth;
  const size_t slot_bytes = static_cast<size_t>(blocks) * lb;
  DP_ASSIGN_OR_RETURN(SlotLease hbm, hbm_pool.allocate_wait(slot_bytes * depth, deadline, [&] {
    return rt_.cancels().cancelled(req.request_id);
  }), "request {}: PE HBM", req.request_id);
  auto slot_offset = [&](int64_t l) { return hbm.offset_bytes() + (l % depth) * slot_bytes; };
  auto slot = [&](int64_t l) { return hbm_pool.span().subspan(slot_offset(l), slot_bytes); };

  const bool oracle = req.path == sched::ReadPath::kOracle;
  DP_ASSIGN_OR_RETURN(std::unique_ptr<compute::ComputeBackend> backend,
                      rt_.backends().make(/*digest_kv=*/!oracle));
  // DE path: layers [0, pushes_issued) asked for, [0, pushes_answered) answered (in order).
  uint32_t pushes_issued = 0, pushes_answered = 0;
  const compute::PrefillSequence sequence{std::span(req.tokens).subspan(req.hit_tokens),
                                          req.hit_tokens};
  DP_RETURN_IF_ERROR(backend->begin_prefill(std::span(&sequence, 1)), "request {}: begin prefill",
                     req.request_id);
  std::vector<transport::Operation> loads(layers);   // PE buffer -> HBM, per layer
  std::vector<transport::Operation> pushes(layers);  // the push request to the DE node
  std::vector<transport::Operation> sends(layers);
  transport::OpOptions op_options;

  auto issue_load = [&](int64_t l) -> Status {
    if (hit_blocks == 0 || oracle) return Status::ok();
    op_options.timeout = remaining();
    if (pe_blocks > 0) {
      std::vector<transport::RmaRequest> puts;
      for (int64_t b = 0; b < pe_blocks; ++b) {
        puts.push_back({pe_buffer.bytes().subspan(b * fb + l * lb, lb), &rt_.local_hbm(engine),
                        slot_offset(l) + (pe_first + b) * lb});
      }
      DP_ASSIGN_OR_RETURN(
          loads[l], tm.put(transport::TrafficClass::kKv, tm.local_endpoint(), puts, op_options));
      bytes.pe_h2d += pe_blocks * static_cast<int64_t>(lb);
    }
    if (de_pushes) {
      // The DE node puts its hit blocks (all but this node's part) at their rows of this slot.
      PushLayerMsg msg{req.request_id, slot_offset(l), static_cast<uint32_t>(l),
                       static_cast<uint32_t>(rt_.setup().index), static_cast<uint32_t>(engine)};
      DP_ASSIGN_OR_RETURN(pushes[l], tm.send_am(transport::TrafficClass::kModel, *de->endpoint,
                                                kPushLayerAm, message_bytes(msg), {}, op_options));
      pushes_issued = static_cast<uint32_t>(l) + 1;
    }
    return Status::ok();
  };
  auto wait_load = [&](int64_t l) -> Status {
    if (hit_blocks == 0 || oracle) return Status::ok();
    if (pe_blocks > 0) {
      DP_RETURN_IF_ERROR(loads[l].wait(), "request {}: load layer {}", req.request_id, l);
    }
    if (de_pushes) {
      DP_RETURN_IF_ERROR(pushes[l].wait(), "request {}: ask DE {} to push layer {}",
                         req.request_id, req.de_index, l);
      Status pushed = wait_layer_pushed(req.request_id, static_cast<uint32_t>(l), deadline);
      if (!pushed.is_timed_out()) pushes_answered = static_cast<uint32_t>(l) + 1;
      DP_RETURN_IF_ERROR(pushed);
    }
    return Status::ok();
  };
  auto issue_send = [&](int64_t l) -> Status {
    // PE path: the layer's hit + miss KV; DE path: the miss KV only, next to the hit KV the DE
    // buffer already holds; a split read: the PE side's hit part and the miss KV.
    if (oracle) return Status::ok();  // the DE "has" the KV
    std::vector<transport::RmaRequest> puts;
    for (int64_t b = 0; b < blocks; ++b) {
      if (b < hit_blocks && !pe_reads(b)) continue;  // the DE node holds it
      const int64_t tokens = std::min(bt, n - b * bt);
      puts.push_back({slot(l).subspan(b * lb, tokens * row), de->dram.get(),
                      req.de_dram_offset + b * fb + l * lb});
      bytes.pd_transfer += tokens * static_cast<int64_t>(row);
    }
    op_options.timeout = remaining();
    DP_ASSIGN_OR_RETURN(sends[l],
                        tm.put(transport::TrafficClass::kKv, *de->endpoint, puts, op_options));
    return Status::ok();
  };

  std::vector<std::pair<double, double>> timeline;
  // One GPU computes this prefill: wait for a free one (the node's compute slots).
  const auto queued = clock.now();
  DP_ASSIGN_OR_RETURN(ComputeSlot gpu, acquire_compute_slot(engine, req.request_id, deadline));
  const double gpu_wait_s = seconds_since(queued);
  auto run = [&]() -> Status {
    // Loads run `ahead` layers ahead of the compute. With 3+ slots one slot is left for the
    // layer whose KV is leaving for the DE buffer, so a load never waits for the PD transfer of
    // the layer that just computed (with 2 slots it must).
    const int64_t ahead = std::max(1, depth - 2);
    for (int64_t l = 0; l < std::min<int64_t>(ahead, layers); ++l) {
      DP_RETURN_IF_ERROR(issue_load(l));
    }
    for (int64_t l = 0; l < layers; ++l) {
      if (rt_.cancels().cancelled(req.request_id)) {
        return Status::aborted(fmt::format("request {} was cancelled at layer {}", req.request_id,
                                           l));
      }
      const auto t0 = clock.now();
      DP_RETURN_IF_ERROR(wait_load(l));
      // Keep the next layers' KV in flight while this one computes; a slot is free once the
      // layer that used it last has reached the DE buffer.
      const int64_t next = l + ahead;
      if (next < layers) {
        if (next - depth >= 0) {
          DP_RETURN_IF_ERROR(sends[next - depth].wait(), "request {}: send layer {} to DE {}",
                             req.request_id, next - depth, req.de_index);
        }
        DP_RETURN_IF_ERROR(issue_load(next));
      }
      const auto t1 = clock.now();
      // The layer computes in place in its HBM slot: rows [0, hit) are the loaded KV, rows
      // [hit, n) receive the new tokens' KV.
      const std::span<const std::byte> cached[1] = {slot(l).first(req.hit_tokens * row)};
      const compute::KvLayerView cached_view(cached);
      const std::span<std::byte> out[1] = {
          slot(l).subspan(req.hit_tokens * row, (n - req.hit_tokens) * row)};
      DP_RETURN_IF_ERROR(
          backend->prefill_layer(static_cast<int>(l), std::span(&cached_view, 1), out),
          "request {}: layer {}", req.request_id, l);
      timeline.emplace_back(to_seconds(t1 - t0), seconds_since(t1));
      DP_RETURN_IF_ERROR(issue_send(l));
    }
    for (int64_t l = 0; l < layers; ++l) {
      DP_RETURN_IF_ERROR(sends[l].wait(), "request {}: send layer {} to DE {}", req.request_id, l,
                         req.de_index);
    }
    return Status::ok();
  };
  Status status = run();
  gpu.release();
  // The loads and sends of the layers issued must be over before the slots go (their
  // destructors wait; an error above can leave some running).
  loads.clear();
  pushes.clear();
  sends.clear();
  {
    MutexLock lock(mu_);
    bool answered = true;
    for (uint32_t l = pushes_answered; l < pushes_issued && answered; ++l) {
      answered = pushed_.count({req.request_id, l}) > 0;
    }
    if (!status.is_ok() && !answered) {
      // A push may still land in these slots: hold them back (see the header).
      quarantine_.push_back({std::move(hbm), req.request_id, pushes_answered, pushes_issued,
                             clock.now() + 2 * rt_.setup().timeout});
    } else {
      std::erase_if(pushed_, [&](const auto& kv) { return kv.first.first == req.request_id; });
    }
  }
  DP_RETURN_IF_ERROR(status);
  DP_ASSIGN_OR_RETURN(std::vector<compute::NextToken> next, backend->finish_prefill());
  PrefillReply reply;
  // The first output token sits at the prompt's length (compute/sampling.h: by position).
  reply.first_token = compute::choose_token(next.at(0), req.sampling,
                                            static_cast<int64_t>(req.tokens.size()));
  reply.logits = std::move(next.at(0).logits);  // empty for the modeled backend
  reply.bytes = bytes;
  reply.prefill_s = seconds_since(start);
  reply.gpu_wait_s = gpu_wait_s;
  reply.layer_timeline = std::move(timeline);
  return reply;
}

}  // namespace dualpath::engine
