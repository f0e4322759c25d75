// `dualpath bench control`: the control plane alone at cluster scale (issue 33): a real
// `dualpath serve --external-nodes` over fake nodes, driven through the HTTP API. The logic lives
// in bench/control_bench.{h,cc} and bench/fake_nodes.{h,cc}; docs/bench.md explains it.

#include <fmt/format.h>

#include <cstdio>
#include <fstream>
#include <memory>
#include <string>

#include "apps/dualpath/command.h"
#include "bench/control_bench.h"
#include "sim/sim_config.h"

namespace dualpath::app {
namespace {

void setup(CLI::App& parent, int& exit_code) {
  auto opt = std::make_shared<bench::ControlBenchOptions>();
  auto nodes = std::make_shared<std::string>("44P88D");
  auto json_path = std::make_shared<std::string>();
  auto quiet = std::make_shared<bool>(false);
  auto no_split = std::make_shared<bool>(false);
  CLI::App* cmd = parent.add_subcommand(
      "control",
      "The control plane alone at cluster scale: a real `dualpath serve --external-nodes`\n"
      "(the scheduler service and the HTTP API) over fake nodes that speak the real RPC and\n"
      "protocol from this process and do no work (no GPU, UCX or store behind them), driven\n"
      "through the real HTTP API at a fixed turn rate. Prints turns/s sustained, placement\n"
      "overhead (arrival at the API to the prefill call), token-delivery overhead (a token\n"
      "leaving its node to the client reading it), and the scheduler process's CPU per turn,\n"
      "per token and per load report (utime + stime from /proc, the same on any machine).\n"
      "Phases: idle (reports only), main (--tokens per decode), one token per decode (the\n"
      "difference splits CPU per turn from CPU per token).\n"
      "Examples:\n"
      "  dualpath bench control --nodes 44P88D --rate 1400 --tokens 176 --json control.json\n"
      "  dualpath bench control --nodes 2P4D --rate 50 --duration 5");
  cmd->add_option("--nodes", *nodes, "Fake cluster, XPYD (default 44P88D, up to 48P96D)");
  cmd->add_option("--rate", opt->rate, "Turns per second offered, open loop (default 100)");
  cmd->add_option("--tokens", opt->tokens, "Tokens each decode streams (default 176)");
  cmd->add_option("--token-rate", opt->token_rate,
                  "Tokens per second per decode (default 0: as fast as they go)");
  cmd->add_option("--duration", opt->duration_s, "Seconds of each loaded phase (default 10)");
  cmd->add_option("--idle", opt->idle_s, "Seconds of the idle phase (default 3)");
  cmd->add_option("--prompt-bytes", opt->prompt_bytes, "Prompt length in byte tokens (default 1024)");
  cmd->add_option("--clients", opt->clients,
                  "HTTP connections of the load generator (default 64); a turn that finds none "
                  "free starts late and is counted");
  cmd->add_option("--report-interval-ms", opt->report_interval_ms,
                  "The nodes' load report interval (default 100)");
  cmd->add_flag("--no-one-token-phase", *no_split,
                "Skip the one-token phase (CPU per turn is then the main phase's, tokens included)");
  cmd->add_option("--json", *json_path,
                  "Write turns_per_s, errors, placement_ms and token_delivery_ms (p50, p99), "
                  "scheduler_cpu_us_per_turn, scheduler_cpu_us_per_token, api_cpu_us_per_turn, "
                  "api_cpu_us_per_token and each phase here");
  cmd->add_flag("--quiet", *quiet, "No progress lines on stderr");
  cmd->callback([=, &exit_code] {
    auto pd = sim::parse_pd(*nodes);
    if (!pd.is_ok()) {
      exit_code = usage_error(fmt::format("--nodes '{}': {}", *nodes, pd.status().message()));
      return;
    }
    if (pd->first < 1 || pd->second < 1 || pd->first > 48 || pd->second > 96) {
      exit_code = usage_error(fmt::format(
          "--nodes '{}': 1 to 48 prefill and 1 to 96 decode nodes (the paper's largest is 48P96D)",
          *nodes));
      return;
    }
    if (opt->rate <= 0 || opt->tokens < 1 || opt->duration_s <= 0 || opt->clients < 1 ||
        opt->token_rate < 0 || opt->prompt_bytes < 16 || opt->report_interval_ms < 1) {
      exit_code = usage_error(
          "--rate, --duration and --clients must be above 0, --tokens at least 1, --token-rate "
          "0 or more, --prompt-bytes at least 16, --report-interval-ms at least 1");
      return;
    }
    opt->prefill_nodes = pd->first;
    opt->decode_nodes = pd->second;
    opt->per_token_phase = !*no_split;
    opt->dualpath_program = "/proc/self/exe";
    auto progress = [q = *quiet](const std::string& line) {
      if (!q) std::fprintf(stderr, "  %s\n", line.c_str());
    };
    auto r = bench::run_control_bench(*opt, progress);
    if (!r.is_ok()) {
      std::fprintf(stderr, "dualpath: bench control: %s\n", r.status().to_string().c_str());
      exit_code = 1;
      return;
    }
    std::fputs(bench::format_control_bench(*r).c_str(), stdout);
    if (!json_path->empty()) {
      std::ofstream out(*json_path);
      out << r->to_json().dump(2) << "\n";
      if (!out) {
        std::fprintf(stderr, "dualpath: bench control: cannot write '%s'; check the path\n",
                     json_path->c_str());
        exit_code = 1;
        return;
      }
    }
    exit_code = 0;
  });
}

DP_REGISTER_COMMAND("bench", "control", setup);

}  // namespace
}  // namespace dualpath::app
