// dp_engine_node: a node process for the engine tests, the same code as `dualpath node`
// (node_main.h). Arguments: --role prefill|decode --index I --driver-port P.
#include <cstdlib>
#include <cstring>
#include <string>

#include "engine/node_main.h"

int main(int argc, char** argv) {
  dualpath::engine::NodeArgs args;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--role") == 0) args.role = argv[i + 1];
    if (std::strcmp(argv[i], "--index") == 0) args.index = std::atoi(argv[i + 1]);
    if (std::strcmp(argv[i], "--driver-port") == 0) {
      args.driver_port = static_cast<uint16_t>(std::atoi(argv[i + 1]));
    }
  }
  return dualpath::engine::run_node(args);
}
