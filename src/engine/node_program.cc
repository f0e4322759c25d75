// dp_engine_node: the node program of the tests; the same code as `dualpath node`
// (node_main.h), with the flags --scheduler HOST:PORT --role R [--index N] [--listen IF]
// [--connect-timeout S] [--reconnect-timeout S].

#include <charconv>
#include <cstdio>
#include <string>

#include "engine/node_main.h"

int main(int argc, char** argv) {
  dualpath::engine::NodeArgs args;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string key = argv[i];
    const std::string value = argv[i + 1];
    if (key == "--role") {
      args.role = value;
    } else if (key == "--scheduler") {
      args.scheduler = value;
    } else if (key == "--listen") {
      args.listen = value;
    } else if (key == "--connect-timeout" || key == "--reconnect-timeout") {
      double secs = 0;
      const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), secs);
      if (ec != std::errc() || end != value.data() + value.size() || !(secs > 0)) {
        std::fprintf(stderr, "dp_engine_node: %s '%s' is not a number of seconds\n", key.c_str(),
                     value.c_str());
        return 2;
      }
      (key == "--connect-timeout" ? args.connect_timeout : args.reconnect_timeout) =
          dualpath::from_seconds(secs);
    } else if (key == "--index") {
      const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), args.index);
      if (ec != std::errc() || end != value.data() + value.size()) {
        std::fprintf(stderr, "dp_engine_node: --index '%s' is not a number\n", value.c_str());
        return 2;
      }
    } else {
      std::fprintf(stderr, "dp_engine_node: unknown flag %s\n", key.c_str());
      return 2;
    }
  }
  return dualpath::engine::run_node(args);
}
