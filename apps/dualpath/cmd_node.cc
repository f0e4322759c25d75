// `dualpath node`: one prefill or decode node process of the live system, on any host. It
// registers with the scheduler service (`dualpath serve`), receives its setup and serves
// (src/node/node_main.h, docs/serve.md). Its flags are node/node_flags.h's.

#include <fmt/format.h>

#include "apps/dualpath/cli_util.h"
#include "apps/dualpath/command.h"
#include "node/node_flags.h"

namespace dualpath::app {
namespace {

void setup(CLI::App& parent, int& exit_code) {
  auto flags = std::make_shared<node::NodeFlags>();
  CLI::App* cmd = parent.add_subcommand(
      "node",
      "Run one prefill or decode node of the live system. It registers with the scheduler\n"
      "service (`dualpath serve` prints its address in its ready line), receives its setup\n"
      "(model, buffers, store paths) from the scheduler's config and serves until the scheduler\n"
      "says quit. If the scheduler restarts, the node re-registers with it and keeps its state.\n"
      "`dualpath serve` starts the config's nodes on this machine itself; run nodes by hand for\n"
      "a cluster across hosts (serve --external-nodes), with the cluster credential.\n"
      "Examples:\n"
      "  dualpath keygen --out cluster.key     # once; copy it to every host, mode 0600\n"
      "  dualpath node --scheduler 10.0.0.1:8100 --role prefill --cluster-key cluster.key\n"
      "  dualpath node --scheduler 127.0.0.1:8100 --role decode --index 1");
  node::add_node_flags(*cmd, *flags);
  cmd->callback([flags, &exit_code] {
    auto args = node::finish_node_flags(*flags);
    if (!args.is_ok()) {
      exit_code = usage_error(args.status().message());
      return;
    }
    exit_code = node::run_node(*args);
  });
}

DP_REGISTER_COMMAND("", "node", setup);

}  // namespace
}  // namespace dualpath::app
