#include "transport/context.h"

#include <fmt/format.h>
#include <ucp/api/ucp.h>

#include <unistd.h>

#include <cstdlib>
#include <random>
#include <set>
#include <string_view>

#include "transport/device_list.h"
#include "transport/ucx_status.h"

namespace dualpath::transport {
namespace {

Status modify(ucp_config_t* config, const std::string& name, const std::string& value) {
  ucs_status_t st = ucp_config_modify(config, name.c_str(), value.c_str());
  if (st != UCS_OK) {
    return Status::invalid_argument(fmt::format(
        "UCX setting {}={} was rejected: {}; check the name (without the UCX_ prefix) against "
        "`ucx_info -c`",
        name, value, ucs_status_string(st)));
  }
  return Status::ok();
}

// True unless every transport in the UCX_TLS list is intra-node shared memory (or self).
bool supports_peer_failure(std::string tls) {
  if (tls.empty()) {
    const char* env = std::getenv("UCX_TLS");
    tls = env ? env : "";
  }
  if (tls.empty() || tls.front() == '^') return true;  // all transports, network ones included
  static const std::set<std::string, std::less<>> kSharedMemory = {"sm",  "shm",  "posix", "sysv",
                                                                   "cma", "knem", "xpmem", "self"};
  size_t start = 0;
  while (start <= tls.size()) {
    size_t comma = std::min(tls.find(',', start), tls.size());
    std::string_view name = std::string_view(tls).substr(start, comma - start);
    start = comma + 1;
    if (!name.empty() && !kSharedMemory.contains(name)) return true;
  }
  return false;
}

}  // namespace

Result<std::unique_ptr<Context>> Context::create(const ContextOptions& options) {
  std::string devices = options.net_devices;
  if (devices.empty()) {
    if (const char* env = std::getenv("UCX_NET_DEVICES")) devices = env;
  }
  if (!devices.empty()) {
    DP_ASSIGN_OR_RETURN(auto available, list_ucx_devices());
    DP_RETURN_IF_ERROR(check_net_devices(devices, available));
  }

  ucp_config_t* config = nullptr;
  DP_RETURN_IF_ERROR(ucx_status(ucp_config_read(nullptr, nullptr, &config), "ucp_config_read"));
  Status applied;
  if (!options.transports.empty()) applied = modify(config, "TLS", options.transports);
  if (applied.is_ok() && !options.net_devices.empty()) {
    applied = modify(config, "NET_DEVICES", options.net_devices);
  }
  for (const auto& [name, value] : options.settings) {
    if (applied.is_ok()) applied = modify(config, name, value);
  }
  if (!applied.is_ok()) {
    ucp_config_release(config);
    return applied;
  }

  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED;
  // Wakeup: progress threads sleep on the worker's event fd instead of spinning (issue 4).
  params.features = UCP_FEATURE_RMA | UCP_FEATURE_AM | UCP_FEATURE_WAKEUP;
  params.mt_workers_shared = 0;  // each worker is owned by one progress thread
  ucp_context_h context = nullptr;
  ucs_status_t st = ucp_init(&params, config, &context);
  ucp_config_release(config);
  DP_RETURN_IF_ERROR(ucx_status(st, "ucp_init"), "UCX context with transports '{}', devices '{}'",
                     options.transports.empty() ? "<env/default>" : options.transports,
                     devices.empty() ? "<all>" : devices);
  return std::unique_ptr<Context>(
      new Context(context, options, supports_peer_failure(options.transports)));
}

Context::Context(ucp_context* context, ContextOptions options, bool peer_failure_detection)
    : context_(context),
      options_(std::move(options)),
      peer_failure_detection_(peer_failure_detection) {
  std::random_device rd;
  id_ = ((static_cast<uint64_t>(rd()) << 32) ^ rd()) ^ static_cast<uint64_t>(getpid());
}

bool Context::overlaps_registration(const std::byte* data, uint64_t size) const {
  auto base = reinterpret_cast<uintptr_t>(data);
  MutexLock lock(registry_mu_);
  auto next = registry_.lower_bound(base);
  bool hit = next != registry_.end() && next->first < base + size;
  if (next != registry_.begin()) {
    auto prev = std::prev(next);
    hit = hit || prev->first + prev->second.size_bytes > base;
  }
  return hit;
}

void Context::add_registration(const std::byte* data, uint64_t size, ucp_mem* memh) {
  MutexLock lock(registry_mu_);
  registry_[reinterpret_cast<uintptr_t>(data)] = Registration{size, memh};
}

void Context::remove_registration(const std::byte* data) {
  MutexLock lock(registry_mu_);
  registry_.erase(reinterpret_cast<uintptr_t>(data));
}

ucp_mem* Context::find_registration(const std::byte* data, uint64_t size) const {
  auto p = reinterpret_cast<uintptr_t>(data);
  MutexLock lock(registry_mu_);
  auto it = registry_.upper_bound(p);
  if (it == registry_.begin()) return nullptr;
  --it;
  if (p + size > it->first + it->second.size_bytes) return nullptr;
  return it->second.memh;
}

Context::~Context() { ucp_cleanup(context_); }

}  // namespace dualpath::transport
