// dp_node: the node program of the tests, small enough to build under every sanitizer: the same
// code and the same flags as `dualpath node` (node_flags.h, node_main.h).

#include <cstdio>

#include "node/node_flags.h"

int main(int argc, char** argv) {
  CLI::App app("dp_node: one node of the live system (the tests' copy of `dualpath node`)");
  dualpath::node::NodeFlags flags;
  dualpath::node::add_node_flags(app, flags);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  auto args = dualpath::node::finish_node_flags(flags);
  if (!args.is_ok()) {
    std::fprintf(stderr, "dp_node: error: %s\n", args.status().message().c_str());
    return 2;
  }
  return dualpath::node::run_node(*args);
}
