// `dualpath bench live`: the live system (the scheduler service, real node processes, block files,
// UCX) replaying the workload of a cluster file, offline or online (--aps), next to the
// simulator's prediction for the same file, mode and APS. The logic lives in
// bench/live_bench.{h,cc}; docs/engine.md and docs/serve.md explain it.

#include <fmt/format.h>
#include <unistd.h>

#include <charconv>
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
#include "bench/bench_config.h"
#include "bench/fresh_store.h"
#include "bench/live_bench.h"
#include "common/config.h"
#include "engine/engine_config.h"
#include "serve/cluster.h"
#include "sim/experiment.h"

namespace dualpath::app {
namespace {

using Json = nlohmann::json;

struct LiveArgs {
  std::string config_path;
  std::string modes = "full";
  std::string json_path;
  std::optional<int> agents;
  std::optional<int64_t> seed;
  std::optional<double> aps;
  std::optional<double> duration_s;
  std::string kill;  // "decode:0@120" (role:index@emulated seconds)
  bool no_sim = false;
  bool quiet = false;
};

using bench::BenchConfigs;

// The file's simulator and live sections, then the flags over them.
Result<BenchConfigs> load_configs(const LiveArgs& a) {
  DP_ASSIGN_OR_RETURN(BenchConfigs c, bench::load_bench_configs(a.config_path));
  if (a.agents) c.sim.agents = *a.agents;  // range-checked by validate() below
  if (a.seed) {
    if (*a.seed < 0) {
      return Status::invalid_argument(
          fmt::format("--seed {}: use a non-negative integer (default workload.seed)", *a.seed));
    }
    c.sim.seed = static_cast<uint64_t>(*a.seed);
  }
  if (a.aps) {
    if (!(*a.aps > 0)) {
      return Status::invalid_argument(fmt::format(
          "--aps {}: the arrival rate must be a positive number of agents per (emulated) second",
          *a.aps));
    }
    if (a.agents) {
      return Status::invalid_argument(
          "--agents is for offline runs (all agents at t = 0); an online run takes --aps and "
          "--duration: drop --agents");
    }
    c.sim.online.aps = *a.aps;
  }
  if (a.duration_s) {
    if (!a.aps) return Status::invalid_argument("--duration goes with --aps (an online run)");
    c.sim.online.duration_s = *a.duration_s;
  }
  if (c.sim.think_time) {
    return Status::invalid_argument(
        "workload.think_time = true: the live benchmark replays without think time; set it to "
        "false");
  }
  if (sim::is_timestamped_trace(c.sim.dataset)) {
    return Status::invalid_argument(
        "a mooncake: dataset replays requests, not agent sessions: the live benchmark takes 32k, "
        "48k, 64k or weka:PATH; use dualpath sim for the trace");
  }
  c.sim.fit_ep_groups();
  DP_RETURN_IF_ERROR(c.sim.validate());
  DP_RETURN_IF_ERROR(c.live.engine.validate());
  return c;
}

Result<serve::ServeMode> live_mode(const std::string& mode) {
  auto m = serve::parse_serve_mode(mode);
  if (!m.is_ok()) {
    return Status::invalid_argument(fmt::format(
        "--mode '{}': the live benchmark runs basic (PE read path only), full (both read paths, "
        "the scheduler's choice) or oracle (no KV I/O); list several as basic,full,oracle",
        mode));
  }
  return m;
}

// "decode:0@120" -> (decode node 0, 120 emulated seconds).
Result<std::pair<engine::NodeId, double>> parse_kill(const std::string& text) {
  auto bad = [&] {
    return Status::invalid_argument(fmt::format(
        "--kill '{}': write ROLE:INDEX@SECONDS, e.g. decode:0@120 (SIGKILL decode node 0 120 "
        "emulated seconds into the run)",
        text));
  };
  const size_t colon = text.find(':'), at = text.find('@');
  if (colon == std::string::npos || at == std::string::npos || at < colon) return bad();
  auto role = engine::parse_role(text.substr(0, colon));
  if (!role.is_ok()) return bad();
  int index = -1;
  const auto [e1, c1] = std::from_chars(text.data() + colon + 1, text.data() + at, index);
  if (c1 != std::errc() || e1 != text.data() + at || index < 0) return bad();
  const std::string secs = text.substr(at + 1);
  char* end = nullptr;
  const double s = std::strtod(secs.c_str(), &end);
  if (secs.empty() || end != secs.c_str() + secs.size() || !(s >= 0)) return bad();
  return std::pair{engine::NodeId{*role, index}, s};
}

struct ModeRun {
  std::string mode;
  bench::LiveBenchResult live;
  std::optional<sim::SimResult> sim;
};

Result<ModeRun> run_mode(const BenchConfigs& cfgs,
                         const std::string& mode,
                         const std::vector<sim::AgentPlan>& agents,
                         const LiveArgs& a) {
  ModeRun run;
  run.mode = mode;
  DP_ASSIGN_OR_RETURN(serve::ServeMode live_m, live_mode(mode));
  if (!a.no_sim) {
    sim::SimConfig sc = cfgs.sim;
    DP_ASSIGN_OR_RETURN(sc.scheduler.mode, sim::parse_mode(mode));
    DP_ASSIGN_OR_RETURN(run.sim, sim::run_experiment(sc, {}));
  }
  serve::ClusterOptions options;
  options.config = cfgs.live;
  options.config.scheduler.mode = live_m;
  options.config.scheduler.port = 0;  // its own nodes only
  // The scheduler prices beta at the workload's typical turn, as the simulator beside it does.
  options.config.typical_turn = sim::typical_turn(agents);
  DP_ASSIGN_OR_RETURN(bench::FreshStore store,
                      bench::FreshStore::make(cfgs.live.engine.data_paths, "bench-live-" + mode));
  options.config.engine.data_paths = store.paths();
  if (!a.quiet) {
    std::fprintf(
        stderr,
        "dualpath bench live: %s: %d prefill + %d decode node processes, %zu agents%s, "
        "storage NIC %.3f Gb/s per node (real time)\n",
        mode.c_str(), cfgs.live.engine.prefill_nodes, cfgs.live.engine.decode_nodes, agents.size(),
        cfgs.sim.online.enabled()
            ? fmt::format(" arriving at {} APS (the run stops by the simulator's rule, after at "
                          "most {:.0f} emulated s)",
                          cfgs.sim.online.aps, cfgs.sim.online.duration_s)
                  .c_str()
            : "",
        cfgs.live.engine.emulated_snic_gbps());
  }
  DP_ASSIGN_OR_RETURN(auto cluster, serve::Cluster::start(options));
  bench::LiveBenchOptions lo;
  lo.seed = cfgs.sim.seed;
  lo.online = cfgs.sim.online.enabled();
  lo.slo = cfgs.sim.online;
  if (!a.kill.empty()) {
    DP_ASSIGN_OR_RETURN(auto kill, parse_kill(a.kill));
    lo.kill = kill.first;
    lo.kill_at_s = kill.second;
  }
  double last_report = 0;
  if (!a.quiet) {
    lo.progress = [&](int64_t done, int64_t total, double wall_s) {
      if (wall_s - last_report < 5 && done != total) return;
      last_report = wall_s;
      std::fprintf(stderr, "dualpath bench live: %s: %lld/%lld turns, %.0f s real\n", mode.c_str(),
                   static_cast<long long>(done), static_cast<long long>(total), wall_s);
    };
  }
  DP_ASSIGN_OR_RETURN(run.live, bench::run_live_bench(*cluster, agents, lo));
  return run;
}

Json run_json(const ModeRun& r) {
  Json j = r.live.to_json();
  j["mode"] = r.mode;
  if (r.sim) {
    j["sim"] = sim::result_to_json(*r.sim, false);
    j["sim_jct_s"] = r.sim->jct_s;
    j["live_over_sim_jct"] = r.sim->jct_s > 0 ? r.live.jct_s / r.sim->jct_s : 0.0;
    j["live_over_sim_ttft_p50"] = r.sim->ttft.p50 > 0 ? r.live.ttft.p50 / r.sim->ttft.p50 : 0.0;
  }
  return j;
}

int run(const LiveArgs& a) {
  std::vector<std::string> modes;
  {
    std::stringstream ss(a.modes);
    for (std::string m; std::getline(ss, m, ',');) {
      if (auto p = live_mode(m); !p.is_ok()) return usage_error(p.status().message());
      modes.push_back(m);
    }
  }
  if (modes.empty()) return usage_error("--mode: name at least one of basic, full, oracle");
  if (Status s = check_output_file_if_given("--json", a.json_path); !s.is_ok()) {
    return usage_error(s.message());
  }
  if (!a.kill.empty()) {
    if (auto k = parse_kill(a.kill); !k.is_ok()) return usage_error(k.status().message());
  }
  auto cfgs = load_configs(a);
  if (!cfgs.is_ok()) return usage_error(cfgs.status().message());
  if (!a.kill.empty()) {
    auto k = parse_kill(a.kill);
    const int count = k->first.role == engine::NodeRole::kPrefill ? cfgs->live.engine.prefill_nodes
                                                                  : cfgs->live.engine.decode_nodes;
    if (k->first.index >= count) {
      return usage_error(fmt::format("--kill '{}': the config has {} {} node{}", a.kill, count,
                                     engine::role_name(k->first.role), count == 1 ? "" : "s"));
    }
  }
  auto plans = sim::build_agents(cfgs->sim);
  if (!plans.is_ok()) return usage_error(plans.status().message());

  std::vector<ModeRun> runs;
  for (const std::string& mode : modes) {
    auto r = run_mode(*cfgs, mode, *plans, a);
    if (!r.is_ok()) {
      std::fprintf(stderr, "dualpath bench live: %s: %s\n", mode.c_str(),
                   r.status().to_string().c_str());
      return 1;
    }
    std::printf("%s (%s, %s, %dP%dD, %zu agents%s)\n", mode.c_str(), a.config_path.c_str(),
                cfgs->live.engine.model.c_str(), cfgs->live.engine.prefill_nodes,
                cfgs->live.engine.decode_nodes, plans->size(),
                cfgs->sim.online.enabled()
                    ? fmt::format(", {} APS for {:.0f} s", cfgs->sim.online.aps,
                                  cfgs->sim.online.duration_s)
                          .c_str()
                    : "");
    std::fputs(r->live.table().c_str(), stdout);
    if (r->sim) {
      std::printf(
          "  simulator                  JCT %.1f s (live/sim %.3f), TTFT p50 %.3f s "
          "(live/sim %.3f), SLO %s, SNIC max/avg %.3f\n",
          r->sim->jct_s, r->live.jct_s / r->sim->jct_s, r->sim->ttft.p50,
          r->sim->ttft.p50 > 0 ? r->live.ttft.p50 / r->sim->ttft.p50 : 0.0,
          r->sim->slo_met ? "met" : "NOT met", r->sim->snic_read_max_over_avg);
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
    if (cfgs->sim.online.enabled()) {
      out["aps"] = cfgs->sim.online.aps;
      out["duration_s"] = cfgs->sim.online.duration_s;
    }
    Status s = write_text_file(a.json_path, out.dump(2) + "\n");
    if (!s.is_ok()) return usage_error(s.message());
  }
  int failed = 0;
  for (const ModeRun& r : runs) failed += r.live.failed_turns > 0 ? 1 : 0;
  return failed == 0 ? 0 : 1;
}

void setup(CLI::App& parent, int& exit_code) {
  auto args = std::make_shared<LiveArgs>();
  CLI::App* cmd = parent.add_subcommand(
      "live",
      "The live system on a cluster file: the scheduler service and its node processes, block\n"
      "files, UCX, the modeled (or CPU) compute, replaying the file's [workload] exactly as\n"
      "`dualpath sim` does, and the simulator's prediction for the same file and mode next to\n"
      "it. Offline by default (every agent at once); --aps replays the simulator's Poisson\n"
      "agents live. Times are emulated seconds (real / live.time_dilation). Each mode starts a\n"
      "fresh cluster and store.\n"
      "Modes: basic = PE read path only; full = both read paths, the scheduler's choice per\n"
      "turn; oracle = no KV I/O at all (compute and decode only).\n"
      "Examples:\n"
      "  dualpath bench live --config configs/emu-1p2d.toml --mode full --json out.json\n"
      "  dualpath bench live --config configs/emu-2p4d.toml --mode basic,full,oracle\n"
      "  dualpath bench live --config configs/emu-2p4d.toml --mode full --aps 0.5 --duration 600\n"
      "  dualpath bench live --config configs/emu-2p4d.toml --mode full --kill decode:1@60");
  cmd->add_option("--config", args->config_path, "TOML cluster file (shared with dualpath sim)")
      ->required();
  cmd->add_option("--mode", args->modes,
                  "basic | full | oracle, or a comma list run one after the other (default full)");
  cmd->add_option("--json", args->json_path,
                  "write jct_s, turns, TTFT/TTST/TPOT, slo_met, failed and retried turns, the "
                  "storage NICs' balance and the simulator's figures here (one mode: top level; "
                  "several: `runs` and `ratios`)");
  cmd->add_option("--agents", args->agents, "override workload.agents (offline)");
  cmd->add_option("--seed", args->seed, "override workload.seed");
  cmd->add_option("--aps", args->aps,
                  "online: agents arriving per emulated second (the simulator's Poisson agents)");
  cmd->add_option("--duration", args->duration_s,
                  "online: no turn starts after this many emulated seconds (default "
                  "online.duration_s); the simulator's stop rule may end the run sooner (the TTFT "
                  "over the last online.window_s past the SLO, or a steady state)");
  cmd->add_option("--kill", args->kill,
                  "fault: SIGKILL one node mid-run, ROLE:INDEX@SECONDS (emulated), e.g. "
                  "decode:0@120; its turns are retried or migrated");
  cmd->add_flag("--no-sim", args->no_sim, "skip the simulator's prediction");
  cmd->add_flag("--quiet", args->quiet, "no progress lines on stderr");
  cmd->callback([args, &exit_code] { exit_code = run(*args); });
}

DP_REGISTER_COMMAND("bench", "live", setup);

}  // namespace
}  // namespace dualpath::app
