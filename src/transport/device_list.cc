#include "transport/device_list.h"

#include <fmt/format.h>
#include <uct/api/uct.h>

#include <algorithm>
#include <map>

#include "transport/ucx_status.h"

namespace dualpath::transport {
namespace {

// Adds the transport resources of one memory domain to `by_device`.
void add_md_resources(uct_component_h component,
                      const char* md_name,
                      std::map<std::string, std::vector<std::string>>& by_device) {
  uct_md_config_t* md_config = nullptr;
  if (uct_md_config_read(component, nullptr, nullptr, &md_config) != UCS_OK) return;
  uct_md_h md = nullptr;
  ucs_status_t st = uct_md_open(component, md_name, md_config, &md);
  uct_config_release(md_config);
  if (st != UCS_OK) return;
  uct_tl_resource_desc_t* resources = nullptr;
  unsigned num_resources = 0;
  if (uct_md_query_tl_resources(md, &resources, &num_resources) == UCS_OK) {
    for (unsigned i = 0; i < num_resources; ++i) {
      auto& tls = by_device[resources[i].dev_name];
      if (std::find(tls.begin(), tls.end(), resources[i].tl_name) == tls.end()) {
        tls.emplace_back(resources[i].tl_name);
      }
    }
    uct_release_tl_resource_list(resources);
  }
  uct_md_close(md);
}

}  // namespace

Result<std::vector<UcxDevice>> list_ucx_devices() {
  uct_component_h* components = nullptr;
  unsigned num_components = 0;
  DP_RETURN_IF_ERROR(
      ucx_status(uct_query_components(&components, &num_components), "uct_query_components"));
  std::map<std::string, std::vector<std::string>> by_device;
  for (unsigned c = 0; c < num_components; ++c) {
    uct_component_attr_t attr{};
    attr.field_mask = UCT_COMPONENT_ATTR_FIELD_MD_RESOURCE_COUNT;
    if (uct_component_query(components[c], &attr) != UCS_OK) continue;
    std::vector<uct_md_resource_desc_t> mds(attr.md_resource_count);
    attr.field_mask = UCT_COMPONENT_ATTR_FIELD_MD_RESOURCES;
    attr.md_resources = mds.data();
    if (uct_component_query(components[c], &attr) != UCS_OK) continue;
    for (const auto& md : mds) add_md_resources(components[c], md.md_name, by_device);
  }
  uct_release_component_list(components);
  std::vector<UcxDevice> devices;
  for (auto& [name, tls] : by_device) devices.push_back({name, std::move(tls)});
  return devices;
}

std::string describe_devices(const std::vector<UcxDevice>& devices) {
  std::string out;
  for (const auto& d : devices) {
    if (!out.empty()) out += ", ";
    out += fmt::format("{} ({})", d.name, fmt::join(d.transports, ", "));
  }
  return out.empty() ? "none" : out;
}

Status check_net_devices(std::string_view net_devices, const std::vector<UcxDevice>& available) {
  if (net_devices.empty() || net_devices == "all") return Status::ok();
  size_t start = 0;
  while (start <= net_devices.size()) {
    size_t comma = net_devices.find(',', start);
    if (comma == std::string_view::npos) comma = net_devices.size();
    std::string_view name = net_devices.substr(start, comma - start);
    start = comma + 1;
    if (name.empty()) continue;
    bool found = std::any_of(available.begin(), available.end(),
                             [&](const UcxDevice& d) { return d.name == name; });
    if (!found) {
      return Status::not_found(fmt::format(
          "UCX network device '{}' (from UCX_NET_DEVICES / net_devices '{}') does not exist on "
          "this host; available devices: {}; set UCX_NET_DEVICES (or the transport's "
          "net_devices setting) to one of them, or to 'all'",
          name, net_devices, describe_devices(available)));
    }
  }
  return Status::ok();
}

}  // namespace dualpath::transport
