#include "node/node_flags.h"

#include <fmt/format.h>

namespace dualpath::node {

void add_node_flags(CLI::App& cmd, NodeFlags& flags) {
  cmd.add_option("--scheduler", flags.args.scheduler,
                 "HOST:PORT of the scheduler service (`dualpath serve` prints it)")
      ->required();
  cmd.add_option("--role", flags.args.role, "prefill or decode")
      ->required()
      ->check(CLI::IsMember({"prefill", "decode"}));
  cmd.add_option("--index", flags.args.index,
                 "the node's index among its role's nodes (default: the lowest free one)");
  cmd.add_option("--cluster-key", flags.args.cluster_key,
                 "the cluster credential (`dualpath keygen --out FILE`, the file given to "
                 "`serve --cluster-key`): the control plane is mutual TLS; without it, plain TCP "
                 "to a scheduler on this host only");
  cmd.add_option("--listen", flags.args.listen,
                 "address or interface this node's UCX traffic (over tcp) and control service "
                 "bind (default: the scheduler config's transport.net_devices, loopback, and the "
                 "address on the route to the scheduler)");
  cmd.add_option("--control-port", flags.args.control_port,
                 "port of this node's control service, which the scheduler calls (default 0: "
                 "any free one; set it to open one port in a firewall)");
  cmd.add_option("--connect-timeout", flags.connect_timeout_s,
                 "seconds to keep trying to reach the scheduler at start (default 30)");
  cmd.add_option("--reconnect-timeout", flags.reconnect_timeout_s,
                 "seconds to keep trying after losing the scheduler (default 600)");
}

Result<NodeArgs> finish_node_flags(NodeFlags& flags) {
  for (auto [name, v] : {std::pair{"--connect-timeout", flags.connect_timeout_s},
                         std::pair{"--reconnect-timeout", flags.reconnect_timeout_s}}) {
    if (v && !(*v > 0 && *v <= 86400)) {
      return Status::invalid_argument(
          fmt::format("{} {}: give seconds between 0 and 86400", name, *v));
    }
  }
  if (flags.args.index < -1) {
    return Status::invalid_argument(fmt::format(
        "--index {}: give the node's index (0, 1, ...) or leave it out", flags.args.index));
  }
  if (flags.args.control_port < 0 || flags.args.control_port > 65535) {
    return Status::invalid_argument(fmt::format(
        "--control-port {}: give a port in 1..65535, or 0 for any free one",
        flags.args.control_port));
  }
  if (flags.connect_timeout_s) flags.args.connect_timeout = from_seconds(*flags.connect_timeout_s);
  if (flags.reconnect_timeout_s)
    flags.args.reconnect_timeout = from_seconds(*flags.reconnect_timeout_s);
  DP_RETURN_IF_ERROR(parse_host_port(flags.args.scheduler).status());
  return flags.args;
}

}  // namespace dualpath::node
