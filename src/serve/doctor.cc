#include "serve/doctor.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <unistd.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <filesystem>

#include "control/credential.h"
#include "model/pd_range.h"

namespace dualpath::serve {

namespace {

constexpr uint64_t kGiB = uint64_t{1} << 30;

// "mlx5_0:1" -> "mlx5_0".
std::string base_device(std::string_view d) {
  const size_t colon = d.find(':');
  return std::string(colon == std::string_view::npos ? d : d.substr(0, colon));
}

std::vector<std::string> split_list(std::string_view s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    size_t comma = s.find(',', start);
    if (comma == std::string_view::npos) comma = s.size();
    std::string item(s.substr(start, comma - start));
    if (!item.empty()) out.push_back(item);
    start = comma + 1;
  }
  return out;
}

bool device_exists(const DoctorHost& h, const std::string& dev) {
  const std::string base = base_device(dev);
  for (const auto& d : h.ucx_devices) {
    if (d.name == dev || base_device(d.name) == base) return true;
  }
  for (const auto& i : h.interfaces) {
    if (i.name == base) return true;
  }
  for (const auto& [rdma, net] : h.rdma_netdevs) {
    if (rdma == base) return true;
  }
  return false;
}

// The IPv4 subnets a device's traffic uses: its interface, or its RDMA device's netdevs.
std::vector<std::pair<uint32_t, uint32_t>> subnets_of(const DoctorHost& h, const std::string& dev) {
  const std::string base = base_device(dev);
  std::vector<std::string> names = {base};
  for (const auto& [rdma, net] : h.rdma_netdevs) {
    if (rdma == base) names.push_back(net);
  }
  std::vector<std::pair<uint32_t, uint32_t>> out;
  for (const auto& i : h.interfaces) {
    if (i.ipv4 != 0 && std::find(names.begin(), names.end(), i.name) != names.end()) {
      out.emplace_back(i.ipv4 & i.netmask, i.netmask);
    }
  }
  return out;
}

std::string subnet_text(uint32_t net, uint32_t mask) {
  int bits = 0;
  for (uint32_t m = mask; m != 0; m <<= 1) bits += (m & 0x80000000u) ? 1 : 0;
  return fmt::format("{}.{}.{}.{}/{}", net >> 24, (net >> 16) & 255, (net >> 8) & 255, net & 255,
                     bits);
}

std::string gib(uint64_t bytes) {
  return bytes >= kGiB ? fmt::format("{:.1f} GiB", static_cast<double>(bytes) / kGiB)
                       : fmt::format("{:.1f} MiB", static_cast<double>(bytes) / (1 << 20));
}

bool real_model(const engine::EngineConfig& e) {
  // A model/ preset priced at its real KV size: what a GPU deployment would run.
  return e.compute == "modeled" && e.kv_scale >= 1.0;
}

void check_devices(const DoctorInput& in, std::vector<Finding>& out) {
  const auto& e = in.config.engine;
  const std::string& net = e.transport.context.net_devices;
  const std::string available = transport::describe_devices(in.host.ucx_devices);
  bool ok = true;
  if (!net.empty() && net != "all") {
    Status s = transport::check_net_devices(net, in.host.ucx_devices);
    if (!s.is_ok()) {
      out.push_back({Severity::kError, "devices",
                     fmt::format("transport.net_devices = \"{}\": {}", net, s.message())});
      ok = false;
    }
  }
  if (!in.config.storage_device.empty() && !device_exists(in.host, in.config.storage_device)) {
    out.push_back(
        {Severity::kError, "devices",
         fmt::format("storage_node.rdma_device = \"{}\": device not found on this host; the "
                     "devices here are {}. Names differ between servers (mlx5_1, mlx5_bond_0): "
                     "`ibdev2netdev` or `rdma link show` lists the RDMA devices",
                     in.config.storage_device, available)});
    ok = false;
  }
  if (ok) {
    out.push_back({Severity::kOk, "devices",
                   fmt::format("compute NIC {}, storage NIC {} (UCX devices here: {})",
                               net.empty() ? "any (UCX picks)" : net,
                               in.config.storage_device.empty() ? "not named"
                                                                : in.config.storage_device,
                               available)});
  }
}

void check_isolation(const DoctorInput& in, std::vector<Finding>& out) {
  const auto& e = in.config.engine;
  const std::string& storage = in.config.storage_device;
  const std::string& tls = e.transport.context.transports;
  if (storage.empty()) {
    out.push_back({Severity::kOk, "isolation",
                   "no storage NIC named ([storage_node] rdma_device): nothing to compare"});
    return;
  }
  const std::string& net = e.transport.context.net_devices;
  if (net.empty() || net == "all") {
    if (tls.find("sm") == std::string::npos || tls.find("tcp") != std::string::npos ||
        tls.find("rc") != std::string::npos) {
      out.push_back(
          {Severity::kWarning, "isolation",
           fmt::format("transport.net_devices = \"{}\": UCX may send compute traffic over any "
                       "device, the storage NIC {} included; name the compute NICs "
                       "(transport.net_devices = \"mlx5_1:1,...\") so that the two stay apart",
                       net.empty() ? "" : net, storage)});
    } else {
      out.push_back({Severity::kOk, "isolation",
                     fmt::format("compute traffic goes over shared memory (transport.tls = "
                                 "\"{}\"), apart from the storage NIC {}",
                                 tls, storage)});
    }
    return;
  }
  for (const std::string& d : split_list(net)) {
    if (base_device(d) == base_device(storage)) {
      out.push_back(
          {Severity::kWarning, "isolation",
           fmt::format("compute (transport.net_devices \"{}\") and storage traffic "
                       "(storage_node.rdma_device \"{}\") share the device {}: DualPath "
                       "degrades to one path fighting for one NIC (a speedup near 1.1x). Put "
                       "storage on its own NIC, physically separate from the compute network",
                       net, storage, base_device(d))});
      return;
    }
    for (const auto& [snet, smask] : subnets_of(in.host, storage)) {
      for (const auto& [cnet, cmask] : subnets_of(in.host, d)) {
        if (snet == cnet && smask == cmask) {
          out.push_back(
              {Severity::kWarning, "isolation",
               fmt::format("compute NIC {} and storage NIC {} are on one subnet {}: the two "
                           "paths share one network, and DualPath degrades to one path. Put the "
                           "storage NIC on a network of its own (`ibstat` shows both ports)",
                           d, storage, subnet_text(snet, smask))});
          return;
        }
      }
    }
  }
  out.push_back({Severity::kOk, "isolation",
                 fmt::format("compute NICs {} and storage NIC {} are separate", net, storage)});
}

void check_dram(const DoctorInput& in, std::vector<Finding>& out) {
  const auto& e = in.config.engine;
  auto shape = engine::model_kv_shape(e);
  if (!shape.is_ok()) {
    out.push_back({Severity::kError, "dram", shape.status().message()});
    return;
  }
  const uint64_t full_block = static_cast<uint64_t>(shape->layers) *
                              static_cast<uint64_t>(shape->bytes_per_token_per_layer) *
                              static_cast<uint64_t>(e.block_tokens);
  bool ok = true;
  for (const auto& [key, bytes] : {std::pair{"pe_dram_buffer", e.pe_dram_buffer_bytes},
                                   std::pair{"de_dram_buffer", e.de_dram_buffer_bytes}}) {
    if (bytes < full_block) {
      out.push_back({Severity::kError, "dram",
                     fmt::format("{} = {} is smaller than one Full Block of {} ({} tokens of "
                                 "{}): no request can load a block; raise it",
                                 key, gib(bytes), gib(full_block), e.block_tokens, e.model)});
      ok = false;
    } else if (real_model(e) && bytes < 20 * kGiB) {
      const bool qwen = e.model.rfind("qwen", 0) == 0;
      out.push_back(
          {Severity::kWarning, "dram",
           fmt::format("{} = {} is under 20 GiB: the layerwise streaming evicts often and TTFT "
                       "can end up worse than with one path; give {} at least {} GB per node",
                       key, gib(bytes), e.model, qwen ? 40 : 80)});
      ok = false;
    }
  }
  // A decode node's DRAM tier (issue 35) fills up to its budget with sessions' KV.
  const uint64_t tier = in.config.tier_bytes();
  if (in.local_nodes && in.host.memory_bytes > 0) {
    const uint64_t need =
        static_cast<uint64_t>(e.prefill_nodes) * e.pe_dram_buffer_bytes +
        static_cast<uint64_t>(e.decode_nodes) * (e.de_dram_buffer_bytes + tier) +
        static_cast<uint64_t>(e.prefill_nodes + e.decode_nodes) * e.hbm_bytes *
            static_cast<uint64_t>(e.engines_per_node);
    if (need > in.host.memory_bytes) {
      out.push_back(
          {Severity::kWarning, "dram",
           fmt::format("the {} local nodes' buffers, emulated HBM{} need {}, more than this "
                       "machine's {}: lower the buffers (live.*_mb){} for a local run, or start "
                       "the nodes on their own hosts (serve --external-nodes)",
                       e.prefill_nodes + e.decode_nodes,
                       tier > 0 ? fmt::format(" and DRAM tiers ({} per decode node)", gib(tier))
                                : std::string(),
                       gib(need), gib(in.host.memory_bytes),
                       tier > 0 ? " or cache.de_dram_gb" : "")});
      ok = false;
    }
  }
  if (ok) {
    out.push_back({Severity::kOk, "dram",
                   fmt::format("PE buffer {}, DE buffer {}; a Full Block is {}",
                               gib(e.pe_dram_buffer_bytes), gib(e.de_dram_buffer_bytes),
                               gib(full_block))});
  }
}

void check_qos(const DoctorInput& in, std::vector<Finding>& out) {
  const auto& t = in.config.engine.transport;
  if (t.traffic.kv_weight > t.traffic.model_weight) {
    out.push_back(
        {Severity::kError, "qos",
         fmt::format("transport.traffic.kv_weight = {} is above model_weight = {}: KV cache "
                     "moves would outrank inference traffic and TPOT jitters. Inference first, "
                     "the cache in the gaps: e.g. model_weight = 99, kv_weight = 1",
                     t.traffic.kv_weight, t.traffic.model_weight)});
    return;
  }
  if (t.model_qos.ib_sl >= 0 && t.kv_qos.ib_sl >= 0 && t.kv_qos.ib_sl < t.model_qos.ib_sl) {
    // Not an error by itself (which SL maps to the high-priority VL is the fabric's choice).
    out.push_back({Severity::kWarning, "qos",
                   fmt::format("transport.kv.ib_sl = {} is below transport.model.ib_sl = {}: "
                               "check that the fabric's VL arbitration does not put the KV "
                               "class's VL first (the guide: VL2 low priority for the cache)",
                               t.kv_qos.ib_sl, t.model_qos.ib_sl)});
    return;
  }
  if (t.traffic.kv_weight == t.traffic.model_weight) {
    out.push_back({Severity::kWarning, "qos",
                   fmt::format("transport.traffic.kv_weight = model_weight = {}: the KV class "
                               "competes equally with model traffic; give model traffic the "
                               "larger weight",
                               t.traffic.kv_weight)});
    return;
  }
  if (t.model_qos.ib_sl >= 0 && t.model_qos.ib_sl == t.kv_qos.ib_sl) {
    out.push_back({Severity::kWarning, "qos",
                   fmt::format("transport.model.ib_sl = transport.kv.ib_sl = {}: both classes "
                               "share one InfiniBand service level, so the switches cannot "
                               "favour inference traffic",
                               t.kv_qos.ib_sl)});
    return;
  }
  out.push_back({Severity::kOk, "qos",
                 fmt::format("model traffic weighted {} to the KV class's {}",
                             t.traffic.model_weight, t.traffic.kv_weight)});
}

void check_pd(const DoctorInput& in, std::vector<Finding>& out) {
  const auto& e = in.config.engine;
  const auto& h = e.hardware;
  model::PdRangeInput r;
  r.gpus_per_node = h.gpus_per_node;
  r.snics_per_node = h.snics_per_node;
  r.snic_bytes_per_s = h.snic_bytes_per_s;
  r.cnic_bytes_per_s = h.cnic_bytes_per_s;
  r.dram_bytes_per_s = h.dram_bytes_per_s;
  auto range = model::bottleneck_free_range(r);
  const double pd = static_cast<double>(e.prefill_nodes) / e.decode_nodes;
  const std::string label = fmt::format("{}P{}D", e.prefill_nodes, e.decode_nodes);
  if (!range.is_ok() || !range->feasible) {
    out.push_back({Severity::kWarning, "pd",
                   fmt::format("the hardware ({}, g = {}, s = {}) has no bottleneck-free P/D "
                               "range{}",
                               h.name, h.gpus_per_node, h.snics_per_node,
                               range.is_ok() ? "" : ": " + range.status().message())});
    return;
  }
  const std::string span = fmt::format("{} .. {}", model::as_fraction(range->pd_min),
                                       model::as_fraction(range->pd_max));
  if (pd < range->pd_min - 1e-9 || pd > range->pd_max + 1e-9) {
    out.push_back(
        {Severity::kWarning, "pd",
         fmt::format("P/D = {} ({}) is outside {}, the bottleneck-free range for {} (g = {}, s "
                     "= {}; PAPER.md §6): some NIC or DRAM saturates before the storage NICs do. "
                     "`dualpath plan --nodes {}` finds the best split; re-split when the load "
                     "shifts (RL rollouts: prefill-heavy early)",
                     model::as_fraction(pd), label, span, h.name, h.gpus_per_node,
                     h.snics_per_node, e.prefill_nodes + e.decode_nodes)});
    return;
  }
  out.push_back({Severity::kOk, "pd",
                 fmt::format("P/D = {} ({}) is within {} for {}", model::as_fraction(pd), label,
                             span, h.name)});
}

// Who can reach the scheduler's port for nodes (issue 31): anyone who can may try to join, so a
// non-loopback address needs the cluster credential (serve refuses it without one).
void check_scheduler(const DoctorInput& in, std::vector<Finding>& out) {
  const SchedulerSettings& s = in.config.scheduler;
  const bool loopback = control::is_loopback_host(s.host);
  if (loopback) {
    out.push_back({Severity::kOk, "scheduler",
                   fmt::format("the scheduler listens for nodes on {}:{} (this host only){}", s.host,
                               s.port, s.cluster_key.empty() ? "" : ", mutual TLS")});
    return;
  }
  if (s.cluster_key.empty()) {
    out.push_back({Severity::kError, "scheduler",
                   fmt::format("the scheduler would listen for nodes on {}:{} without a cluster "
                               "credential: anyone who reaches the port could join as a node. "
                               "Make one with `dualpath keygen --out cluster.key` and give "
                               "--cluster-key cluster.key to serve and to every node",
                               s.host, s.port)});
    return;
  }
  out.push_back({Severity::kWarning, "scheduler",
                 fmt::format("the scheduler listens for nodes on {}:{}, beyond this host: only "
                             "holders of {} can join (mutual TLS), but keep the port behind a "
                             "firewall that admits the cluster's hosts",
                             s.host, s.port, s.cluster_key)});
}

void check_keys(const DoctorInput& in, std::vector<Finding>& out) {
  if (in.keys == nullptr) {
    out.push_back({Severity::kOk, "keys", "no API key file (the API serves loopback only)"});
    return;
  }
  const bool health = !in.settings || in.settings->health_check;
  const std::string endpoint = in.settings ? in.settings->health_endpoint : "/v1/models";
  const auto lacking = in.keys->names_lacking(Scope::kModels);
  if (health && !lacking.empty() && endpoint.find("/v1/models") != std::string::npos) {
    out.push_back(
        {Severity::kWarning, "keys",
         fmt::format("{} key{} in {} lack{} the `models` scope ({}): a health check on {} with "
                     "{} gets 403. Add \"models\" to their scopes, or check /health (no key "
                     "needed)",
                     lacking.size(), lacking.size() == 1 ? "" : "s", in.keys->path(),
                     lacking.size() == 1 ? "s" : "", fmt::join(lacking, ", "), endpoint,
                     lacking.size() == 1 ? "it" : "them")});
    return;
  }
  out.push_back({Severity::kOk, "keys",
                 fmt::format("{} keys in {}{}", in.keys->size(), in.keys->path(),
                             health ? "; every key may call /v1/models" : "")});
}

}  // namespace

