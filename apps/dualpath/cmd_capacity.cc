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
  int seeds = 1;
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
  if (!(a.seeds >= 1 && a.seeds <= 1000))
    return usage_error(fmt::format(
        "--seeds {}: give how many workload draws to search (seeds --seed .. --seed + N - 1), "
        "between 1 and 1000; 7 gives the median to about 1 %",
        a.seeds));
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
              std::string(sim::mode_name(cfg->scheduler.mode)).c_str(), cfg->dataset.c_str(), stat.c_str(),
              cfg->online.slo_ttft_s, cfg->online.slo_tpot_s * 1e3);
  // One seed: the search as before. Several: each seed's search in turn (its probes, then its
  // capacity), then their median.
  const bool many = a.seeds > 1;
  std::vector<sim::SeedCapacity> found;
  for (int k = 0; k < a.seeds; ++k) {
    sim::SimConfig c = *cfg;
    c.seed = cfg->seed + static_cast<uint64_t>(k);
    if (many) std::printf("seed %llu (%d of %d):\n", static_cast<unsigned long long>(c.seed), k + 1, a.seeds);
    n = 0;
    auto r = sim::find_capacity(c, opt);
    if (!r.is_ok()) {
      return usage_error(many ? fmt::format("seed {}: {}", c.seed, r.status().message())
                              : std::string(r.status().message()));
    }
    const std::string at = many ? fmt::format(" at seed {}", c.seed) : std::string();
    std::printf(
        "capacity%s: %.4f agents/s (%.4f missed; bisected to %.1f %%; %zu probes in %.1f s wall; "
        "the cost model's throughput bound is %.4f)\n",
        at.c_str(), r->aps_capacity, r->aps_first_missed, 100 * a.tolerance, r->probes.size(),
        r->wall_s, r->estimate_aps);
    std::fflush(stdout);
    found.push_back({c.seed, std::move(r).value()});
  }
  const sim::CapacityOverSeeds res = sim::summarize_seeds(std::move(found));
  const sim::SeedCapacity& shown = res.seeds[res.median_seed];
  if (many) {
    std::printf(
        "capacity: median %.4f agents/s over %d seeds (%llu..%llu), min %.4f, max %.4f (%.1f %% "
        "spread); %.1f s wall\n",
        res.median_aps, a.seeds, static_cast<unsigned long long>(res.seeds.front().seed),
        static_cast<unsigned long long>(res.seeds.back().seed), res.min_aps, res.max_aps,
        100 * (res.max_aps / res.min_aps - 1), res.wall_s);
  }
  if (!a.quiet) {
    if (many)
      std::printf("at capacity (seed %llu, the middle one):\n",
                  static_cast<unsigned long long>(shown.seed));
    else
      std::printf("at capacity:\n");
    std::fputs(sim::result_table(shown.result.at_capacity).c_str(), stdout);
  }
  if (a.json_path) {
    nlohmann::json probes = nlohmann::json::array();
    nlohmann::json per_seed = nlohmann::json::array();
    for (const sim::SeedCapacity& sc : res.seeds) {
      for (const auto& p : sc.result.probes) {
        auto j = probe_json(p);
        j["seed"] = sc.seed;
        probes.push_back(std::move(j));
      }
      per_seed.push_back({{"seed", sc.seed},
                          {"aps_capacity", sc.result.aps_capacity},
                          {"aps_first_missed", sc.result.aps_first_missed},
                          {"estimate_aps", sc.result.estimate_aps},
                          {"probes", sc.result.probes.size()},
                          {"wall_s", sc.result.wall_s}});
    }
    nlohmann::json j = {
        {"model", cfg->model.name},
        {"dataset", cfg->dataset},
        {"pd", cfg->pd_label()},
        {"mode", std::string(sim::mode_name(cfg->scheduler.mode))},
        {"seed", cfg->seed},
        {"seeds", a.seeds},
        {"slo",
         {{"ttft_s", cfg->online.slo_ttft_s},
          {"tpot_s", cfg->online.slo_tpot_s},
          {"statistic", stat}}},
        {"tolerance", a.tolerance},
        // With several seeds: their median; aps_first_missed and estimate_aps are the middle
        // seed's, whose run at capacity is at_capacity.
        {"aps_capacity", many ? res.median_aps : shown.result.aps_capacity},
        {"aps_capacity_min", res.min_aps},
        {"aps_capacity_max", res.max_aps},
        {"aps_first_missed", shown.result.aps_first_missed},
        {"estimate_aps", shown.result.estimate_aps},
        {"per_seed", per_seed},
        {"probes", probes},
        {"at_capacity", sim::result_to_json(shown.result.at_capacity)},
        {"at_capacity_seed", shown.seed},
        {"wall_s", res.wall_s},
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
      "  dualpath capacity --model ds660b --mode basic --seeds 7   # the median of seeds 1..7\n"
      "  dualpath capacity --config configs/emu-1p2d.toml --mode full");
  args->sim.add_to(cmd, /*offline=*/false, /*with_aps=*/false);
  cmd->add_option("--tolerance", args->tolerance,
                  "stop bisecting when the bracket is this narrow (relative)")
      ->capture_default_str();
  cmd->add_option("--seeds", args->seeds,
                  "search this many workload draws (seeds --seed, --seed + 1, ...) and report "
                  "their median: one seed's capacity moves by a few percent with the draw")
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
