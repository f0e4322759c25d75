// `dualpath bench overlap`: layerwise prefill with the next layer's KV in flight while the
// current one computes, against compute only (issue 5 "Overlap"). The logic lives in
// bench/overlap_bench.{h,cc}.

#include <fmt/format.h>

#include <cstdio>
#include <memory>
#include <string>

#include "apps/dualpath/cli_util.h"
#include "apps/dualpath/command.h"
#include "bench/overlap_bench.h"
#include "engine/engine_config.h"
#include "serve/cluster.h"

namespace dualpath::app {
namespace {

struct OverlapArgs {
  std::string config_path;
  std::string json_path;
  bench::OverlapOptions options;
  double time_dilation = 0;
};

int run(const OverlapArgs& a) {
  serve::ServeConfig serve_cfg;
  engine::EngineConfig& cfg = serve_cfg.engine;
  if (!a.config_path.empty()) {
    auto loaded = serve::load_serve_config(a.config_path);
    if (!loaded.is_ok()) return usage_error(loaded.status().message());
    serve_cfg = *loaded;
  } else {
    // Embedded default: DS 660B priced by the CostModel in real time, KV at 1/32 of its bytes.
    cfg.compute = "modeled";
    cfg.model = "ds660b";
    cfg.kv_scale = 1.0 / 32;
    cfg.time_dilation = 1;
    cfg.decode_nodes = 1;
  }
  if (a.time_dilation > 0) cfg.time_dilation = a.time_dilation;
  if (auto s = cfg.validate(); !s.is_ok()) return usage_error(s.message());
  if (auto s = bench::validate_overlap_options(a.options, cfg); !s.is_ok()) {
    return usage_error(s.message());
  }
  serve_cfg.scheduler.port = 0;  // its own nodes only
  serve::ClusterOptions options;
  options.config = serve_cfg;
  std::fprintf(stderr, "dualpath bench overlap: %s (%s), %lld hit tokens, %d repeats per path\n",
               cfg.model.c_str(), cfg.compute.c_str(),
               static_cast<long long>(a.options.hit_tokens), a.options.repeats);
  auto cluster = serve::Cluster::start(options);
  if (!cluster.is_ok()) return usage_error(cluster.status().to_string());
  auto result = bench::run_overlap_bench(**cluster, a.options);
  if (!result.is_ok()) return usage_error(result.status().to_string());
  std::fputs(result->table().c_str(), stdout);
  if (!a.json_path.empty()) {
    Status s = write_text_file(a.json_path, result->to_json().dump(2) + "\n");
    if (!s.is_ok()) return usage_error(s.message());
  }
  return 0;
}

void setup(CLI::App& parent, int& exit_code) {
  auto args = std::make_shared<OverlapArgs>();
  CLI::App* cmd = parent.add_subcommand(
      "overlap",
      "Layerwise overlap on the live system: one request whose hit KV streams into PE HBM one\n"
      "layer ahead of the compute (by the DE read path and by the PE read path), timed against\n"
      "the same prefill with no loads at all (compute only, the oracle path), with the modeled\n"
      "backend. Prints the ratio and the per-layer timeline (load wait / compute).\n"
      "Examples:\n"
      "  dualpath bench overlap                       # DS 660B, KV at 1/32 scale, real time\n"
      "  dualpath bench overlap --hit-tokens 32768 --json overlap.json");
  cmd->add_option("--config", args->config_path,
                  "TOML cluster file (live.compute must be \"modeled\"); default: embedded DS 660B");
  cmd->add_option("--hit-tokens", args->options.hit_tokens,
                  "cached prefix, whole blocks (default 16384)");
  cmd->add_option("--append-tokens", args->options.append_tokens, "new tokens (default 512)");
  cmd->add_option("--repeats", args->options.repeats, "prefills per path; the median counts (5)");
  cmd->add_option("--time-dilation", args->time_dilation,
                  "real seconds per emulated second (default: the config's, or 1)");
  cmd->add_option("--json", args->json_path, "write the results and timelines as JSON here");
  cmd->callback([args, &exit_code] { exit_code = run(*args); });
}

DP_REGISTER_COMMAND("bench", "overlap", setup);

}  // namespace
}  // namespace dualpath::app
