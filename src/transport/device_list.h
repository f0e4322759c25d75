#pragma once
// The UCX network devices of this host, and the check behind a clear "device not found" error
// (the seeds' pitfall: a UCX_NET_DEVICES naming a missing device used to fail later and vaguely).
// Thread-safe (no shared state).

#include <string>
#include <string_view>
#include <vector>

#include "dualpath/result.h"

namespace dualpath::transport {

// One UCX device and the transports that can use it, e.g. {"lo", {"tcp"}} or
// {"mlx5_0:1", {"rc_verbs", "ud_verbs", "rc_mlx5"}}.
struct UcxDevice {
  std::string name;
  std::vector<std::string> transports;
};

// Lists devices through UCT's component/memory-domain/transport resource queries (the data
// `ucx_info -d` prints). Fails only when UCT itself cannot be queried.
Result<std::vector<UcxDevice>> list_ucx_devices();

// "lo (tcp), memory (posix, sysv, cma)" for messages.
std::string describe_devices(const std::vector<UcxDevice>& devices);

// Checks a UCX_NET_DEVICES value ("all", or a comma-separated list of device names) against
// `available`. Returns kNotFound naming the missing device and listing the available ones.
Status check_net_devices(std::string_view net_devices, const std::vector<UcxDevice>& available);

}  // namespace dualpath::transport
