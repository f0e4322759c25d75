// `dualpath capacity`: the largest arrival rate (agents per second) a simulated cluster serves
// within the SLO (PAPER.md §10.4, Fig. 11; docs/simulator.md).

#include <fmt/format.h>

#include <cstdio>
#include <nlohmann/json.hpp>
#include <optional>

#include "apps/dualpath/cli_util.h"
#include "apps/dualpath/command.h"
#include "apps/dualpath/sim_flags.h"
#include "sim/capacity.h"
#include "sim/experiment.h"

namespace dualpath::app {
namespace {

struct CapacityArgs {
  SimFlags sim;
  double tolerance = 0.02;
  std::optional<double> start_aps;
  std::optional<std::string> json_path;
  bool quiet = false;
};

nlohmann::json probe_json(const sim::CapacityProbe& p) {
  return {{"aps", p.aps},
          {"slo_met", p.slo_met},
          {"stop_reason", p.stop_reason},
          {"stopped_at_s", p.stopped_at_s},
          {"ttft_s", sim::latency_json(p.ttft)},
          {"tpot_s", sim::latency_json(p.tpot)},
          {"wall_s", p.wall_s}};
}

int run(const CapacityArgs& a) {
  auto cfg = make_sim_config(a.sim);
  if (!cfg.is_ok()) return usage_error(cfg.status().message());
  if (!(a.tolerance >= 0.001 && a.tolerance <= 0.5))
    return usage_error(fmt::format(
        "--tolerance {}: give the relative width to bisect the bracket down to, between 0.001 and "
        "0.5 (default 0.02 = 2 %)",
        a.tolerance));
  if (a.start_aps && !(*a.start_aps > 0))
    return usage_error(fmt::format(
        "--start-aps {}: the first probe's rate must be positive (default: half the cost model's "
        "throughput bound)",
        *a.start_aps));
  if (a.json_path) {
    if (Status s = check_output_file("--json", *a.json_path); !s.is_ok())
      return usage_error(s.message());
  }
  sim::CapacityOptions opt;
  opt.tolerance = a.tolerance;
  if (a.start_aps) opt.start_aps = *a.start_aps;
  const std::string stat = cfg->online.slo_statistic;
  int n = 0;
  opt.on_probe = [&](const sim::CapacityProbe& p) {
    std::printf(
        "  probe %2d  %8.4f APS  %-8s  %s TTFT %7.3f s  TPOT %6.1f ms  (%s at %.0f s, "
        "%.1f s wall)\n",
        ++n, p.aps, p.slo_met ? "met" : "missed", stat.c_str(), p.ttft.get(stat),
        p.tpot.get(stat) * 1e3, p.stop_reason.c_str(), p.stopped_at_s, p.wall_s);
    std::fflush(stdout);
  };
  std::printf("dualpath capacity: %s %s %s dataset=%s, SLO %s TTFT <= %.3g s and TPOT <= %.3g ms\n",
              cfg->model.name.c_str(), cfg->pd_label().c_str(),
              std::string(sim::mode_name(cfg->mode)).c_str(), cfg->dataset.c_str(), stat.c_str(),
              cfg->online.slo_ttft_s, cfg->online.slo_tpot_s * 1e3);
  auto res = sim::find_capacity(*cfg, opt);
  if (!res.is_ok()) return usage_error(res.status().message());
  std::printf(
      "capacity: %.4f agents/s (%.4f missed; bisected to %.1f %%; %zu probes in %.1f s wall; "
      "the cost model's throughput bound is %.4f)\n",
      res->aps_capacity, res->aps_first_missed, 100 * a.tolerance, res->probes.size(), res->wall_s,
      res->estimate_aps);
  if (!a.quiet) {
    std::printf("at capacity:\n");
    std::fputs(sim::result_table(res->at_capacity).c_str(), stdout);
  }
  if (a.json_path) {
    nlohmann::json probes = nlohmann::json::array();
    for (const auto& p : res->probes) probes.push_back(probe_json(p));
    nlohmann::json j = {
        {"model", cfg->model.name},
        {"dataset", cfg->dataset},
        {"pd", cfg->pd_label()},
        {"mode", std::string(sim::mode_name(cfg->mode))},
        {"seed", cfg->seed},
        {"slo",
         {{"ttft_s", cfg->online.slo_ttft_s},
          {"tpot_s", cfg->online.slo_tpot_s},
          {"statistic", stat}}},
        {"tolerance", a.tolerance},
        {"aps_capacity", res->aps_capacity},
        {"aps_first_missed", res->aps_first_missed},
        {"estimate_aps", res->estimate_aps},
        {"probes", probes},
        {"at_capacity", sim::result_to_json(res->at_capacity)},
        {"wall_s", res->wall_s},
    };
    Status s = write_text_file(*a.json_path, j.dump(2) + "\n");
    if (!s.is_ok()) return usage_error(s.message());
  }
  return 0;
}

void setup(CLI::App& parent, int& exit_code) {
  auto args = std::make_shared<CapacityArgs>();
  CLI::App* cmd = parent.add_subcommand(
      "capacity",
      "Find the largest arrival rate (agents per second) the simulated cluster serves within the\n"
      "SLO (default: mean TTFT <= 4 s and TPOT <= 50 ms, PAPER.md §9). Each probe is one online\n"
      "run of `dualpath sim --aps X`; the search brackets the rate (x1.5 steps from half the cost\n"
      "model's throughput bound), then bisects to --tolerance, printing every probe.\n"
      "Examples:\n"
      "  dualpath capacity --model ds660b --dataset 64k --pd 2P4D --mode full --json cap.json\n"
      "  dualpath capacity --model ds27b --mode basic --slo-statistic p99\n"
      "  dualpath capacity --config configs/emu-1p2d.toml --mode full");
  args->sim.add_to(cmd, /*offline=*/false, /*with_aps=*/false);
  cmd->add_option("--tolerance", args->tolerance,
                  "stop bisecting when the bracket is this narrow (relative)")
      ->capture_default_str();
  cmd->add_option("--start-aps", args->start_aps,
                  "first probe (default: half the cost model's throughput bound)");
  cmd->add_option("--json", args->json_path,
                  "write aps_capacity, every probe and the run at capacity as JSON");
  cmd->add_flag("--quiet", args->quiet, "print the probes and the capacity only");
  cmd->callback([args, &exit_code] { exit_code = run(*args); });
}

DP_REGISTER_COMMAND("", "capacity", setup);

}  // namespace
}  // namespace dualpath::app
