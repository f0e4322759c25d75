#pragma once
// `dualpath doctor`: the seed deployment guide's troubleshooting list (../shared/seeds/000_*.txt
// §5), checked against a config before anything starts; `serve` runs it too. Each check gives an
// ok, a warning (the setup runs, but DualPath will not pay off as it should: the line says why and
// what to change) or an error (it cannot work: `doctor` exits 2 and `serve` refuses to start):
//
//   devices    the compute NIC (transport.net_devices) and the storage NIC ([storage_node]
//              rdma_device) exist; an error names the devices that do
//   isolation  compute and storage traffic on one device or one IP subnet: DualPath degrades to
//              one path fighting for one NIC (warning)
//   dram       a DRAM buffer smaller than one Full Block (error); at real scale (a model preset
//              with its real KV size) under 20 GiB (warning: 80 GB for DeepSeek, 40 GB for
//              Qwen); the local nodes' buffers beyond this machine's memory (warning)
//   qos        the KV class weighted above model traffic (error) or equal to it, or both on one
//              InfiniBand service level (warnings)
//   pd         P/D outside the bottleneck-free range of PAPER.md §6 for the hardware (warning)
//   keys       with health checks on, a key without the `models` scope, which /v1/models (the
//              guide's health check) answers with 403 (warning)
//   config     what the guide's keys mapped onto, where it changed something (warnings)
//
// The host (its devices, interfaces, memory) is an input, so tests give their own. Thread-safe
// (pure functions).

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "serve/api_keys.h"
#include "serve/serve_config.h"
#include "serve/serve_guide.h"
#include "transport/device_list.h"

namespace dualpath::serve {

struct NetInterface {
  std::string name;  // "eth0", or an RDMA device's netdev
  uint32_t ipv4 = 0, netmask = 0;  // host byte order; 0: none
};

struct DoctorHost {
  std::vector<transport::UcxDevice> ucx_devices;
  std::vector<NetInterface> interfaces;
  // RDMA device -> its netdevs (/sys/class/infiniband/DEV/device/net), for the subnet check.
  std::vector<std::pair<std::string, std::string>> rdma_netdevs;
  uint64_t memory_bytes = 0;  // 0: unknown
};

// This machine, as UCX, getifaddrs, sysfs and sysconf see it.
DoctorHost this_host();

struct DoctorInput {
  ServeConfig config;
  const ApiKeys* keys = nullptr;          // --api-keys
  std::optional<GuideSettings> settings;  // --settings
  bool local_nodes = true;                // the nodes run on this machine (serve's default)
  DoctorHost host;
};

enum class Severity { kOk, kWarning, kError };

struct Finding {
  Severity severity = Severity::kOk;
  std::string check;  // "devices", "isolation", "dram", "qos", "pd", "keys", "config"
  std::string message;
};

std::vector<Finding> run_doctor(const DoctorInput& in);

// One line per finding: "ok: CHECK: ...", "warning: CHECK: ...", "error: CHECK: ...".
std::string format_findings(const std::vector<Finding>& findings, bool with_ok = true);
bool has_errors(const std::vector<Finding>& findings);

}  // namespace dualpath::serve
