#include "engine/node_runtime.h"

#include <fmt/format.h>

#include "engine/engine_config.h"

namespace dualpath::engine {

std::string_view role_name(NodeRole role) {
  return role == NodeRole::kPrefill ? "prefill" : "decode";
}

Result<NodeRole> parse_role(std::string_view name) {
  if (name == "prefill") return NodeRole::kPrefill;
  if (name == "decode") return NodeRole::kDecode;
  return Status::invalid_argument(
      fmt::format("--role '{}' is not a node role; use prefill or decode", name));
}

store::ModelFingerprint kv_fingerprint(const BackendSpec& b) {
  if (b.compute == "cpu") {
    return store::fingerprint_of(
        fmt::format("cpu/{}/weights-seed={}/fp32-kv", b.model, b.weights_seed));
  }
  return store::fingerprint_of(
      fmt::format("{}/{}/seed={}/kv-scale={}", b.compute, b.model, b.weights_seed, b.kv_scale));
}

Json NodeSetup::to_json() const {
  return Json{
      {"role", role_name(role)},
      {"index", index},
      {"backend", backend.to_json()},
      {"compute_slots", compute_slots},
      {"block_tokens", block_tokens},
      {"data_paths", data_paths},
      {"store_capacity_bytes", store_capacity_bytes},
      {"dram_buffer_bytes", dram_buffer_bytes},
      {"hbm_bytes", hbm_bytes},
      {"pipeline_depth", pipeline_depth},
      {"engines", engines},
      {"timeout_ms", std::chrono::duration_cast<std::chrono::milliseconds>(timeout).count()},
      {"transports", transports},
      {"net_devices", net_devices},
      {"poll_us", poll_us},
      {"poll_in_flight_us", poll_in_flight_us},
      {"snic_gbps", snic_gbps}};
}

Result<NodeSetup> NodeSetup::from_json(const Json& j) {
  NodeSetup s;
  DP_ASSIGN_OR_RETURN(s.role, parse_role(j.value("role", std::string())));
  s.index = j.value("index", 0);
  DP_ASSIGN_OR_RETURN(s.backend, BackendSpec::from_json(j.value("backend", Json::object())));
  s.compute_slots = j.value("compute_slots", s.compute_slots);
  s.engines = j.value("engines", s.engines);
  s.block_tokens = j.value("block_tokens", s.block_tokens);
  s.data_paths = j.value("data_paths", std::vector<std::string>{});
  s.store_capacity_bytes = j.value("store_capacity_bytes", int64_t{0});
  s.dram_buffer_bytes = j.value("dram_buffer_bytes", uint64_t{0});
  s.hbm_bytes = j.value("hbm_bytes", uint64_t{0});
  s.pipeline_depth = j.value("pipeline_depth", s.pipeline_depth);
  s.timeout = std::chrono::milliseconds(j.value("timeout_ms", int64_t{30000}));
  s.transports = j.value("transports", s.transports);
  s.net_devices = j.value("net_devices", std::string());
  s.poll_us = j.value("poll_us", int64_t{0});
  s.poll_in_flight_us = j.value("poll_in_flight_us", int64_t{-1});
  s.snic_gbps = j.value("snic_gbps", 0.0);
  return s;
}

Result<std::unique_ptr<NodeRuntime>> NodeRuntime::create(const NodeSetup& setup) {
  std::unique_ptr<NodeRuntime> rt(new NodeRuntime(setup));
  const std::string name = fmt::format("{}{}", role_name(setup.role), setup.index);
  DP_ASSIGN_OR_RETURN(rt->backends_, BackendFactory::create(setup.backend));
  const compute::KvShape shape = rt->backends_->kv_shape();
  rt->layout_ =
      store::BlockLayout{shape.layers, setup.block_tokens, shape.bytes_per_token_per_layer};
  DP_RETURN_IF_ERROR(rt->layout_.validate(), "node {}", name);

  rt->nic_ = std::make_unique<store::StorageNic>(setup.snic_gbps, rt->clock_);
  store::FileStoreOptions so;
  so.data_paths = setup.data_paths;
  so.model = kv_fingerprint(setup.backend);
  so.layout = rt->layout_;
  so.capacity_bytes = setup.store_capacity_bytes;
  so.storage_nic = rt->nic_.get();
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
                       dram_key, setup.dram_buffer_bytes, full_block));
  if (setup.engines < 1) {
    return Status::invalid_argument(
        fmt::format("node {}: live.engines_per_node = {} must be at least 1", name, setup.engines));
  }
  rt->engines_.resize(static_cast<size_t>(setup.engines));
  for (EngineParts& e : rt->engines_) {
    DP_ASSIGN_OR_RETURN(e.hbm, SlotPool::create(*rt->worker_, "HBM arena", "live.hbm_mb",
                                                setup.hbm_bytes,
                                                static_cast<uint64_t>(rt->layout_.layer_block_bytes())));
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
  for (auto& p : peers_) {
    p->hbm.clear();
    p->dram.reset();
    p->endpoint.reset();
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

Json NodeRuntime::hello() const {
  Json hbm = Json::array();
  for (const EngineParts& e : engines_) hbm.push_back(to_hex(e.hbm->region().descriptor()));
  return Json{{"role", role_name(setup_.role)},
              {"index", setup_.index},
              {"address", to_hex(worker_->address())},
              {"dram", to_hex(dram_->region().descriptor())},
              {"hbm", hbm}};
}

Status NodeRuntime::connect_peers(const Json& peers) {
  for (const Json& p : peers) {
    DP_ASSIGN_OR_RETURN(NodeRole role, parse_role(p.value("role", std::string())));
    if (role == setup_.role) continue;
    auto peer = std::make_unique<PeerNode>();
    peer->role = role;
    peer->index = p.value("index", 0);
    DP_ASSIGN_OR_RETURN(auto address, from_hex(p.value("address", std::string())));
    DP_ASSIGN_OR_RETURN(auto dram, from_hex(p.value("dram", std::string())));
    DP_ASSIGN_OR_RETURN(peer->endpoint, worker_->connect(address));
    DP_ASSIGN_OR_RETURN(peer->dram, worker_->import_region(*peer->endpoint, dram));
    for (const Json& blob : p.value("hbm", Json::array())) {
      DP_ASSIGN_OR_RETURN(auto hbm, from_hex(blob.get<std::string>()));
      DP_ASSIGN_OR_RETURN(auto region, worker_->import_region(*peer->endpoint, hbm));
      peer->hbm.push_back(std::move(region));
    }
    peers_.push_back(std::move(peer));
  }
  return Status::ok();
}

Result<PeerNode*> NodeRuntime::peer(NodeRole role, int index) {
  for (auto& p : peers_) {
    if (p->role == role && p->index == index) return p.get();
  }
  return Status::not_found(fmt::format("no {} node {} is connected to {} node {}", role_name(role),
                                       index, role_name(setup_.role), setup_.index));
}

}  // namespace dualpath::engine
