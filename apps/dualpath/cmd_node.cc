// `dualpath node`: one prefill or decode node process of the live system, on any host. It
// connects to the scheduler service (`dualpath serve`), registers, receives its setup and
// serves (src/engine/node_main.h, docs/serve.md).

#include <fmt/format.h>

#include <optional>

#include "apps/dualpath/cli_util.h"
#include "apps/dualpath/command.h"
#include "engine/node_main.h"

namespace dualpath::app {
namespace {

struct NodeFlags {
  engine::NodeArgs args;
  std::optional<double> connect_timeout_s;
  std::optional<double> reconnect_timeout_s;
};

void setup(CLI::App& parent, int& exit_code) {
  auto flags = std::make_shared<NodeFlags>();
  CLI::App* cmd = parent.add_subcommand(
      "node",
      "Run one prefill or decode node of the live system. It connects to the scheduler service\n"
      "(`dualpath serve` prints its address in its ready line), registers, receives its setup\n"
      "(model, buffers, store paths) from the scheduler's config and serves until the scheduler\n"
      "says quit. If the scheduler restarts, the node re-registers with it and keeps its state.\n"
      "`dualpath serve` starts the config's nodes on this machine itself; run nodes by hand for\n"
      "a cluster across hosts (serve --external-nodes).\n"
      "Examples:\n"
      "  dualpath node --scheduler 10.0.0.1:8100 --role prefill\n"
      "  dualpath node --scheduler 127.0.0.1:8100 --role decode --index 1");
  cmd->add_option("--scheduler", flags->args.scheduler, "HOST:PORT of the scheduler service")
      ->required();
  cmd->add_option("--role", flags->args.role, "prefill or decode")
      ->required()
      ->check(CLI::IsMember({"prefill", "decode"}));
  cmd->add_option("--index", flags->args.index,
                  "the node's index among its role's nodes (default: the lowest free one)");
  cmd->add_option("--listen", flags->args.listen,
                  "network interface for this node's UCX traffic over tcp (default: the "
                  "scheduler config's transport.net_devices, loopback)");
  cmd->add_option("--connect-timeout", flags->connect_timeout_s,
                  "seconds to keep trying to reach the scheduler at start (default 30)");
  cmd->add_option("--reconnect-timeout", flags->reconnect_timeout_s,
                  "seconds to keep trying after losing the scheduler (default 600)");
  cmd->callback([flags, &exit_code] {
    for (auto [name, v] : {std::pair{"--connect-timeout", flags->connect_timeout_s},
                           std::pair{"--reconnect-timeout", flags->reconnect_timeout_s}}) {
      if (v && !(*v > 0 && *v <= 86400)) {
        exit_code = usage_error(fmt::format("{} {}: give seconds between 0 and 86400", name, *v));
        return;
      }
    }
    if (flags->args.index < -1) {
      exit_code = usage_error(fmt::format(
          "--index {}: give the node's index (0, 1, ...) or leave it out", flags->args.index));
      return;
    }
    if (flags->connect_timeout_s)
      flags->args.connect_timeout = from_seconds(*flags->connect_timeout_s);
    if (flags->reconnect_timeout_s)
      flags->args.reconnect_timeout = from_seconds(*flags->reconnect_timeout_s);
    auto hp = engine::parse_host_port(flags->args.scheduler);
    if (!hp.is_ok()) {
      exit_code = usage_error(hp.status().message());
      return;
    }
    exit_code = engine::run_node(flags->args);
  });
}

DP_REGISTER_COMMAND("", "node", setup);

}  // namespace
}  // namespace dualpath::app