DoctorHost this_host() {
  DoctorHost h;
  if (auto d = transport::list_ucx_devices(); d.is_ok()) h.ucx_devices = std::move(d).value();
  ifaddrs* ifs = nullptr;
  if (::getifaddrs(&ifs) == 0) {
    for (ifaddrs* i = ifs; i != nullptr; i = i->ifa_next) {
      NetInterface n;
      n.name = i->ifa_name ? i->ifa_name : "";
      if (i->ifa_addr != nullptr && i->ifa_addr->sa_family == AF_INET && i->ifa_netmask) {
        n.ipv4 = ntohl(reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr.s_addr);
        n.netmask = ntohl(reinterpret_cast<sockaddr_in*>(i->ifa_netmask)->sin_addr.s_addr);
      }
      h.interfaces.push_back(std::move(n));
    }
    ::freeifaddrs(ifs);
  }
  std::error_code ec;
  for (const auto& dev : std::filesystem::directory_iterator("/sys/class/infiniband", ec)) {
    std::error_code ec2;
    const auto net = dev.path() / "device" / "net";
    for (const auto& nd : std::filesystem::directory_iterator(net, ec2)) {
      h.rdma_netdevs.emplace_back(dev.path().filename().string(), nd.path().filename().string());
    }
    if (ec2) h.rdma_netdevs.emplace_back(dev.path().filename().string(), "");
  }
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long page = ::sysconf(_SC_PAGESIZE);
  if (pages > 0 && page > 0) h.memory_bytes = static_cast<uint64_t>(pages) * page;
  return h;
}

std::vector<Finding> run_doctor(const DoctorInput& in) {
  std::vector<Finding> out;
  for (const std::string& w : in.config.warnings) out.push_back({Severity::kWarning, "config", w});
  if (Status s = in.config.engine.validate(); !s.is_ok()) {
    out.push_back({Severity::kError, "config", s.message()});
  }
  check_devices(in, out);
  check_isolation(in, out);
  check_dram(in, out);
  check_qos(in, out);
  check_pd(in, out);
  check_scheduler(in, out);
  check_keys(in, out);
  return out;
}

std::string format_findings(const std::vector<Finding>& findings, bool with_ok) {
  std::string s;
  for (const Finding& f : findings) {
    if (f.severity == Severity::kOk && !with_ok) continue;
    const char* tag = f.severity == Severity::kOk        ? "ok"
                      : f.severity == Severity::kWarning ? "warning"
                                                         : "error";
    s += fmt::format("{}: {}: {}\n", tag, f.check, f.message);
  }
  return s;
}

bool has_errors(const std::vector<Finding>& findings) {
  return std::any_of(findings.begin(), findings.end(),
                     [](const Finding& f) { return f.severity == Severity::kError; });
}

}  // namespace dualpath::serve
