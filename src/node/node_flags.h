#pragma once
// The flags of `dualpath node` (apps/dualpath/cmd_node.cc) and of the tests' node program
// (node_program.cc): one definition, one check, so that both parse alike.
//
// Thread-compatible.

#include <CLI/CLI.hpp>

#include <optional>

#include "node/node_main.h"

namespace dualpath::node {

struct NodeFlags {
  NodeArgs args;
  std::optional<double> connect_timeout_s;
  std::optional<double> reconnect_timeout_s;
};

// Adds the node's options to `cmd`.
void add_node_flags(CLI::App& cmd, NodeFlags& flags);
// Checks the parsed flags and fills flags.args; kInvalidArgument naming the flag and the fix.
Result<NodeArgs> finish_node_flags(NodeFlags& flags);

}  // namespace dualpath::node
