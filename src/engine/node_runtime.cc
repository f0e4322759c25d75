#include "engine/node_runtime.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/log.h"
#include "compute/cpu_weights.h"
#include "engine/engine_config.h"
#include "engine/wire.h"

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

Json NodeSetup::to_json() const {
  return Json{
      {"role", role_name(role)},
      {"index", index},
      {"backend", backend.to_json()},
      {"compute_slots", compute_slots},
      {"block_tokens", block_tokens},
      {"data_paths", data_paths},
      {"store_capacity_bytes", store_capacity_bytes},
      {"store_fault_rate", store_fault_rate},
      {"dram_buffer_bytes", dram_buffer_bytes},
      {"hbm_bytes", hbm_bytes},
      {"pipeline_depth", pipeline_depth},
      {"engines", engines},
      {"timeout_ms", std::chrono::duration_cast<std::chrono::milliseconds>(timeout).count()},
      {"report_interval_ms",
       std::chrono::duration_cast<std::chrono::milliseconds>(report_interval).count()},
      {"buffer_ttl_ms", std::chrono::duration_cast<std::chrono::milliseconds>(buffer_ttl).count()},
      {"transports", transports},
      {"net_devices", net_devices},
      {"poll_us", poll_us},
      {"poll_in_flight_us", poll_in_flight_us},
      {"snic_gbps", snic_gbps}};
}

Result<NodeSetup> NodeSetup::from_json(const Json& j) {
  WireReader r(j, "node setup");
  NodeSetup s;
  auto role = parse_role(r.str("role"));
  if (r.status().is_ok() && !role.is_ok()) r.fail("role", role.status().message());
  s.index = static_cast<int>(r.i64("index", 0, 1 << 20));
  const Json& backend = r.object("backend");
  s.compute_slots = static_cast<int>(r.i64_or("compute_slots", s.compute_slots, 0, 1 << 16));
  s.engines = static_cast<int>(r.i64_or("engines", s.engines, 1, 1 << 10));
  s.block_tokens = r.i64_or("block_tokens", s.block_tokens, 1, 1 << 20);
  s.data_paths = r.has("data_paths") ? r.str_list("data_paths") : std::vector<std::string>{};
  s.store_capacity_bytes = r.i64_or("store_capacity_bytes", 0, 0);
  s.store_fault_rate = r.number_or("store_fault_rate", 0.0, 0.0, 0.5);
  s.dram_buffer_bytes = r.u64("dram_buffer_bytes");
  s.hbm_bytes = r.u64("hbm_bytes");
  s.pipeline_depth = static_cast<int>(r.i64_or("pipeline_depth", s.pipeline_depth, 2, 64));
  s.timeout = std::chrono::milliseconds(r.i64_or("timeout_ms", 30000, 1, int64_t{1} << 40));
  s.report_interval =
      std::chrono::milliseconds(r.i64_or("report_interval_ms", 100, 1, int64_t{1} << 30));
  s.buffer_ttl = std::chrono::milliseconds(r.i64_or("buffer_ttl_ms", 0, 0, int64_t{1} << 40));
  s.transports = r.str_or("transports", s.transports);
  s.net_devices = r.str_or("net_devices", "");
  s.poll_us = r.i64_or("poll_us", 0, 0);
  s.poll_in_flight_us = r.i64_or("poll_in_flight_us", -1, -1);
  s.snic_gbps = r.number_or("snic_gbps", 0.0, 0.0);
  DP_RETURN_IF_ERROR(r.status());
  s.role = *role;
  DP_ASSIGN_OR_RETURN(s.backend, BackendSpec::from_json(backend));
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
  {
    std::lock_guard lock(peers_mu_);
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
  if (!peers.is_array()) return Status::invalid_argument("peers: not a list of node hellos");
  for (const Json& p : peers) {
    WireReader r(p, "peer hello");
    auto role = parse_role(r.str("role"));
    const int index = static_cast<int>(r.i64("index", 0, 1 << 20));
    const std::string address_hex = r.str("address");
    const std::string dram_hex = r.str("dram");
    const std::vector<std::string> hbm_hex = r.str_list("hbm");
    DP_RETURN_IF_ERROR(r.status());
    if (!role.is_ok()) return role.status();
    if (*role == setup_.role) continue;
    {
      std::lock_guard lock(peers_mu_);
      bool same = false;
      for (const auto& q : peers_) {
        if (q->role == *role && q->index == index && q->address_hex == address_hex) same = true;
      }
      if (same) continue;
    }
    auto peer = std::make_shared<PeerNode>();
    peer->role = *role;
    peer->index = index;
    peer->address_hex = address_hex;
    DP_ASSIGN_OR_RETURN(auto address, from_hex(address_hex));
    DP_ASSIGN_OR_RETURN(auto dram, from_hex(dram_hex));
    DP_ASSIGN_OR_RETURN(peer->endpoint, worker_->connect(address));
    DP_ASSIGN_OR_RETURN(peer->dram, worker_->import_region(*peer->endpoint, dram));
    for (const std::string& blob : hbm_hex) {
      DP_ASSIGN_OR_RETURN(auto hbm, from_hex(blob));
      DP_ASSIGN_OR_RETURN(auto region, worker_->import_region(*peer->endpoint, hbm));
      peer->hbm.push_back(std::move(region));
    }
    std::lock_guard lock(peers_mu_);
    std::erase_if(peers_, [&](const auto& q) { return q->role == *role && q->index == index; });
    peers_.push_back(std::move(peer));
  }
  return Status::ok();
}

Result<std::shared_ptr<PeerNode>> NodeRuntime::peer(NodeRole role, int index) {
  std::lock_guard lock(peers_mu_);
  for (auto& p : peers_) {
    if (p->role == role && p->index == index) return p;
  }
  return Status::not_found(fmt::format("no {} node {} is connected to {} node {}", role_name(role),
                                       index, role_name(setup_.role), setup_.index));
}

}  // namespace dualpath::engine
