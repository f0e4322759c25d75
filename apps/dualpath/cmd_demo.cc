// `dualpath demo`: the live system end to end on this machine: the scheduler service and its
// prefill and decode node processes, real block files, UCX over shared memory, the tiny CPU
// transformer, multi-turn agent sessions by the PE, DE, split or auto read path, or recomputed
// (bench/demo.h, docs/engine.md, docs/serve.md).

#include <fmt/format.h>

#include <cstdio>
#include <filesystem>
#include <optional>

#include "apps/dualpath/cli_util.h"
#include "apps/dualpath/command.h"
#include "bench/demo.h"
#include "engine/engine_config.h"
#include "serve/cluster.h"

namespace dualpath::app {
namespace {

struct DemoArgs {
  std::string config_path;
  std::string model;
  int sessions = 4;
  int turns = 24;
  std::string path = "auto";
  int64_t seed = 1;
  std::string json_path;
  std::string data_dir;
  std::optional<int> prefill_nodes;  // default: the config's (1)
  std::optional<int> decode_nodes;   // default: the config's, or 2 without one
  std::optional<int> engines;
  int64_t first_prompt_tokens = 512;
  std::optional<double> snic_gbps;
  bool sequential = false;
  bool quiet = false;
};

int run(const DemoArgs& a) {
  auto serve_cfg = serve::load_serve_config(a.config_path);
  if (!serve_cfg.is_ok()) return usage_error(serve_cfg.status().message());
  serve_cfg->scheduler.port = 0;  // the demo's own nodes only: any free port
  engine::EngineConfig* cfg = &serve_cfg->engine;
  if (!a.model.empty()) cfg->model = a.model;
  if (!a.data_dir.empty()) {
    // Made when missing, as `serve` makes its store's directory.
    std::error_code ec;
    std::filesystem::create_directories(a.data_dir, ec);
    if (ec) {
      return usage_error(fmt::format("--data-dir {}: cannot create it ({}); give a writable "
                                     "directory",
                                     a.data_dir, ec.message()));
    }
    cfg->data_paths = {a.data_dir};
  }
  if (a.snic_gbps) {
    if (!(*a.snic_gbps >= 0 && *a.snic_gbps <= 1e6)) {
      return usage_error(fmt::format(
          "--snic-gbps {}: give the emulated storage NIC in Gb/s, 0 = unlimited", *a.snic_gbps));
    }
    cfg->snic_gbps = *a.snic_gbps;
    cfg->snic_from_hardware = false;
  }
  if (a.seed < 0) return usage_error(fmt::format("--seed {}: use a non-negative integer", a.seed));
  if (a.engines) cfg->engines_per_node = *a.engines;  // range-checked by validate() below
  if (a.prefill_nodes) cfg->prefill_nodes = *a.prefill_nodes;
  if (a.decode_nodes) cfg->decode_nodes = *a.decode_nodes;
  if (auto s = cfg->validate(); !s.is_ok()) {
    return usage_error(a.model.empty() ? s.message() : "--model: " + s.message());
  }
  auto path = sched::parse_path_request(a.path);
  if (!path.is_ok()) return usage_error(path.status().message());
  if (a.sessions < 1 || a.turns < 1) return usage_error("--sessions and --turns must be >= 1");
  if (Status s = check_output_file_if_given("--json", a.json_path); !s.is_ok()) {
    return usage_error(s.message());
  }

  serve::ClusterOptions options;
  options.config = *serve_cfg;
  if (!a.quiet) {
    std::fprintf(stderr,
                 "dualpath demo: starting the scheduler, %d prefill + %d decode node processes "
                 "(%s)\n",
                 cfg->prefill_nodes, cfg->decode_nodes, cfg->model.c_str());
  }
  auto cluster = serve::Cluster::start(options);
  if (!cluster.is_ok()) return usage_error(cluster.status().to_string());
  bench::DemoOptions demo;
  demo.sessions = a.sessions;
  demo.turns = a.turns;
  demo.seed = static_cast<uint64_t>(a.seed);
  demo.path = *path;
  demo.first_prompt_tokens = a.first_prompt_tokens;
  demo.concurrent = !a.sequential;
  auto progress = [&](const bench::DemoTurn& t) {
    if (a.quiet) return;
    std::fprintf(stderr,
                 "dualpath demo: session %d turn %d: %lld prompt tokens, %lld hit, %s path, "
                 "TTFT %.1f ms, TPOT %.2f ms\n",
                 t.session, t.turn, static_cast<long long>(t.result.prompt_tokens),
                 static_cast<long long>(t.result.hit_tokens),
                 std::string(sched::read_path_name(t.result.path)).c_str(), t.result.ttft_s * 1e3,
                 t.result.tpot_s * 1e3);
  };
  auto report = bench::run_demo(**cluster, demo, progress);
  if (!report.is_ok()) {
    std::fprintf(stderr, "dualpath demo: %s\n", report.status().to_string().c_str());
    return 1;
  }
  std::fputs(report->table().c_str(), stdout);
  if (!a.json_path.empty()) {
    nlohmann::json j = report->to_json();
    j["model"] = cfg->model;
    j["path"] = a.path;
    j["seed"] = a.seed;
    j["prefill_nodes"] = cfg->prefill_nodes;
    j["decode_nodes"] = cfg->decode_nodes;
    j["block_tokens"] = cfg->block_tokens;
    Status s = write_text_file(a.json_path, j.dump(2) + "\n");
    if (!s.is_ok()) return usage_error(s.message());
  }
  return 0;
}

void setup(CLI::App& parent, int& exit_code) {
  auto args = std::make_shared<DemoArgs>();
  CLI::App* cmd = parent.add_subcommand(
      "demo",
      "Run the live system on this machine: the scheduler service and its prefill and decode\n"
      "node processes, a block store on real files, UCX over shared memory, and the tiny CPU\n"
      "transformer, replaying multi-turn agent sessions. Prints a table; --json for every turn.\n"
      "Examples:\n"
      "  dualpath demo --model tiny --sessions 4 --turns 24 --path auto --seed 1 --json out.json\n"
      "  dualpath demo --path pe --data-dir /tmp/kv   # a rerun with the same dir hits its blocks\n"
      "  dualpath demo --path recompute   # nothing read: every prompt computed (the reference)\n"
      "  dualpath demo --path split --turns 24          # both nodes read parts of every hit");
  cmd->add_option("--config", args->config_path,
                  "TOML cluster file shared with dualpath sim ([store], [live], [transport])");
  cmd->add_option("--model", args->model, "tiny (default) or small");
  cmd->add_option("--sessions", args->sessions, "agent sessions (default 4)");
  cmd->add_option("--turns", args->turns, "turns per session (default 24)");
  cmd->add_option("--path", args->path,
                  "pe | de | split | auto | recompute (default auto); split: both nodes read "
                  "parts of every hit (the PE node the leading blocks, the DE node the rest)");
  cmd->add_option("--seed", args->seed, "prompt seed (default 1)");
  cmd->add_option("--json", args->json_path, "write every turn as JSON to this file");
  cmd->add_option("--data-dir", args->data_dir,
                  "keep the block store in this directory (default: a fresh temporary one)");
  cmd->add_option("--prefill-nodes", args->prefill_nodes, "prefill node processes (default 1)");
  cmd->add_option("--decode-nodes", args->decode_nodes, "decode node processes (default 2)");
  cmd->add_option("--engines", args->engines,
                  "engines (GPUs) per node process, each with its own HBM arena and traffic "
                  "manager (default 1, or the config's live.engines_per_node)");
  cmd->add_option("--first-prompt-tokens", args->first_prompt_tokens,
                  "tokens of each session's first prompt (default 512)");
  cmd->add_option("--snic-gbps", args->snic_gbps,
                  "emulate each node's storage NIC at this many Gb/s (default: the config's, off), "
                  "so reads queue and --path auto has queues to compare");
  cmd->add_flag("--sequential", args->sequential,
                "one turn at a time, sessions round-robin (default: sessions run concurrently)");
  cmd->add_flag("--quiet", args->quiet, "no progress lines on stderr");
  cmd->callback([args, &exit_code] { exit_code = run(*args); });
}

DP_REGISTER_COMMAND("", "demo", setup);

}  // namespace
}  // namespace dualpath::app
