// `dualpath bench sim`: simulated turns per wall second, for a few cluster sizes.

#include <fmt/format.h>

#include <cstdio>
#include <nlohmann/json.hpp>
#include <vector>

#include "apps/dualpath/cli_util.h"
#include "apps/dualpath/command.h"
#include "common/percentiles.h"
#include "sim/experiment.h"

namespace dualpath::app {
namespace {

struct BenchSimArgs {
  int repeats = 3;
  bool large = false;
  std::string json_path;
};

int run(const BenchSimArgs& a) {
  struct Case { const char* pd; int p, d, agents; };
  std::vector<Case> cases = {{"2P4D", 2, 4, 1024}, {"8P16D", 8, 16, 8192}};
  if (a.large) cases.push_back({"48P96D", 48, 96, 49152});
  std::printf("%-8s %8s %10s %8s %12s %14s %12s\n", "pd", "agents", "turns", "repeats",
              "median s", "turns/wall s", "events/s");
  nlohmann::json out = nlohmann::json::array();
  for (const auto& c : cases) {
    sim::SimConfig cfg = *sim::default_sim_config("ds660b");
    cfg.prefill_nodes = c.p;
    cfg.decode_nodes = c.d;
    cfg.agents = c.agents;
    auto agents = sim::build_agents(cfg);
    if (!agents.is_ok()) return usage_error(agents.status().message());
    std::vector<double> walls;
    sim::SimResult last;
    for (int i = 0; i < std::max(1, a.repeats); ++i) {
      auto r = sim::simulate(cfg, *agents);
      if (!r.is_ok()) return usage_error(r.status().message());
      walls.push_back(r->wall_s);
      last = *r;
    }
    double med = median(walls);
    double tps = static_cast<double>(last.turns) / med;
    std::printf("%-8s %8d %10lld %8zu %12.2f %14.0f %12.0f\n", c.pd, c.agents,
                static_cast<long long>(last.turns), walls.size(), med, tps,
                static_cast<double>(last.sim_events) / med);
    out.push_back({{"pd", c.pd}, {"agents", c.agents}, {"turns", last.turns},
                   {"median_wall_s", med}, {"turns_per_wall_s", tps},
                   {"events", last.sim_events}, {"repeats", walls.size()}});
  }
  if (!a.json_path.empty()) {
    Status s = write_text_file(a.json_path, nlohmann::json{{"cases", out}}.dump(2) + "\n");
    if (!s.is_ok()) return usage_error(s.message());
  }
  return 0;
}

void setup(CLI::App& parent, int& exit_code) {
  auto args = std::make_shared<BenchSimArgs>();
  CLI::App* cmd = parent.add_subcommand(
      "sim", "Simulator speed: simulated turns per wall second (DS 660B, 64K, DualPath), median "
             "of repeats");
  cmd->add_option("--repeats", args->repeats, "repeats per size")->capture_default_str();
  cmd->add_flag("--large", args->large, "also 48P96D with 49,152 agents (~25 s a repeat)");
  cmd->add_option("--json", args->json_path, "write the cases as JSON");
  cmd->callback([args, &exit_code] { exit_code = run(*args); });
}

DP_REGISTER_COMMAND("bench", "sim", setup);

}  // namespace
}  // namespace dualpath::app
