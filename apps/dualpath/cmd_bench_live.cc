// `dualpath bench live`: the live system (real node processes, block files, UCX) replaying the
// workload of a cluster file, next to the simulator's prediction for the same file and mode
// (issue 5). The logic lives in src/engine/live_bench.{h,cc}; docs/engine.md explains it.

#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "apps/dualpath/cli_util.h"
#include "apps/dualpath/command.h"
#include "common/config.h"
#include "engine/engine_config.h"
#include "engine/live_bench.h"
#include "sim/experiment.h"

namespace dualpath::app {
namespace {

using engine::Json;

struct LiveArgs {
  std::string config_path;
  std::string modes = "full";
  std::string json_path;
  std::optional<int> agents;
  std::optional<int64_t> seed;
  bool no_sim = false;
  bool quiet = false;
};

struct BenchConfigs {
  sim::SimConfig sim;
  engine::EngineConfig live;
};

// One file, both readers: the simulator's sections and the live system's.
Result<BenchConfigs> load_configs(const LiveArgs& a) {
  if (a.config_path.empty()) {
    return Status::invalid_argument(
        "--config is required: the cluster file both the live system and the simulator run, "
        "e.g. --config configs/emu-1p2d.toml");
  }
  DP_ASSIGN_OR_RETURN(Config file, Config::from_file(a.config_path));
  BenchConfigs c;
  // apply_config starts over from the defaults of the file's model.preset.
  DP_ASSIGN_OR_RETURN(c.sim, sim::default_sim_config("ds660b"));
  DP_RETURN_IF_ERROR(sim::apply_config(file, c.sim));
  DP_RETURN_IF_ERROR(engine::apply_engine_config(file, c.live));
  DP_RETURN_IF_ERROR(file.finish());
  if (a.agents) c.sim.agents = *a.agents;  // range-checked by validate() below
  if (a.seed) {
    if (*a.seed < 0) {
      return Status::invalid_argument(
          fmt::format("--seed {}: use a non-negative integer (default workload.seed)", *a.seed));
    }
    c.sim.seed = static_cast<uint64_t>(*a.seed);
  }
  if (c.sim.think_time) {
    return Status::invalid_argument(
        "workload.think_time = true: the live benchmark replays without think time; set it to "
        "false");
  }
  if (c.sim.online.enabled() || sim::is_timestamped_trace(c.sim.dataset)) {
    // Until the scheduler service drives online arrivals live (issue 17), this benchmark is
    // offline: say so rather than replaying something else than the file asks.
    return Status::invalid_argument(
        "online.aps or a mooncake: dataset: the live benchmark replays offline agents (all at "
        "t = 0) for now; remove [online] aps and use 32k, 48k, 64k or weka:PATH, and use "
        "dualpath sim --config FILE --aps X for the simulated online run");
  }
  c.sim.fit_ep_groups();
  DP_RETURN_IF_ERROR(c.sim.validate());
  DP_RETURN_IF_ERROR(c.live.validate());
  return c;
}

// The live read path of each benchmark mode (the simulator's mode of the same name).
Result<sched::PathRequest> live_path(const std::string& mode) {
  if (mode == "basic") return sched::PathRequest(sched::ReadPath::kPe);
  if (mode == "full") return sched::PathRequest();
  if (mode == "oracle") return sched::PathRequest(sched::ReadPath::kOracle);
  return Status::invalid_argument(fmt::format(
      "--mode '{}': the live benchmark runs basic (PE read path only), full (both read paths, "
      "the scheduler's choice) or oracle (no KV I/O); list several as basic,full,oracle",
      mode));
}

struct ModeRun {
  std::string mode;
  engine::LiveBenchResult live;
  std::optional<sim::SimResult> sim;
};

// A fresh store per run: a directory inside each configured data path (none configured: the
// cluster makes, and removes, a temporary one itself).
Result<std::vector<std::string>> fresh_data_paths(const engine::EngineConfig& cfg,
                                                  const std::string& mode) {
  std::vector<std::string> out;
  for (const std::string& base : cfg.data_paths) {
    std::string dir = fmt::format("{}/dualpath-bench-live-{}-{}", base, ::getpid(), mode);
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
    if (!std::filesystem::create_directories(dir, ec)) {
      return Status::io_error(fmt::format("cannot create the store directory {}: {}", dir,
                                          ec.message()));
    }
    out.push_back(dir);
  }
  return out;
}

Result<ModeRun> run_mode(const BenchConfigs& cfgs,
                         const std::string& mode,
                         const std::vector<std::vector<workload::TurnShape>>& agents,
                         const LiveArgs& a) {
  ModeRun run;
  run.mode = mode;
  DP_ASSIGN_OR_RETURN(sched::PathRequest path, live_path(mode));
  if (!a.no_sim) {
    sim::SimConfig sc = cfgs.sim;
    DP_ASSIGN_OR_RETURN(sc.mode, sim::parse_mode(mode));
    DP_ASSIGN_OR_RETURN(run.sim, sim::run_experiment(sc, {}));
  }
  engine::ClusterOptions options;
  options.config = cfgs.live;
  DP_ASSIGN_OR_RETURN(options.config.data_paths, fresh_data_paths(cfgs.live, mode));
  struct Cleanup {
    std::vector<std::string> dirs;
    ~Cleanup() {
      for (const auto& d : dirs) {
        std::error_code ec;
        std::filesystem::remove_all(d, ec);
      }
    }
  } cleanup{options.config.data_paths};
  if (!a.quiet) {
    std::fprintf(stderr,
                 "dualpath bench live: %s: 1 prefill + %d decode node processes, %zu agents, "
                 "storage NIC %.3f Gb/s per node (real time)\n",
                 mode.c_str(), cfgs.live.decode_nodes, agents.size(),
                 cfgs.live.emulated_snic_gbps());
  }
  DP_ASSIGN_OR_RETURN(auto cluster, engine::LocalCluster::start(options));
  engine::LiveBenchOptions lo;
  lo.path = path;
  lo.seed = cfgs.sim.seed;
  double last_report = 0;
  if (!a.quiet) {
    lo.progress = [&](int64_t done, int64_t total, double wall_s) {
      if (wall_s - last_report < 5 && done != total) return;
      last_report = wall_s;
      std::fprintf(stderr, "dualpath bench live: %s: %lld/%lld turns, %.0f s real\n", mode.c_str(),
                   static_cast<long long>(done), static_cast<long long>(total), wall_s);
    };
  }
  DP_ASSIGN_OR_RETURN(run.live, engine::run_live_bench(*cluster, agents, lo));
  return run;
}

Json run_json(const ModeRun& r) {
  Json j = r.live.to_json();
  j["mode"] = r.mode;
  if (r.sim) {
    j["sim"] = sim::result_to_json(*r.sim, false);
    j["sim_jct_s"] = r.sim->jct_s;
    j["live_over_sim_jct"] = r.sim->jct_s > 0 ? r.live.jct_s / r.sim->jct_s : 0.0;
  }
  return j;
}

int run(const LiveArgs& a) {
  std::vector<std::string> modes;
  {
    std::stringstream ss(a.modes);
    for (std::string m; std::getline(ss, m, ',');) {
      if (auto p = live_path(m); !p.is_ok()) return usage_error(p.status().message());
      modes.push_back(m);
    }
  }
  if (modes.empty()) return usage_error("--mode: name at least one of basic, full, oracle");
  if (Status s = check_output_file_if_given("--json", a.json_path); !s.is_ok()) {
    return usage_error(s.message());
  }
  auto cfgs = load_configs(a);
  if (!cfgs.is_ok()) return usage_error(cfgs.status().message());
  auto plans = sim::build_agents(cfgs->sim);
  if (!plans.is_ok()) return usage_error(plans.status().message());
  std::vector<std::vector<workload::TurnShape>> agents;
  for (const auto& p : *plans) agents.push_back(p.turns);

  std::vector<ModeRun> runs;
  for (const std::string& mode : modes) {
    auto r = run_mode(*cfgs, mode, agents, a);
    if (!r.is_ok()) {
      std::fprintf(stderr, "dualpath bench live: %s: %s\n", mode.c_str(),
                   r.status().to_string().c_str());
      return 1;
    }
    std::printf("%s (%s, %s, %dP%dD, %zu agents)\n", mode.c_str(), a.config_path.c_str(),
                cfgs->live.model.c_str(), cfgs->live.prefill_nodes, cfgs->live.decode_nodes,
                agents.size());
    std::fputs(r->live.table().c_str(), stdout);
    if (r->sim) {
      std::printf("  simulator                  JCT %.1f s (live/sim %.3f), TTFT p50 %.3f s\n",
                  r->sim->jct_s, r->live.jct_s / r->sim->jct_s, r->sim->ttft_p50_s);
    }
    runs.push_back(std::move(r).value());
  }
  // Every mode against the first (normally basic): measured and predicted.
  Json ratios = Json::array();
  if (runs.size() > 1) {
    std::printf("\n%-8s %12s %12s %12s %12s %10s\n", "mode", "live JCT s", "sim JCT s",
                "live ratio", "sim ratio", "sim/live");
    for (const ModeRun& r : runs) {
      const double live_ratio = r.live.jct_s / runs[0].live.jct_s;
      const double sim_ratio = r.sim && runs[0].sim ? r.sim->jct_s / runs[0].sim->jct_s : 0.0;
      std::printf("%-8s %12.1f %12.1f %12.3f %12.3f %10.3f\n", r.mode.c_str(), r.live.jct_s,
                  r.sim ? r.sim->jct_s : 0.0, live_ratio, sim_ratio,
                  live_ratio > 0 ? sim_ratio / live_ratio : 0.0);
      ratios.push_back(Json{{"mode", r.mode},
                            {"over", runs[0].mode},
                            {"live_jct_ratio", live_ratio},
                            {"sim_jct_ratio", sim_ratio},
                            {"sim_over_live", live_ratio > 0 ? sim_ratio / live_ratio : 0.0}});
    }
  }
  if (!a.json_path.empty()) {
    Json out;
    if (runs.size() == 1) {
      out = run_json(runs[0]);
    } else {
      out["runs"] = Json::array();
      for (const ModeRun& r : runs) out["runs"].push_back(run_json(r));
      out["ratios"] = ratios;
    }
    out["config"] = a.config_path;
    Status s = write_text_file(a.json_path, out.dump(2) + "\n");
    if (!s.is_ok()) return usage_error(s.message());
  }
  return 0;
}

void setup(CLI::App& parent, int& exit_code) {
  auto args = std::make_shared<LiveArgs>();
  CLI::App* cmd = parent.add_subcommand(
      "live",
      "The live system on a cluster file: node processes, block files, UCX, the modeled (or\n"
      "CPU) compute, replaying the file's [workload] exactly as `dualpath sim` does, and the\n"
      "simulator's prediction for the same file and mode next to it. Times are emulated\n"
      "seconds (real / live.time_dilation). Each mode starts a fresh cluster and store.\n"
      "Modes: basic = PE read path only; full = both read paths, the scheduler's choice per\n"
      "turn; oracle = no KV I/O at all (compute and decode only).\n"
      "Examples:\n"
      "  dualpath bench live --config configs/emu-1p2d.toml --mode full --json out.json\n"
      "  dualpath bench live --config configs/emu-1p2d.toml --mode basic,full,oracle");
  cmd->add_option("--config", args->config_path, "TOML cluster file (shared with dualpath sim)")
      ->required();
  cmd->add_option("--mode", args->modes,
                  "basic | full | oracle, or a comma list run one after the other (default full)");
  cmd->add_option("--json", args->json_path,
                  "write jct_s, turns, storage_read_bytes, per-hop bytes, TTFT/TPOT and the "
                  "simulator's figures here (one mode: top level; several: `runs` and `ratios`)");
  cmd->add_option("--agents", args->agents, "override workload.agents");
  cmd->add_option("--seed", args->seed, "override workload.seed");
  cmd->add_flag("--no-sim", args->no_sim, "skip the simulator's prediction");
  cmd->add_flag("--quiet", args->quiet, "no progress lines on stderr");
  cmd->callback([args, &exit_code] { exit_code = run(*args); });
}

DP_REGISTER_COMMAND("bench", "live", setup);

}  // namespace
}  // namespace dualpath::app
