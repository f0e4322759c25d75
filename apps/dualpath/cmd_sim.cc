// `dualpath sim`: simulate a P/D cluster replaying agent trajectories (docs/simulator.md).

#include <fmt/format.h>

#include <cstdio>
#include <optional>
#include <nlohmann/json.hpp>

#include "apps/dualpath/cli_util.h"
#include "apps/dualpath/command.h"
#include "apps/dualpath/sim_flags.h"
#include "sim/experiment.h"

namespace dualpath::app {
namespace {

struct SimArgs {
  SimFlags sim;
  std::optional<std::string> json_path;
  std::optional<std::string> timeseries_path;
  bool quiet = false;
};

int run(const SimArgs& a) {
  auto cfg = make_sim_config(a.sim);
  if (!cfg.is_ok()) return usage_error(cfg.status().message());
  // A typo in an output path is reported now, not after the run.
  for (const auto& [flag, path] : {std::pair{"--json", a.json_path},
                                   std::pair{"--timeseries", a.timeseries_path}}) {
    if (!path) continue;
    if (Status s = check_output_file(flag, *path); !s.is_ok()) return usage_error(s.message());
  }
  sim::SimOptions opt;
  if (!a.quiet && (cfg->online.enabled() || sim::is_timestamped_trace(cfg->dataset))) {
    opt.progress = [](double t, int64_t done, int64_t) {
      std::fprintf(stderr, "dualpath sim: t=%.0fs simulated, %lld turns done\n", t,
                   static_cast<long long>(done));
    };
  } else if (!a.quiet) {
    opt.progress = [](double t, int64_t done, int64_t total) {
      std::fprintf(stderr, "dualpath sim: t=%.0fs simulated, %lld/%lld turns (%.0f%%)\n", t,
                   static_cast<long long>(done), static_cast<long long>(total),
                   total > 0 ? 100.0 * static_cast<double>(done) / static_cast<double>(total) : 0);
    };
  }
  auto res = sim::run_experiment(*cfg, opt);
  if (!res.is_ok()) return usage_error(res.status().message());
  std::fputs(sim::result_table(*res).c_str(), stdout);
  if (a.json_path) {
    Status s = write_text_file(*a.json_path, sim::result_to_json(*res).dump(2) + "\n");
    if (!s.is_ok()) return usage_error(s.message());
  }
  if (a.timeseries_path) {
    Status s = write_text_file(*a.timeseries_path, sim::timeseries_csv(*res, cfg->prefill_nodes));
    if (!s.is_ok()) return usage_error(s.message());
  }
  return 0;
}

void setup(CLI::App& parent, int& exit_code) {
  auto args = std::make_shared<SimArgs>();
  CLI::App* cmd = parent.add_subcommand(
      "sim",
      "Simulate a prefill/decode cluster replaying agent trajectories.\n"
      "Every hop of both read paths runs on shared NICs, DRAM buffers and HBM; the scheduler and\n"
      "the cost model are the live system's. Prints a table; --json and --timeseries for more.\n"
      "Examples:\n"
      "  dualpath sim --model ds660b --dataset 64k --pd 2P4D --agents 1024 --mode full\n"
      "  dualpath sim --mode basic --append-scale 2 --json out.json\n"
      "  dualpath sim --dataset weka:../shared/traces/weka_claude_code/weka_traces_compact.jsonl\n"
      "  dualpath sim --config configs/emu-1p2d.toml --mode full\n"
      "Online (agents arriving at --aps per second, judged by the SLO; PAPER.md §9):\n"
      "  dualpath sim --model ds660b --dataset 64k --pd 2P4D --aps 0.4 --mode full --json out.json\n"
      "  dualpath sim --dataset mooncake:../shared/traces/mooncake_fast25/conversation_trace.jsonl\n"
      "  (dualpath capacity finds the largest --aps that meets the SLO)");
  args->sim.add_to(cmd, /*offline=*/true, /*with_aps=*/true);
  cmd->add_option("--json", args->json_path, "write the metrics as JSON to this file");
  cmd->add_option("--timeseries", args->timeseries_path,
                  "write per-node SNIC read Gb/s and running agents per 10 s to this CSV");
  cmd->add_flag("--quiet", args->quiet, "no progress lines on stderr");
  cmd->callback([args, &exit_code] { exit_code = run(*args); });
}

DP_REGISTER_COMMAND("", "sim", setup);

}  // namespace
}  // namespace dualpath::app
