#include "serve/turn_runner.h"

#include <fmt/format.h>

#include "common/log.h"
#include "control/convert.h"
#include "sched/turn_plan.h"

namespace dualpath::serve {

namespace {

namespace pb = ::dualpath::control::v1;

// How long a release, cancel or stop to a live node may take (best effort).
constexpr Duration kCleanupTimeout = std::chrono::seconds(5);

}  // namespace

void TurnCancel::cancel() {
  cancelled_.store(true, std::memory_order_release);
  std::function<void()> hook;
  {
    MutexLock lock(mu_);
    hook = cancel_hook_;
  }
  if (hook) hook();  // outside the lock: it cancels calls and may call the nodes
}

void TurnCancel::stop() {
  stopped_.store(true, std::memory_order_release);
  std::function<void()> hook;
  {
    MutexLock lock(mu_);
    hook = stop_hook_;
  }
  if (hook) hook();
}

void TurnCancel::set_hooks(std::function<void()> cancel, std::function<void()> stop) {
  {
    MutexLock lock(mu_);
    cancel_hook_ = cancel;
    stop_hook_ = stop;
  }
  if (cancel && cancelled()) cancel();
  if (stop && stopped()) stop();
}

TurnRunner::TurnRunner(Parts parts) : parts_(std::move(parts)) {
  const ServeConfig& config = *parts_.config;
  kv_model_ = engine::kv_fingerprint(config.engine.backend_spec());
  if (config.tier_bytes() > 0) {
    const store::DramTier::Options o{config.tier_bytes(), config.tier_ttl(),
                                     static_cast<uint64_t>(parts_.layout.full_block_bytes()),
                                     /*keep_bytes=*/false};
    for (int node = 0; node < parts_.registry->nodes(); ++node) {
      tiers_.push_back(parts_.registry->id_of(node).role == engine::NodeRole::kDecode
                           ? std::make_unique<store::DramTier>(o, *parts_.clock)
                           : nullptr);
    }
  }
}

std::pair<int, int64_t> TurnRunner::resident(std::span<const store::BlockKey> keys) const {
  std::pair<int, int64_t> best{-1, 0};
  for (size_t node = 0; node < tiers_.size(); ++node) {
    if (tiers_[node] == nullptr || !parts_.registry->alive(static_cast<int>(node))) continue;
    const auto blocks = static_cast<int64_t>(tiers_[node]->resident_prefix(keys));
    if (blocks > best.second) best = {static_cast<int>(node), blocks};
  }
  return best;
}

void TurnRunner::shutdown() {
  {
    MutexLock lock(mu_);
    stopping_ = true;
    for (auto& [id, a] : attempts_) a->calls.cancel(Status::aborted("the scheduler is shutting down"));
  }
  verdict_cv_.notify_all();
}

void TurnRunner::node_dead(int node, const Status& why) {
  // Its DRAM tier is gone (or, after a partition, no longer ours to count on).
  if (node >= 0 && static_cast<size_t>(node) < tiers_.size() && tiers_[node] != nullptr)
    tiers_[node]->clear();
  MutexLock lock(mu_);
  for (auto& [id, a] : attempts_) {
    // A dead DE fails its turn's prefill on the PE (it waits for the DE's pushes); a dead PE
    // matters to its DE only until the prefill is done: the decode goes on.
    const bool de_died = a->de_node == node;
    const bool pe_died = a->pe_node == node && !a->prefilled.load(std::memory_order_acquire);
    if (de_died || pe_died) {
      a->calls.cancel(Status::unavailable(fmt::format("{} (node {} of its turn)", why.message(), node)));
    }
  }
  lock.unlock();
  verdict_cv_.notify_all();  // a retry waiting for this verdict
}

Status TurnRunner::run_attempt(const TurnRequest& req,
                               Attempt& a,
                               std::vector<int32_t> prompt,
                               int64_t gen,
                               const sched::PathRequest& path,
                               int64_t oracle_hit,
                               int64_t base,
                               Duration turn_start,
                               TurnResult& out,
                               std::vector<int32_t>& streamed,
                               int64_t& hit) {
  const ServeConfig& config = *parts_.config;
  const Clock& clock = *parts_.clock;
  const Duration attempt_start = clock.now();
  const Duration call_timeout = 2 * config.engine.request_timeout + std::chrono::seconds(5);
  const auto n = static_cast<int64_t>(prompt.size());
  if (n < 1) return Status::invalid_argument("a turn needs at least one prompt token");
  if (gen < 1) return Status::invalid_argument("a turn generates at least one token");
  // The oracle bound loads nothing: its cached prefix is the replay's context, taken to be in
  // HBM already; every other turn's is the store's longest cached prefix.
  const bool no_io = parts_.planner.no_io(path);
  if (no_io && config.engine.compute != "modeled") {
    return Status::invalid_argument(
        "the oracle path needs live.compute = \"modeled\": it loads no KV, and the CPU model "
        "cannot compute without it");
  }
  int64_t cached = 0;
  std::pair<int, int64_t> dram{-1, 0};  // the DE DRAM tier holding its leading blocks
  if (no_io) {
    cached = oracle_hit;
  } else if (path != sched::ReadPath::kRecompute) {
    const store::PrefixMatch match =
        parts_.store->longest_cached_prefix(prompt, req.cache_namespace);
    cached = match.hit_tokens(parts_.layout);
    if (!tiers_.empty()) {
      // Within the store's prefix: the tier's part is then also in storage, so a node that lost
      // it (its tier evicted in another order than the mirror, it restarted) or a turn placed
      // on another node reads it from there. Blocks only a tier holds (a persist skipped, the
      // store evicted them) are not counted on.
      dram = resident(std::span(match.keys).first(match.hit_blocks));
      dram.second *= parts_.layout.block_tokens;
    }
  }
  const sched::SchedRequest sr = parts_.planner.request(static_cast<int64_t>(a.id), n, gen,
                                                        cached, path, dram.first, dram.second);
  hit = sr.hit_tokens;
  // A turn waits for a place as long as a request may run: nodes may be re-registering.
  DP_ASSIGN_OR_RETURN(
      Claim claim,
      parts_.placer->place(sr, clock.now() + 2 * config.engine.request_timeout,
                           [&] { return req.cancel && req.cancel->cancelled(); }));
  const Duration placed_at = clock.now();
  const double queued = to_seconds(placed_at - attempt_start);
  Duration reads_done = placed_at;  // the later side's read end
  const sched::Placement& p = claim.placement();
  const sched::TurnPlan plan = sched::plan_turn(sr, p);
  hit = plan.hit_tokens;
  a.pe_node = parts_.placer->pe_node_of(p.pe);
  a.de_node = parts_.placer->de_node_of(p.de);
  const engine::NodeId pe_id = parts_.registry->id_of(a.pe_node);
  const engine::NodeId de_id = parts_.registry->id_of(a.de_node);
  // The nodes may have died since the placement: their clients tell.
  std::shared_ptr<control::NodeClient> pe = parts_.registry->client(a.pe_node);
  std::shared_ptr<control::NodeClient> de = parts_.registry->client(a.de_node);
  if (pe == nullptr || de == nullptr) {
    return Status::unavailable(fmt::format("{} died after the turn was placed there",
                                           (pe == nullptr ? pe_id : de_id).name()));
  }
  {
    MutexLock lock(mu_);
    if (stopping_) return Status::aborted("the scheduler is shutting down");
    attempts_[a.id] = &a;
  }
  struct Unregister {
    TurnRunner& r;
    const TurnRequest& req;
    uint64_t id;
    ~Unregister() {
      if (req.cancel) req.cancel->set_hooks(nullptr, nullptr);
      MutexLock lock(r.mu_);
      r.attempts_.erase(id);
    }
  } unregister{*this, req, a.id};
  // A node that died between the placement and the registration above: node_dead() has passed.
  if (!parts_.registry->alive(a.pe_node) || !parts_.registry->alive(a.de_node)) {
    return Status::unavailable("a node of the turn died as it was placed");
  }
  bool prepared = false;
  auto cleanup = [&](const Status& s) {
    // Best effort, with no lock held: the DE's buffer back, a cancelled PE stopped.
    if (prepared && !de->closed()) (void)de->release(a.id, kCleanupTimeout);
    if (s.is_aborted() && !pe->closed()) (void)pe->cancel(a.id, kCleanupTimeout);
    return s;
  };
  if (req.cancel) {
    req.cancel->set_hooks(
        [&a] { a.calls.cancel(Status::aborted("the turn was cancelled")); },
        [de, id = a.id] { (void)de->stop(id, kCleanupTimeout); });
    if (req.cancel->cancelled()) return cleanup(Status::aborted("the turn was cancelled"));
  }
  const int pe_engine = parts_.placer->pe_local(p.pe), de_engine = parts_.placer->de_local(p.de);
  const pb::TurnSpec spec =
      control::turn_spec(plan, a.id, prompt, req.sampling, req.cache_namespace);

  // DE prepare: the DE buffer and the plan's DE-side read.
  pb::PrepareRequest prep;
  *prep.mutable_turn() = spec;
  prep.set_engine(de_engine);
  auto prep_out = de->prepare(prep, call_timeout, &a.calls);
  prepared = true;  // it may have been, even on a failure: release it
  if (!prep_out.is_ok()) return cleanup(prep_out.status());
  claim.de_read_finished();
  if (p.de_read_tokens > 0) reads_done = clock.now();
  DP_ASSIGN_OR_RETURN(const engine::PrepareReply prepared_reply, control::from_proto(*prep_out),
                      "{}", de_id.name());
  out.bytes += prepared_reply.bytes;
  out.de_read_bytes += prepared_reply.bytes.storage_read;
  out.dram_tokens = plan.de_dram.tokens();
  if (req.after_prepare) req.after_prepare(out.attempts, pe_id, de_id);

  // PE prefill, layer by layer, by the plan's path.
  pb::PrefillRequest pre;
  *pre.mutable_turn() = spec;
  pre.set_engine(pe_engine);
  pre.set_de_index(de_id.index);
  pre.set_de_dram_offset(prepared_reply.dram_offset);
  // The PE side's read leaves the read-queue ledger when the node says it is in (the
  // simulator's event), not when the prefill's compute ends.
  auto pre_out =
      pe->prefill(pre, call_timeout, [&](int64_t) {
        claim.pe_read_finished();
        reads_done = std::max(reads_done, clock.now());
      }, &a.calls);
  claim.pe_read_finished();
  claim.prefill_finished();
  if (!pre_out.is_ok()) return cleanup(pre_out.status());
  a.prefilled.store(true, std::memory_order_release);
  DP_ASSIGN_OR_RETURN(const engine::PrefillReply prefill, control::from_proto(*pre_out), "{}",
                      pe_id.name());
  out.bytes += prefill.bytes;
  out.pe_read_bytes += prefill.bytes.storage_read;
  out.prefill_s += prefill.prefill_s;
  if (out.attempts == 1 || out.output_tokens.empty()) {
    out.first_logits = prefill.logits;
    out.layer_timeline = prefill.layer_timeline;
  }
  if (out.attempts == 1) {
    out.queue_s = queued;
    out.read_s = to_seconds(reads_done - placed_at);
  }
  if (base == 0 && out.ttft_s == 0) out.ttft_s = to_seconds(clock.now() - turn_start);

  // DE decode: the tokens stream back on the call, in order; whatever the stream did not carry
  // yet comes with the reply.
  size_t delivered = 0;
  bool fault_fired = false;
  auto deliver = [&](size_t upto) {
    if (upto <= delivered) return;
    if (req.on_tokens) {
      req.on_tokens(std::span<const int32_t>(streamed).subspan(delivered, upto - delivered));
    }
    delivered = upto;
    if (!fault_fired && req.on_fault_point && req.fault_after_tokens > 0 &&
        base + static_cast<int64_t>(streamed.size()) >= req.fault_after_tokens) {
      fault_fired = true;
      req.on_fault_point(de_id);
    }
  };
  pb::DecodeRequest dec;
  dec.set_request_id(a.id);
  dec.set_first_token(prefill.first_token);
  // A decode's length grows with its tokens: its call ends only after call_timeout without a
  // message from the node (a node that keeps streaming is never cut off, one that stops is).
  auto dec_out = de->decode(
      dec, call_timeout,
      [&](const pb::TokenBatch& batch) {
        // Batches arrive in order on the call; take what extends the contiguous prefix.
        const int64_t have = static_cast<int64_t>(streamed.size());
        if (batch.start() > have || batch.start() < 0) return;
        for (int i = static_cast<int>(have - batch.start()); i < batch.tokens_size(); ++i) {
          if (batch.tokens(i) < 0) return;  // a malformed batch: the reply will carry them
          streamed.push_back(batch.tokens(i));
        }
        deliver(streamed.size());
      },
      &a.calls);
  if (!dec_out.is_ok()) return cleanup(dec_out.status());
  prepared = false;  // the decode consumed the buffer
  claim.turn_finished();
  DP_ASSIGN_OR_RETURN(const engine::DecodeReply decoded, control::from_proto(*dec_out), "{}",
                      de_id.name());
  if (decoded.output_tokens.size() > streamed.size()) streamed = decoded.output_tokens;
  deliver(streamed.size());
  out.bytes += decoded.bytes;
  out.output_tokens.insert(out.output_tokens.end(), decoded.output_tokens.begin(),
                           decoded.output_tokens.end());
  out.tpot_s = decoded.tpot_s;
  out.persist_skipped_blocks += decoded.persist_skipped_blocks;
  if (!plan.no_io && a.de_node >= 0 && static_cast<size_t>(a.de_node) < tiers_.size() &&
      tiers_[a.de_node] != nullptr && !decoded.output_tokens.empty()) {
    // The node keeps what it decoded: the prompt and every output token it fed back (all but the
    // last), whole blocks (DecodeEngine::keep_in_tier).
    std::vector<int32_t> sequence = prompt;
    sequence.insert(sequence.end(), decoded.output_tokens.begin(),
                    decoded.output_tokens.end() - 1);
    const auto keys = store::block_key_chain(kv_model_, sequence, parts_.layout.block_tokens,
                                             req.cache_namespace);
    (void)tiers_[a.de_node]->store(keys, {});
  }
  out.path = plan.no_io ? sched::ReadPath::kOracle : plan.path;
  out.pe = pe_id;
  out.de = de_id;
  out.pe_engine = pe_engine;
  out.de_engine = de_engine;
  if (base > 0) {
    out.migrated_hit_tokens = hit;
    out.migrated_read_bytes = prepared_reply.bytes.storage_read + prefill.bytes.storage_read;
  }
  return Status::ok();
}

Result<TurnResult> TurnRunner::run_turn(TurnRequest request) {
  const ServeConfig& config = *parts_.config;
  const Clock& clock = *parts_.clock;
  const Duration start = clock.now();
  TurnResult out;
  out.prompt_tokens = static_cast<int64_t>(request.tokens.size());
  std::vector<int32_t> produced;  // tokens of attempts whose decode node died mid-way
  sched::PathRequest path = request.path;
  // cache.recompute = always: every hit recomputed (the baseline of read-or-recompute).
  if (!path && config.cache_applies() && config.cache.recompute == "always")
    path = sched::ReadPath::kRecompute;
  Status last;
  for (int attempt = 1; attempt <= config.scheduler.max_attempts; ++attempt) {
    Attempt a;
    a.id = next_request_id_.fetch_add(1, std::memory_order_relaxed);
    std::vector<int32_t> prompt = request.tokens;
    prompt.insert(prompt.end(), produced.begin(), produced.end());
    const int64_t gen = request.gen_tokens - static_cast<int64_t>(produced.size());
    out.attempts = attempt;
    out.output_tokens = produced;
    std::vector<int32_t> streamed;
    int64_t hit = 0;
    last = run_attempt(request, a, std::move(prompt), gen, path,
                       request.oracle_hit_tokens + static_cast<int64_t>(produced.size()),
                       static_cast<int64_t>(produced.size()), start, out, streamed, hit);
    if (attempt == 1) out.hit_tokens = hit;
    if (last.is_ok()) {
      if (out.ttft_s == 0) out.ttft_s = to_seconds(clock.now() - start);
      return out;
    }
    if (request.cancel && request.cancel->cancelled()) {
      return Status::aborted("the turn was cancelled");
    }
    const bool pe_dead = a.pe_node >= 0 && !parts_.registry->alive(a.pe_node);
    const bool de_dead = a.de_node >= 0 && !parts_.registry->alive(a.de_node);
    const bool store_miss = last.is_not_found() || last.is_io_error() || last.is_corruption();
    if (store_miss && !pe_dead && !de_dead && path != sched::ReadPath::kRecompute) {
      // A hit block vanished between the prefix match and the read (evicted), failed its
      // checks (quarantined as corrupt) or could not be read (EIO): the turn is recomputed,
      // never served from wrong bytes.
      DP_LOG_WARN("{}; recomputing the turn", last.to_string());
      path = sched::ReadPath::kRecompute;
      continue;
    }
    // kUnavailable includes a node too busy to take the call (control/rpc.h).
    const bool retryable = pe_dead || de_dead || last.is_unavailable() || last.is_timed_out();
    if (!retryable) return last;
    if (de_dead) out.failed_nodes.push_back(a.de_node);
    if (pe_dead) out.failed_nodes.push_back(a.pe_node);
    if (!streamed.empty()) {
      // Migrate: what the decode node streamed before its call failed has reached the client
      // and is kept, whether or not the registry has seen the node die yet (under load the
      // call's reset can come first); the next attempt decodes the rest, loading the blocks
      // persisted so far.
      produced.insert(produced.end(), streamed.begin(), streamed.end());
      out.migrated = true;
      out.migrated_tokens = static_cast<int64_t>(produced.size());
      if (static_cast<int64_t>(produced.size()) >= request.gen_tokens) {
        out.output_tokens = produced;
        return out;
      }
    }
    out.retried = true;
    DP_LOG_WARN("turn attempt {} failed ({}); {}", attempt, last.to_string(),
                out.migrated ? "migrating its decode" : "retrying on live nodes");
    if (!pe_dead && !de_dead && a.pe_node >= 0 && attempt < config.scheduler.max_attempts) {
      // Both nodes still hold their leases. A node that died is declared dead when its session
      // ends, within milliseconds, but later on a loaded machine: placed again at once, the
      // retry picks the same node and fails the same way (all attempts spent in a few ms: the
      // flake of ServeMigration under ctest -j2). Wait for the registry's verdict, a lease at
      // most, checking the turn's cancel; a node that is only busy costs the retry that wait.
      MutexLock lock(verdict_mu_);
      const Duration until = clock.now() + config.scheduler.lease_ttl;
      while (clock.now() < until && parts_.registry->alive(a.pe_node) &&
             (a.de_node < 0 || parts_.registry->alive(a.de_node)) &&
             !(request.cancel && request.cancel->cancelled())) {
        (void)clock.wait_until(verdict_cv_, lock,
                               std::min(until, clock.now() + std::chrono::milliseconds(5)));
      }
    }
  }
  return last.with_context(
      fmt::format("the turn failed after {} attempts", config.scheduler.max_attempts));
}

}  // namespace dualpath::serve
