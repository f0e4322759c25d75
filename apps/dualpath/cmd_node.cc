// `dualpath node`: one node process of the live system, started by a local driver
// (`dualpath demo`, `dualpath bench live`) and told its setup over the control socket
// (src/engine/node_main.h, docs/engine.md).

#include "apps/dualpath/command.h"
#include "engine/node_main.h"

namespace dualpath::app {
namespace {

void setup(CLI::App& parent, int& exit_code) {
  auto args = std::make_shared<engine::NodeArgs>();
  CLI::App* cmd = parent.add_subcommand(
      "node",
      "Run one prefill or decode node process of the live system. Normally started by a driver\n"
      "(dualpath demo), which passes --driver-port and then the node's setup over that socket.");
  cmd->add_option("--role", args->role, "prefill or decode")
      ->required()
      ->check(CLI::IsMember({"prefill", "decode"}));
  cmd->add_option("--index", args->index, "the node's index among its role's nodes")->required();
  cmd->add_option("--driver-port", args->driver_port, "the driver's control port on 127.0.0.1")
      ->required();
  cmd->callback([args, &exit_code] { exit_code = engine::run_node(*args); });
}

DP_REGISTER_COMMAND("", "node", setup);

}  // namespace
}  // namespace dualpath::app
