#include "engine/decode_engine.h"

#include <fmt/format.h>

#include <chrono>
#include <deque>
#include <optional>

#include "common/log.h"
#include "compute/sampling.h"
#include "engine/token_batcher.h"

namespace dualpath::engine {

namespace {
}  // namespace

Result<std::unique_ptr<DecodeEngine>> DecodeEngine::create(NodeRuntime& runtime) {
  std::unique_ptr<DecodeEngine> e(new DecodeEngine(runtime));
  DecodeEngine* self = e.get();
  e->push_thread_ = std::thread([self] { self->push_loop(); });
  if (runtime.dram_tier() != nullptr) e->tier_thread_ = std::thread([self] { self->tier_loop(); });
  DP_RETURN_IF_ERROR(
      runtime.worker().set_am_handler(kPushLayerAm, [self](const transport::AmMessage& m) {
        auto msg = parse_message<PushLayerMsg>(m.header);
        if (!msg) return;
        {
          MutexLock lock(self->mu_);
          self->pushes_.push_back(*msg);
        }
        self->cv_.notify_all();
      }));
  return e;
}

DecodeEngine::~DecodeEngine() {
  (void)rt_.worker().set_am_handler(kPushLayerAm, [](const transport::AmMessage&) {});
  {
    MutexLock lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  tier_cv_.notify_all();
  if (push_thread_.joinable()) push_thread_.join();
  if (tier_thread_.joinable()) tier_thread_.join();
}

void DecodeEngine::tier_loop() {
  for (;;) {
    TierJob job;
    {
      MutexLock lock(mu_);
      while (!stopping_ && tier_jobs_.empty()) tier_cv_.wait(lock);  // notified
      if (stopping_) break;
      job = std::move(tier_jobs_.front());
      tier_jobs_.pop_front();
    }
    keep_in_tier(job.keys, job.hbm.bytes(), job.layer_stride_bytes);
    job.hbm.release();
    {
      MutexLock lock(mu_);
      ++tier_done_;
    }
    tier_cv_.notify_all();
  }
}

void DecodeEngine::push_loop() {
  for (;;) {
    std::deque<PushLayerMsg> pushes;
    std::deque<PushDone> done;
    {
      MutexLock lock(mu_);
      while (!stopping_ && pushes_.empty() && push_done_.empty()) cv_.wait(lock);  // notified
      if (stopping_) break;
      pushes.swap(pushes_);
      done.swap(push_done_);
    }
    for (const PushDone& d : done) {
      auto it = push_in_flight_.find(d.key);
      if (it == push_in_flight_.end()) continue;
      PushInFlight p = std::move(it->second);
      push_in_flight_.erase(it);
      if (d.status.is_ok()) {
        // relaxed: read by the decode after the push's answer, which orders it (decode_engine.h)
        p.request->de_to_pe_bytes.fetch_add(
            p.request->pushed_blocks() * static_cast<int64_t>(rt_.layout().layer_block_bytes()),
            std::memory_order_relaxed);
      }
      answer_push(p.msg, p.pe, p.request, d.status);
      // p.put is done (its completion queued this); destroying it does not wait.
    }
    for (const PushLayerMsg& msg : pushes) start_push(msg);
    // Answers whose sends have completed no longer need their handles.
    while (!answers_in_flight_.empty() && answers_in_flight_.front().done()) {
      answers_in_flight_.pop_front();
    }
  }
  // Stopping: in-flight puts and answers are waited for by their handles' destructors (each is
  // bounded by its deadline), before the buffers they use go.
  push_in_flight_.clear();
  answers_in_flight_.clear();
}

void DecodeEngine::answer_push(const PushLayerMsg& msg, const std::shared_ptr<PeerNode>& pe,
                               const std::shared_ptr<Request>& request, const Status& status) {
  if (!status.is_ok()) DP_LOG_WARN("decode {}: {}", rt_.setup().index, status.to_string());
  // The answer goes out on the request's engine (engine 0 when the request is unknown).
  transport::TrafficManager& tm = rt_.traffic(request != nullptr ? request->prepare.engine : 0);
  LayerPushedMsg reply{msg.request_id, msg.layer, static_cast<int32_t>(status.code())};
  auto sent = tm.send_am(transport::TrafficClass::kModel, *pe->endpoint, kLayerPushedAm,
                         message_bytes(reply), {});
  if (!sent.is_ok()) {
    DP_LOG_WARN("decode {}: answer push of layer {} of request {}: {}", rt_.setup().index,
                msg.layer, msg.request_id, sent.status().to_string());
    return;
  }
  answers_in_flight_.push_back(std::move(sent).value());
}

void DecodeEngine::start_push(const PushLayerMsg& msg) {
  auto pe_or = rt_.peer(NodeRole::kPrefill, static_cast<int>(msg.pe_index));
  if (!pe_or.is_ok()) {
    DP_LOG_WARN("decode {}: push of request {}: {}", rt_.setup().index, msg.request_id,
                pe_or.status().to_string());
    return;  // no way to answer a PE we are not connected to
  }
  std::shared_ptr<PeerNode> pe = *pe_or;
  std::shared_ptr<Request> r;
  {
    MutexLock lock(mu_);
    auto it = requests_.find(msg.request_id);
    if (it != requests_.end()) r = it->second;
  }
  if (r == nullptr) {
    answer_push(msg, pe, nullptr,
                Status::not_found(fmt::format("no prepared request {}", msg.request_id)));
    return;
  }
  // Never put into a PE slot after the request's timeout: the PE may have released (or
  // quarantined) it by then (prefill_engine.h).
  if (rt_.clock().now() - r->prepared_at > rt_.setup().timeout) {
    answer_push(msg, pe, r,
                Status::timed_out(fmt::format("push of request {} arrived after its timeout",
                                              msg.request_id)));
    return;
  }
  if (rt_.cancels().cancelled(msg.request_id)) {
    answer_push(msg, pe, r, Status::aborted(fmt::format("request {} cancelled", msg.request_id)));
    return;
  }
  if (msg.pe_engine >= pe->hbm.size()) {
    answer_push(msg, pe, r,
                Status::invalid_argument(fmt::format("prefill node {} has no engine {}",
                                                     msg.pe_index, msg.pe_engine)));
    return;
  }
  const store::BlockLayout& layout = rt_.layout();
  const auto lb = static_cast<size_t>(layout.layer_block_bytes());
  const auto fb = static_cast<size_t>(layout.full_block_bytes());
  if (msg.layer >= static_cast<uint32_t>(layout.layers)) {
    answer_push(msg, pe, r,
                Status::invalid_argument(fmt::format("request {}: no layer {} ({} layers)",
                                                     msg.request_id, msg.layer, layout.layers)));
    return;
  }
  std::vector<transport::RmaRequest> puts;
  auto push_block = [&](int64_t b) {
    puts.push_back({r->buffer.bytes().subspan(b * fb + msg.layer * lb, lb),
                    pe->hbm[msg.pe_engine].get(), msg.pe_hbm_offset_bytes + b * lb});
  };
  for (int64_t b = 0; b < r->dram_blocks; ++b) push_block(b);
  for (int64_t b = r->first_read_block; b < r->hit_blocks; ++b) push_block(b);
  const uint64_t key = next_push_key_++;
  transport::OpOptions options;
  // On the progress thread: only queue the completion for this thread.
  options.on_complete = [this, key](const Status& st) {
    {
      MutexLock lock(mu_);
      push_done_.push_back({key, st});
    }
    cv_.notify_all();
  };
  transport::TrafficManager& tm = rt_.traffic(r->prepare.engine);
  auto op = tm.put(transport::TrafficClass::kKv, *pe->endpoint, puts, options);
  if (!op.is_ok()) {
    answer_push(msg, pe, r, op.status());
    return;
  }
  push_in_flight_.emplace(key, PushInFlight{msg, r, pe, std::move(op).value()});
}

Result<PrepareReply> DecodeEngine::prepare(const PrepareRequest& request) {
  const Clock& clock = rt_.clock();
  const Duration deadline = clock.now() + rt_.setup().timeout;
  auto r = std::make_shared<Request>();
  r->prepare = request;
  r->prepared_at = clock.now();
  // In the cancel registry from here: a cancel, or the node losing its scheduler (cancel_all),
  // ends a wait for buffer space at once.
  rt_.cancels().begin(request.request_id);
  struct EndGuard {
    CancelRegistry& c;
    uint64_t id;
    ~EndGuard() { c.end(id); }
  } end_guard{rt_.cancels(), request.request_id};
  const PrepareRequest& p = r->prepare;
  const int32_t vocab = rt_.backends().vocab();
  for (int32_t t : p.tokens) {
    if (t < 0 || (vocab > 0 && t >= vocab)) {
      return Status::invalid_argument(fmt::format(
          "request {}: token {} is outside the model's vocabulary of {}", p.request_id, t, vocab));
    }
  }
  DP_RETURN_IF_ERROR(rt_.check_engine(p.engine), "request {}", p.request_id);
  const store::BlockLayout& layout = rt_.layout();
  const int64_t bt = layout.block_tokens;
  const auto fb = static_cast<size_t>(layout.full_block_bytes());
  const auto n = static_cast<int64_t>(p.tokens.size());
  if (p.hit_tokens % bt != 0 || p.hit_tokens >= n || p.gen_tokens < 1) {
    return Status::invalid_argument(fmt::format(
        "request {}: hit_tokens {} must be whole blocks below the prompt's {} tokens, and "
        "gen_tokens {} at least 1",
        p.request_id, p.hit_tokens, n, p.gen_tokens));
  }
  if (p.read_from_tokens % bt != 0 || p.read_from_tokens > p.hit_tokens ||
      (p.read_from_tokens > 0 && !p.read_hits)) {
    return Status::invalid_argument(fmt::format(
        "request {}: read_from_tokens {} must be whole blocks of {} within the hit's {} tokens, "
        "and only with read_hits",
        p.request_id, p.read_from_tokens, bt, p.hit_tokens));
  }
  if (p.dram_tokens < 0 || p.dram_tokens % bt != 0 || p.dram_tokens > p.hit_tokens ||
      (p.read_hits && p.dram_tokens > p.read_from_tokens)) {
    return Status::invalid_argument(fmt::format(
        "request {}: dram_tokens {} must be whole blocks of {} leading the hit's {} tokens, "
        "before the DE side's read from {}",
        p.request_id, p.dram_tokens, bt, p.hit_tokens, p.read_from_tokens));
  }
  const int64_t blocks = (n + p.gen_tokens + bt - 1) / bt;
  // Oracle: the KV is taken to be in HBM already, so the request needs no DE buffer. A full
  // buffer is backpressure: the request waits for room (the simulator's buffer wait).
  if (!p.oracle) {
    DP_ASSIGN_OR_RETURN(r->buffer, rt_.dram().allocate_wait(blocks * fb, deadline, [&] {
      return rt_.cancels().cancelled(p.request_id);
    }), "request {}", p.request_id);
    r->prepared_at = clock.now();  // the buffer's TTL runs from here
  }
  r->hit_blocks = p.hit_tokens / bt;
  // The DE read path reads every hit block; a split read those after the PE side's part.
  r->first_read_block = p.read_hits ? p.read_from_tokens / bt : r->hit_blocks;
  r->dram_blocks = p.oracle ? 0 : p.dram_tokens / bt;
  HopBytes bytes;
  if (r->first_read_block < r->hit_blocks || r->dram_blocks > 0) {
    const auto keys =
        store::block_key_chain(kv_fingerprint(rt_.setup().backend),
                               std::span(p.tokens).first(p.hit_tokens), bt, p.cache_namespace);
    std::vector<store::ReadRequest> reads;
    std::vector<int64_t> read_block;  // reads[i] is hit block read_block[i]
    // The DRAM tier's part: what it holds is copied, what it lost since the scheduler looked
    // (evicted, expired, a restarted node) is read from storage with the rest.
    store::DramTier* tier = rt_.dram_tier();
    if (tier != nullptr && r->dram_blocks > 0) {
      // The session's last turn may still be on its way into the tier (tier_loop): wait for the
      // copies queued before this prepare, for at most a quarter of its time (the rest is the
      // storage read's, should the tier not have the blocks after all).
      MutexLock lock(mu_);
      const uint64_t ticket = tier_queued_;
      const Duration until = clock.now() + (deadline - clock.now()) / 4;
      while (tier_done_ < ticket && clock.now() < until &&
             !rt_.cancels().cancelled(p.request_id)) {
        (void)clock.wait_until(tier_cv_, lock,
                               std::min(until, clock.now() + std::chrono::milliseconds(5)));
      }
    }
    for (int64_t b = 0; b < r->dram_blocks; ++b) {
      std::span<std::byte> out = r->buffer.bytes().subspan(b * fb, fb);
      if (tier != nullptr && tier->read(keys[b], out)) {
        bytes.de_dram += static_cast<int64_t>(fb);
      } else {
        reads.push_back({keys[b], out});
        read_block.push_back(b);
      }
    }
    for (int64_t b = r->first_read_block; b < r->hit_blocks; ++b) {
      reads.push_back({keys[b], r->buffer.bytes().subspan(b * fb, fb)});
      read_block.push_back(b);
    }
    if (!reads.empty()) {
      DP_ASSIGN_OR_RETURN(store::IoBatch batch, rt_.store().read(reads));
      const auto read_blocks = static_cast<int64_t>(reads.size());
      DP_RETURN_IF_ERROR(batch.wait_for(deadline - clock.now()),
                         "request {}: storage read of {} blocks", p.request_id, read_blocks);
      for (int64_t i = 0; i < read_blocks; ++i) {
        DP_RETURN_IF_ERROR(batch.results()[i], "request {}: hit block {} of {}", p.request_id,
                           read_block[i], r->hit_blocks);
      }
      bytes.storage_read = read_blocks * static_cast<int64_t>(fb);
    }
  }
  const uint64_t offset = r->buffer.offset_bytes();
  {
    MutexLock lock(mu_);
    if (rt_.cancels().cancelled(p.request_id)) {
      return Status::aborted(fmt::format("request {} was cancelled", p.request_id));
    }
    requests_[p.request_id] = std::move(r);
  }
  return PrepareReply{offset, bytes};
}

Status DecodeEngine::release(uint64_t request_id) {
  MutexLock lock(mu_);
  requests_.erase(request_id);
  return Status::ok();
}

size_t DecodeEngine::reap_expired() {
  const Duration ttl =
      rt_.setup().buffer_ttl.count() > 0 ? rt_.setup().buffer_ttl : 2 * rt_.setup().timeout;
  const Duration now = rt_.clock().now();
  MutexLock lock(mu_);
  return std::erase_if(requests_, [&](const auto& kv) {
    const bool expired = now - kv.second->prepared_at > ttl;
    const bool cancelled = rt_.cancels().cancelled(kv.first);
    if (expired) {
      DP_LOG_WARN("decode {}: request {} was prepared {:.1f} s ago and never decoded; its DE "
                  "buffer is freed",
                  rt_.setup().index, kv.first, to_seconds(now - kv.second->prepared_at));
    }
    return expired || cancelled;
  });
}

size_t DecodeEngine::prepared() const {
  MutexLock lock(mu_);
  return requests_.size();
}

Result<std::optional<DecodeEngine::PendingPersist>> DecodeEngine::start_persist(
    int engine,
    const store::BlockKey& key,
    std::span<std::byte> hbm,
    int64_t block,
    int64_t layer_stride_bytes) {
  if (rt_.store().contains(key)) {
    return std::optional<PendingPersist>();  // another turn or session wrote it
  }
  const store::BlockLayout& layout = rt_.layout();
  const auto lb = static_cast<size_t>(layout.layer_block_bytes());
  const auto fb = static_cast<size_t>(layout.full_block_bytes());
  const int64_t row = layout.bytes_per_token_per_layer;
  PendingPersist p;
  p.block = block;
  p.key = key;
  DP_ASSIGN_OR_RETURN(p.staging, rt_.dram().allocate(fb), "block {}: no staging slot", block);
  std::vector<transport::RmaRequest> puts;
  for (int64_t l = 0; l < layout.layers; ++l) {
    puts.push_back({hbm.subspan(l * layer_stride_bytes + block * layout.block_tokens * row, lb),
                    &rt_.local_dram(engine), p.staging.offset_bytes() + l * lb});
  }
  transport::TrafficManager& tm = rt_.traffic(engine);
  DP_ASSIGN_OR_RETURN(p.copy, tm.put(transport::TrafficClass::kKv, tm.local_endpoint(), puts),
                      "copy block {} from DE HBM to the DE buffer", block);
  return std::optional<PendingPersist>(std::move(p));
}

Status DecodeEngine::advance_persist(PendingPersist& p, bool wait) {
  if (p.written) return Status::ok();
  if (!wait && !p.copy.done()) return Status::ok();
  DP_RETURN_IF_ERROR(p.copy.wait(), "copy block {} from DE HBM to the DE buffer", p.block);
  store::WriteRequest write{p.key, p.staging.bytes()};
  DP_ASSIGN_OR_RETURN(p.batch, rt_.store().write(std::span(&write, 1)), "persist block {}",
                      p.block);
  p.written = true;
  return Status::ok();
}

Status DecodeEngine::finish_persist(PendingPersist& p, HopBytes& bytes) {
  DP_RETURN_IF_ERROR(advance_persist(p, true));
  DP_RETURN_IF_ERROR(p.batch.wait_for(rt_.setup().timeout), "persist block {}", p.block);
  DP_RETURN_IF_ERROR(p.batch.results()[0], "persist block {}", p.block);
  bytes.persist += static_cast<int64_t>(p.staging.size_bytes());
  return Status::ok();
}

void DecodeEngine::keep_in_tier(std::span<const store::BlockKey> keys,
                                std::span<const std::byte> hbm,
                                int64_t layer_stride_bytes) {
  store::DramTier* tier = rt_.dram_tier();
  if (tier == nullptr || keys.empty()) return;
  const store::BlockLayout& layout = rt_.layout();
  const auto lb = static_cast<size_t>(layout.layer_block_bytes());
  const auto fb = static_cast<size_t>(layout.full_block_bytes());
  const int64_t row = layout.bytes_per_token_per_layer;
  if (!tier->can_hold(keys.size())) return;  // it would not be kept: copy nothing
  // Only the blocks the tier does not hold yet (a session's next turn: its new ones), each
  // gathered from its layers' rows straight into the buffer the tier keeps.
  const size_t held = tier->resident_prefix(keys);
  std::vector<store::DramTier::BlockBytes> blocks;
  for (size_t b = held; b < keys.size(); ++b) {
    blocks.push_back(std::make_unique<std::byte[]>(fb));
    for (int64_t l = 0; l < layout.layers; ++l) {
      const auto from = hbm.subspan(l * layer_stride_bytes + static_cast<int64_t>(b) *
                                                                  layout.block_tokens * row,
                                    lb);
      std::copy(from.begin(), from.end(), blocks.back().get() + l * lb);
    }
  }
  (void)tier->store_blocks(keys, std::move(blocks), held);
}

Result<DecodeReply> DecodeEngine::decode(const DecodeRequest& request, const TokenSink& sink) {
  const uint64_t id = request.request_id;
  rt_.cancels().begin(id);
  struct EndGuard {
    CancelRegistry& c;
    uint64_t id;
    ~EndGuard() { c.end(id); }
  } end_guard{rt_.cancels(), id};
  std::shared_ptr<Request> r;
  {
    MutexLock lock(mu_);
    auto it = requests_.find(id);
    if (it == requests_.end()) {
      return Status::not_found(fmt::format("decode of request {}, which was not prepared", id));
    }
    r = it->second;
    requests_.erase(it);
  }
  const PrepareRequest& p = r->prepare;
  const store::BlockLayout& layout = rt_.layout();
  const int64_t bt = layout.block_tokens;
  const int64_t layers = layout.layers;
  const int64_t row = layout.bytes_per_token_per_layer;
  const auto lb = layout.layer_block_bytes();
  const auto fb = layout.full_block_bytes();
  const auto n = static_cast<int64_t>(p.tokens.size());
  HopBytes bytes;
  // The push thread is done with this request: the PE's prefill (which waited for every push's
  // answer) came before this decode.
  bytes.de_to_pe = r->de_to_pe_bytes.load(std::memory_order_relaxed);

  // Decode start: DE buffer -> DE HBM, laid out [layer][token][bytes].
  const int64_t capacity_tokens = (n + p.gen_tokens + bt - 1) / bt * bt;
  const int64_t stride = capacity_tokens * row;
  const int engine = p.engine;
  DP_ASSIGN_OR_RETURN(SlotLease hbm,
                      rt_.hbm(engine).allocate_wait(layers * stride,
                                                    rt_.clock().now() + rt_.setup().timeout,
                                                    [&] { return rt_.cancels().cancelled(id); }),
                      "request {}: DE HBM", id);
  if (!p.oracle) {
    std::vector<transport::RmaRequest> puts;
    for (int64_t b = 0; b * bt < n; ++b) {
      const int64_t tokens = std::min(bt, n - b * bt);
      for (int64_t l = 0; l < layers; ++l) {
        puts.push_back({r->buffer.bytes().subspan(b * fb + l * lb, tokens * row),
                        &rt_.local_hbm(engine),
                        hbm.offset_bytes() + l * stride + b * bt * row});
        bytes.de_h2d += tokens * row;
      }
    }
    transport::TrafficManager& tm = rt_.traffic(engine);
    DP_ASSIGN_OR_RETURN(auto op, tm.put(transport::TrafficClass::kKv, tm.local_endpoint(), puts));
    DP_RETURN_IF_ERROR(op.wait(), "request {}: DE buffer -> DE HBM", id);
  }
  r->buffer.release();

  const Clock& clock = rt_.clock();
  const Duration start = clock.now();
  std::span<std::byte> hbm_bytes = hbm.bytes();
  // Keys of the sequence's blocks, extended as generated blocks fill.
  const store::ModelFingerprint fp = kv_fingerprint(rt_.setup().backend);
  std::vector<int32_t> sequence = p.tokens;
  std::vector<store::BlockKey> keys = store::block_key_chain(fp, sequence, bt, p.cache_namespace);
  const int64_t hit_blocks = p.hit_tokens / bt;
  // Oracle: no D2H, so nothing is persisted (the driver names the next turn's hits itself).
  // Blocks are written behind the decode: up to kPersistsInFlight at once, each holding a
  // one-block staging lease of the DE buffer until its write (with fsync) is done.
  const bool persist = !p.oracle;
  std::deque<PendingPersist> persisting;
  int64_t skipped = 0;
  auto skip = [&](const Status& why) {
    if (skipped++ == 0) {
      DP_LOG_WARN("request {}: a block is not persisted, the cache degrades: {}", id,
                  why.to_string());
    }
  };
  auto finish_oldest = [&] {
    if (Status st = finish_persist(persisting.front(), bytes); !st.is_ok()) skip(st);
    persisting.pop_front();
  };
  auto persist_block = [&](int64_t b) {
    while (persisting.size() >= kPersistsInFlight) finish_oldest();
    auto started = start_persist(engine, keys[b], hbm_bytes, b, stride);
    if (!started.is_ok()) {
      skip(started.status());
    } else if (*started) {
      persisting.push_back(std::move(**started));
    }
  };
  // Writes for the copies that are done, without waiting for the others.
  auto advance_all = [&] {
    for (auto it = persisting.begin(); it != persisting.end();) {
      if (Status st = advance_persist(*it, false); !st.is_ok()) {
        skip(st);
        it = persisting.erase(it);
      } else {
        ++it;
      }
    }
  };
  for (int64_t b = hit_blocks; persist && b < static_cast<int64_t>(keys.size()); ++b) {
    persist_block(b);
  }
  DP_ASSIGN_OR_RETURN(std::unique_ptr<compute::ComputeBackend> backend, rt_.backends().make());
  std::vector<int32_t> output{request.first_token};
  // Tokens go to the sink a few at a time (engine/token_batcher.h).
  TokenBatcher batcher(clock);
  auto flush = [&](bool force) {
    if (!sink || !batcher.due(output.size(), force)) return;
    sink(static_cast<int64_t>(batcher.sent()), std::span(output).subspan(batcher.sent()));
    batcher.mark_sent(output.size());
  };
  flush(true);
  std::vector<std::span<const std::byte>> segments(layers);
  std::vector<compute::KvLayerView> views(layers);
  std::vector<std::byte> new_kv(static_cast<size_t>(layers * row));
  for (int64_t i = 1; i < p.gen_tokens; ++i) {
    if (rt_.cancels().cancelled(id)) {
      return Status::aborted(fmt::format("request {} was cancelled after {} of {} tokens", id, i,
                                         p.gen_tokens));
    }
    if (rt_.cancels().stop_requested(id)) break;  // the client has its reply: answer with it
    const int64_t pos = n + i - 1;  // the position of the token fed in (output[i - 1])
    for (int64_t l = 0; l < layers; ++l) {
      segments[l] = hbm_bytes.subspan(l * stride, pos * row);
      views[l] = compute::KvLayerView(&segments[l], 1);
    }
    const compute::DecodeSequence seq{output.back(), pos, views, new_kv};
    DP_ASSIGN_OR_RETURN(std::vector<compute::NextToken> next,
                        backend->decode_step(std::span(&seq, 1)));
    // The token's KV row joins each layer's KV in HBM (the decode kernel's own write).
    for (int64_t l = 0; l < layers; ++l) {
      std::copy_n(new_kv.begin() + l * row, row, hbm_bytes.begin() + l * stride + pos * row);
    }
    sequence.push_back(output.back());
    output.push_back(compute::choose_token(next.at(0), p.sampling, pos + 1));
    flush(false);
    if (persist && (pos + 1) % bt == 0) {
      const int64_t b = pos / bt;
      const store::BlockKey prev = b == 0 ? store::chain_start(fp, p.cache_namespace) : keys[b - 1];
      keys.push_back(store::next_block_key(prev, std::span(sequence).subspan(b * bt, bt)));
      persist_block(b);
    }
    if (!persisting.empty()) advance_all();
  }
  while (!persisting.empty()) finish_oldest();
  flush(true);
  if (persist && rt_.dram_tier() != nullptr) {
    // Into the tier behind the reply (the tier thread): the client never waits for the copy.
    {
      MutexLock lock(mu_);
      if (tier_jobs_.size() < kTierJobsQueued) {
        tier_jobs_.push_back(TierJob{std::move(keys), std::move(hbm), stride});
        ++tier_queued_;
      }
    }
    tier_cv_.notify_all();
  }
  const double decode_s = to_seconds(clock.now() - start);
  DecodeReply reply;
  reply.output_tokens = std::move(output);
  reply.bytes = bytes;
  reply.decode_s = decode_s;
  const auto steps = static_cast<double>(reply.output_tokens.size()) - 1;
  reply.tpot_s = steps > 0 ? decode_s / steps : 0.0;
  reply.persist_skipped_blocks = skipped;
  return reply;
}

}  // namespace dualpath::engine
