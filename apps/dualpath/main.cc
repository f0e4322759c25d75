// dualpath: one CLI for the simulator, the planner, the live system and the benchmarks.
// Subcommands live in cmd_*.cc and register themselves (command.h).

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <vector>

#include "apps/dualpath/command.h"

namespace dualpath::app {
namespace {

struct Entry {
  std::string parent;
  std::string name;
  CommandSetup setup;
};

std::vector<Entry>& registry() {
  static std::vector<Entry> entries;
  return entries;
}

}  // namespace

bool register_command(std::string parent, std::string name, CommandSetup setup) {
  registry().push_back({std::move(parent), std::move(name), std::move(setup)});
  return true;
}

int usage_error(const std::string& message) {
  std::fprintf(stderr, "dualpath: error: %s\n", message.c_str());
  return 2;
}

}  // namespace dualpath::app

int main(int argc, char** argv) {
  using dualpath::app::registry;
  CLI::App app{
      "dualpath: DualPath agentic LLM inference -- cluster simulator, P/D planner, live\n"
      "prefill/decode engines that load cached KV by two paths (PE-side and DE-side storage\n"
      "reads), and benchmarks. See README.md and docs/ for a tour.\n"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "dualpath 0.1.0");
  int exit_code = 0;

  auto entries = registry();
  std::sort(entries.begin(), entries.end(),
            [](const auto& a, const auto& b) { return a.name < b.name; });
  std::map<std::string, CLI::App*> parents;
  parents[""] = &app;
  for (const auto& e : entries) {
    if (e.parent.empty() || parents.count(e.parent)) continue;
    CLI::App* group = app.add_subcommand(
        e.parent, e.parent == "bench" ? "Benchmarks of the real parts, measured side by side "
                                        "with a reference tool in the same run"
                                      : e.parent);
    group->require_subcommand(1);
    parents[e.parent] = group;
  }
  for (const auto& e : entries) e.setup(*parents[e.parent], exit_code);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  return exit_code;
}
