// `dualpath sim`: simulate a P/D cluster replaying agent trajectories (docs/simulator.md).

#include <fmt/format.h>

#include <cstdio>
#include <optional>
#include <nlohmann/json.hpp>

#include "apps/dualpath/calibration_flags.h"
#include "apps/dualpath/cli_util.h"
#include "apps/dualpath/command.h"
#include "sim/experiment.h"
#include "workload/dataset_spec.h"

namespace dualpath::app {
namespace {

// Each flag is applied only when given (std::optional), so any given value is checked by
// SimConfig::validate() like the same key in a TOML file; none doubles as "unset".
struct SimArgs {
  std::optional<std::string> config_path;
  std::optional<std::string> model;
  std::optional<std::string> dataset;
  std::optional<std::string> pd;
  std::optional<std::string> mode;
  std::optional<int> agents;
  std::optional<int64_t> seed;
  std::optional<double> append_scale;
  std::optional<double> gen_scale;
  bool think_time = false;
  std::optional<std::string> json_path;
  std::optional<std::string> timeseries_path;
  bool quiet = false;
  CalibrationFlags calibration;
};

// Builds the config: model defaults, then the file, then the flags (flags win).
Result<sim::SimConfig> make_config(const SimArgs& a) {
  std::string model = a.model.value_or("ds660b");
  Config file;
  if (a.config_path) {
    DP_ASSIGN_OR_RETURN(file, Config::from_file(*a.config_path));
    if (!a.model) model = file.string("model.preset", model);
  }
  DP_ASSIGN_OR_RETURN(sim::SimConfig cfg, sim::default_sim_config(model));
  if (a.config_path) {
    DP_RETURN_IF_ERROR(sim::apply_config(file, cfg));
    sim::ignore_live_sections(file);
    DP_RETURN_IF_ERROR(file.finish());
  }
  if (a.dataset) cfg.dataset = *a.dataset;
  if (a.mode) {
    DP_ASSIGN_OR_RETURN(cfg.mode, sim::parse_mode(*a.mode));
  }
  if (a.pd) {
    DP_ASSIGN_OR_RETURN(auto pd, sim::parse_pd(*a.pd));
    cfg.prefill_nodes = pd.first;
    cfg.decode_nodes = pd.second;
  }
  if (a.agents) cfg.agents = *a.agents;
  if (a.seed) {
    if (*a.seed < 0)
      return Status::invalid_argument(
          fmt::format("--seed {}: use a non-negative integer (default 1)", *a.seed));
    cfg.seed = static_cast<uint64_t>(*a.seed);
  }
  if (a.append_scale) cfg.append_scale = *a.append_scale;
  if (a.gen_scale) cfg.gen_scale = *a.gen_scale;
  if (a.think_time) cfg.think_time = true;
  a.calibration.apply(cfg);
  cfg.fit_ep_groups();
  DP_RETURN_IF_ERROR(cfg.validate());
  return cfg;
}

int run(const SimArgs& a) {
  auto cfg = make_config(a);
  if (!cfg.is_ok()) return usage_error(cfg.status().message());
  // A typo in an output path is reported now, not after the run.
  for (const auto& [flag, path] : {std::pair{"--json", a.json_path},
                                   std::pair{"--timeseries", a.timeseries_path}}) {
    if (!path) continue;
    if (Status s = check_output_file(flag, *path); !s.is_ok()) return usage_error(s.message());
  }
  sim::SimOptions opt;
  if (!a.quiet) {
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
      "  dualpath sim --config configs/emu-1p2d.toml --mode full");
  cmd->add_option("--config", args->config_path,
                  "TOML cluster file shared with the live system (flags override it)");
  cmd->add_option("--model", args->model,
                  "model preset: ds660b (default), ds27b, qwen32b, tiny, small, ...");
  cmd->add_option("--dataset", args->dataset,
                  "workload: 32k, 48k, 64k (PAPER Table 2 generator) or weka:PATH (default 64k)");
  cmd->add_option("--pd", args->pd, "prefill/decode nodes, e.g. 2P4D (default: the model's)");
  cmd->add_option("--agents", args->agents, "agents started together at t=0 (default 1024)");
  cmd->add_option("--mode", args->mode,
                  "basic | layerwise | dualpath | full | oracle (default full = DualPath)");
  cmd->add_option("--seed", args->seed, "workload seed (default 1)");
  cmd->add_option("--append-scale", args->append_scale,
                  "multiply every turn's append length (Fig. 9), truncated at MaxLen");
  cmd->add_option("--gen-scale", args->gen_scale, "multiply every turn's generation length");
  cmd->add_flag("--think-time", args->think_time,
                "replay recorded think times (weka traces); the paper uses none");
  cmd->add_option("--json", args->json_path, "write the metrics as JSON to this file");
  cmd->add_option("--timeseries", args->timeseries_path,
                  "write per-node SNIC read Gb/s and running agents per 10 s to this CSV");
  args->calibration.add_to(cmd);
  cmd->add_flag("--quiet", args->quiet, "no progress lines on stderr");
  cmd->callback([args, &exit_code] { exit_code = run(*args); });
}

DP_REGISTER_COMMAND("", "sim", setup);

}  // namespace
}  // namespace dualpath::app
