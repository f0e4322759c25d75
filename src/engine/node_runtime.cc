#include "engine/node_runtime.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <tuple>
#include <utility>

#include "common/log.h"
#include "compute/cpu_weights.h"
#include "engine/engine_config.h"

namespace dualpath::engine {

store::ModelFingerprint kv_fingerprint(const BackendSpec& b) {
  if (b.compute == "cpu" && b.is_checkpoint()) {
    // The directory's config.json and its safetensors files' names and sizes (hashing GBs of
    // weights at every start would cost more than it protects).
    namespace fs = std::filesystem;
    std::string id;
    std::error_code ec;
    std::ifstream cfg(fs::path(b.weights) / "config.json");
    std::stringstream text;
    text << cfg.rdbuf();
    id += text.str();
    std::vector<std::string> files;
    for (const auto& e : fs::directory_iterator(b.weights, ec)) {
      if (e.path().extension() == ".safetensors") {
        files.push_back(fmt::format("{}:{}", e.path().filename().string(), e.file_size(ec)));
      }
    }
    std::sort(files.begin(), files.end());
    for (const auto& f : files) id += "\n" + f;
    return store::fingerprint_of(fmt::format("cpu/checkpoint/{:016x}/fp32-kv",
                                             store::fingerprint_of(id).value));
  }
  if (b.compute == "cpu" && b.weights == "trained") {
    // The embedded file's bytes identify the weights: retrained weights never hit old KV.
    static const uint64_t digest = [] {
      const auto file = compute::builtin_weights_file();
      return store::fingerprint_of(
                 std::string_view(reinterpret_cast<const char*>(file.data()), file.size()))
          .value;
    }();
    return store::fingerprint_of(fmt::format("cpu/{}/trained/{:016x}/fp32-kv", b.model, digest));
  }
  if (b.compute == "cpu") {
    return store::fingerprint_of(
        fmt::format("cpu/{}/weights-seed={}/fp32-kv", b.model, b.weights_seed));
  }
  return store::fingerprint_of(
      fmt::format("{}/{}/seed={}/kv-scale={}", b.compute, b.model, b.weights_seed, b.kv_scale));
}

bool NodeSetup::operator==(const NodeSetup& o) const {
  auto key = [](const NodeSetup& x) {
    const BackendSpec& b = x.backend;
    return std::tie(x.role, x.index, b.compute, b.model, b.weights, b.weights_seed, b.kv_scale,
                    b.time_dilation, b.prefill_ep_gpus, b.decode_ep_gpus, x.block_tokens,
                    x.data_paths, x.store_capacity_bytes, x.store_fault_rate, x.dram_buffer_bytes,
                    x.hbm_bytes, x.pipeline_depth, x.engines, x.compute_slots, x.timeout,
                    x.report_interval, x.heartbeat, x.buffer_ttl, x.dram_tier_bytes,
                    x.dram_tier_ttl, x.transports, x.net_devices, x.poll_us,
                    x.poll_in_flight_us, x.snic_gbps);
  };
  return key(*this) == key(o) && backend.hardware == o.backend.hardware &&
         backend.efficiency == o.backend.efficiency;
}

Result<std::unique_ptr<NodeRuntime>> NodeRuntime::create(const NodeSetup& setup) {
  std::unique_ptr<NodeRuntime> rt(new NodeRuntime(setup));
  const std::string name = fmt::format("{}{}", role_name(setup.role), setup.index);
  DP_ASSIGN_OR_RETURN(rt->backends_, BackendFactory::create(setup.backend));
  const compute::KvShape shape = rt->backends_->kv_shape();
  rt->layout_ =
      store::BlockLayout{shape.layers, setup.block_tokens, shape.bytes_per_token_per_layer};
  DP_RETURN_IF_ERROR(rt->layout_.validate(), "node {}", name);

  // The limiter lets one of this node's Full Blocks go at once after idling, no more: the
  // simulator's NIC has no credit at all, and a fixed 16 MiB credit (the largest model's block at
  // full size) let a light-load read of the emulated KV (1/32 of the bytes) skip ~0.6 emulated
  // seconds of its NIC time (issue 31: live reads 0.37 s against the simulator's 1.34 s).
  rt->nic_ = std::make_unique<store::StorageNic>(setup.snic_gbps, rt->clock_,
                                                 rt->layout_.full_block_bytes());
  if (setup.role == NodeRole::kDecode && setup.dram_tier_bytes > 0) {
    rt->dram_tier_ = std::make_unique<store::DramTier>(
        store::DramTier::Options{setup.dram_tier_bytes, setup.dram_tier_ttl,
                                 static_cast<uint64_t>(rt->layout_.full_block_bytes()), true},
        rt->clock_);
  }
  store::FileStoreOptions so;
  so.data_paths = setup.data_paths;
  so.model = kv_fingerprint(setup.backend);
  so.layout = rt->layout_;
  so.capacity_bytes = setup.store_capacity_bytes;
  so.storage_nic = rt->nic_.get();
  if (setup.store_fault_rate > 0) {
    DP_LOG_WARN("node {}: injecting store faults in {:.2f} % of block I/O (store.inject_fault_rate)",
                name, 100 * setup.store_fault_rate);
    so.faults = std::make_shared<store::RandomFaults>(
        setup.store_fault_rate, 0x5eed0000u + static_cast<uint64_t>(setup.index) * 2 +
                                    (setup.role == NodeRole::kPrefill ? 0 : 1));
  }
  DP_ASSIGN_OR_RETURN(rt->store_, store::FileStore::open(so));

  transport::ContextOptions co;
  co.transports = setup.transports;
  co.net_devices = setup.net_devices;
  DP_ASSIGN_OR_RETURN(rt->context_, transport::Context::create(co));
  transport::WorkerOptions wo;
  wo.name = name;
  wo.default_timeout = setup.timeout;
  wo.poll_before_sleep = std::chrono::microseconds(setup.poll_us);
  if (setup.poll_in_flight_us >= 0) {
    wo.poll_while_in_flight = std::chrono::microseconds(setup.poll_in_flight_us);
  }
  DP_ASSIGN_OR_RETURN(rt->worker_, transport::Worker::create(*rt->context_, wo));
  const auto full_block = static_cast<uint64_t>(rt->layout_.full_block_bytes());
  const char* dram_key =
      setup.role == NodeRole::kPrefill ? "live.pe_dram_buffer_mb" : "live.de_dram_buffer_mb";
  DP_ASSIGN_OR_RETURN(
      rt->dram_,
      SlotPool::create(*rt->worker_, setup.role == NodeRole::kPrefill ? "PE buffer" : "DE buffer",
                       dram_key, setup.dram_buffer_bytes, full_block, rt->clock_));
  if (setup.engines < 1) {
    return Status::invalid_argument(
        fmt::format("node {}: live.engines_per_node = {} must be at least 1", name, setup.engines));
  }
  rt->engines_.resize(static_cast<size_t>(setup.engines));
  for (EngineParts& e : rt->engines_) {
    DP_ASSIGN_OR_RETURN(e.hbm, SlotPool::create(*rt->worker_, "HBM arena", "live.hbm_mb",
                                                setup.hbm_bytes,
                                                static_cast<uint64_t>(rt->layout_.layer_block_bytes()),
                                                rt->clock_));
    DP_ASSIGN_OR_RETURN(e.traffic, transport::TrafficManager::create(*rt->worker_, {}));
    DP_ASSIGN_OR_RETURN(e.local_hbm, rt->worker_->import_region(e.traffic->local_endpoint(),
                                                                e.hbm->region().descriptor()));
    DP_ASSIGN_OR_RETURN(e.local_dram, rt->worker_->import_region(e.traffic->local_endpoint(),
                                                                 rt->dram_->region().descriptor()));
  }
  return rt;
}

NodeRuntime::~NodeRuntime() {
  // Imported regions go before their endpoints (members below them are destroyed later).
  {
    MutexLock lock(peers_mu_);
    peers_.clear();
  }
  for (EngineParts& e : engines_) {
    e.local_dram.reset();
    e.local_hbm.reset();
    e.traffic.reset();
  }
}

Status NodeRuntime::check_engine(int engine) const {
  if (engine < 0 || engine >= engines()) {
    return Status::invalid_argument(fmt::format("{} node {} has no engine {} ({} engines)",
                                                role_name(setup_.role), setup_.index, engine,
                                                engines()));
  }
  return Status::ok();
}

NodeHello NodeRuntime::hello() const {
  NodeHello h;
  h.role = setup_.role;
  h.index = setup_.index;
  h.address = worker_->address();
  h.dram = dram_->region().descriptor();
  for (const EngineParts& e : engines_) h.hbm.push_back(e.hbm->region().descriptor());
  return h;
}

// How long after a failed attempt to remake a peer's connection the next one waits.
constexpr Duration kPeerRetryInterval = std::chrono::seconds(1);

Result<std::shared_ptr<PeerNode>> NodeRuntime::connect_peer(const NodeHello& p) {
  auto peer = std::make_shared<PeerNode>();
  peer->hello = p;
  DP_ASSIGN_OR_RETURN(peer->endpoint, worker_->connect(p.address));
  DP_ASSIGN_OR_RETURN(peer->dram, worker_->import_region(*peer->endpoint, p.dram));
  for (const std::vector<std::byte>& blob : p.hbm) {
    DP_ASSIGN_OR_RETURN(auto region, worker_->import_region(*peer->endpoint, blob));
    peer->hbm.push_back(std::move(region));
  }
  return peer;
}

Status NodeRuntime::connect_peers(std::span<const NodeHello> peers, bool reset) {
  // Connections dropped here are closed after the lock is released (closing one waits for UCX);
  // requests in flight keep theirs alive (shared_ptr).
  std::vector<std::shared_ptr<PeerNode>> dropped;
  if (reset) {
    MutexLock lock(peers_mu_);
    dropped.swap(peers_);
  }
  for (const NodeHello& p : peers) {
    if (p.role == setup_.role) continue;
    {
      MutexLock lock(peers_mu_);
      bool same = false;
      for (const auto& q : peers_) {
        if (q->hello.role == p.role && q->hello.index == p.index &&
            q->hello.address == p.address && q->hello.epoch == p.epoch &&
            q->endpoint->health().is_ok())
          same = true;
      }
      if (same) continue;
    }
    DP_ASSIGN_OR_RETURN(std::shared_ptr<PeerNode> peer, connect_peer(p));
    MutexLock lock(peers_mu_);
    for (auto& q : peers_) {
      if (q->hello.role == p.role && q->hello.index == p.index) dropped.push_back(q);
    }
    std::erase_if(peers_, [&](const auto& q) {
      return q->hello.role == p.role && q->hello.index == p.index;
    });
    peers_.push_back(std::move(peer));
  }
  return Status::ok();
}

Result<std::shared_ptr<PeerNode>> NodeRuntime::peer(NodeRole role, int index) {
  std::shared_ptr<PeerNode> found;
  {
    MutexLock lock(peers_mu_);
    for (auto& p : peers_) {
      if (p->hello.role == role && p->hello.index == index) found = p;
    }
  }
  if (!found) {
    return Status::not_found(fmt::format("no {} node {} is connected to {} node {}",
                                         role_name(role), index, role_name(setup_.role),
                                         setup_.index));
  }
  const Status health = found->endpoint->health();
  if (health.is_ok()) return found;
  // Its connection failed (the peer restarted its own end, a partition healed, a transient reset)
  // while the peer itself is still listed: connect again from the hello it was connected from,
  // so one broken connection costs one attempt, not every attempt until the peer registers again.
  // A failed attempt holds the next one off for kPeerRetryInterval.
  const int64_t now_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(clock_.now()).count();
  if (now_ns < found->retry_at_ns.load(std::memory_order_relaxed)) return health;
  DP_LOG_INFO("{} node {}: the connection to {} node {} failed ({}); connecting again",
              role_name(setup_.role), setup_.index, role_name(role), index, health.to_string());
  std::shared_ptr<PeerNode> unused;  // destroyed after the lock (closing an endpoint waits)
  Result<std::shared_ptr<PeerNode>> remade = connect_peer(found->hello);
  if (!remade.is_ok()) {
    found->retry_at_ns.store(
        now_ns + std::chrono::duration_cast<std::chrono::nanoseconds>(kPeerRetryInterval).count(),
        std::memory_order_relaxed);
    return remade.status();
  }
  std::shared_ptr<PeerNode> fresh = std::move(remade).value();
  {
    MutexLock lock(peers_mu_);
    for (auto& p : peers_) {
      if (p->hello.role != role || p->hello.index != index) continue;
      if (p == found) {
        p = fresh;  // still the failed one: replace it
      } else {
        unused = std::exchange(fresh, p);  // replaced meanwhile (a new hello, another reconnect)
      }
      break;
    }
  }
  return fresh;  // (if a reset dropped it meanwhile, ours serves this request only)
}

}  // namespace dualpath::engine
