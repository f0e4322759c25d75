// `dualpath bench soak`: multi-turn sessions through the HTTP API at a steady load for --minutes,
// a row every --interval-s (throughput, TTFT p50/p99, RSS, open descriptors, store bytes,
// errors), and at the end whether any of them drifted. The logic is in bench/serve_bench.{h,cc};
// docs/bench.md explains it.

#include <fmt/format.h>

#include <cstdio>
#include <memory>
#include <string>

#include "apps/dualpath/cli_util.h"
#include "apps/dualpath/command.h"
#include "bench/serve_bench.h"
#include "serve/serve_config.h"

namespace dualpath::app {
namespace {

struct SoakArgs {
  std::string config_path;
  std::string json_path;
  double store_mb = 256;
  bench::SoakOptions soak;
};

int run(const SoakArgs& a) {
  if (Status s = check_output_file_if_given("--json", a.json_path); !s.is_ok()) {
    return usage_error(s.message());
  }
  if (!(a.store_mb >= 1)) return usage_error(fmt::format("--store-mb {}: give at least 1", a.store_mb));
  auto cfg = serve::load_serve_config(a.config_path);
  if (!cfg.is_ok()) return usage_error(cfg.status().message());
  bench::SoakOptions o = a.soak;
  o.store_capacity_bytes = static_cast<int64_t>(a.store_mb * (1 << 20));
  const auto& e = cfg->engine;
  std::printf("dualpath bench soak: %s, %dP%dD %s, %s; %d clients, %d-turn sessions (context %lld, "
              "append %lld, max_tokens %lld), %.1f min, store capacity %.0f MiB\n",
              a.config_path.empty() ? "embedded defaults" : a.config_path.c_str(),
              e.prefill_nodes, e.decode_nodes, e.model.c_str(),
              std::string(serve::serve_mode_name(cfg->scheduler.mode)).c_str(), o.concurrency,
              o.turns, static_cast<long long>(o.context_tokens),
              static_cast<long long>(o.append_tokens), static_cast<long long>(o.max_tokens),
              o.minutes, a.store_mb);
  std::fputs(bench::soak_header().c_str(), stdout);
  std::fflush(stdout);
  auto r = bench::run_soak_bench(*cfg, o, [](const bench::SoakSample& s) {
    std::fputs(bench::soak_row(s).c_str(), stdout);
    std::fflush(stdout);
  });
  if (!r.is_ok()) {
    if (r.status().is_invalid_argument()) return usage_error(r.status().message());
    std::fprintf(stderr, "dualpath bench soak: %s\n", r.status().to_string().c_str());
    return 1;
  }
  for (const auto& err : r->error_samples) std::printf("  error: %s\n", err.c_str());
  for (const auto& v : r->verdicts) {
    std::printf("%-14s %s: %s\n", v.what.c_str(), v.ok ? "steady" : "DRIFTED", v.detail.c_str());
  }
  std::printf("soak: %s\n", r->ok() ? "nothing drifted, nothing lost" : "FAILED");
  if (!a.json_path.empty()) {
    if (Status s = write_text_file(a.json_path, r->to_json().dump(2) + "\n"); !s.is_ok()) {
      return usage_error(s.message());
    }
  }
  return r->ok() ? 0 : 1;
}

void setup(CLI::App& parent, int& exit_code) {
  auto args = std::make_shared<SoakArgs>();
  CLI::App* cmd = parent.add_subcommand(
      "soak",
      "Serve multi-turn chat sessions through the OpenAI-compatible API at a steady load for\n"
      "--minutes: --concurrency clients, each running --turns-turn conversations back to back\n"
      "(every turn resends the conversation, so later turns hit the store). Every --interval-s\n"
      "it prints the requests and errors of the interval, output tokens/s, TTFT p50/p99, the RSS\n"
      "and open file descriptors of the scheduler and every node process, and the store's bytes\n"
      "(its capacity is --store-mb, so they plateau by eviction). At the end it compares the\n"
      "last sample with the one at 5 minutes (a sixth of a shorter run): RSS within +10 %,\n"
      "descriptors within +4, store bytes under the capacity, throughput's second half within\n"
      "-20 % of its first, and no lost request. Exit 1 when any of them drifted.\n"
      "Examples:\n"
      "  dualpath bench soak --minutes 30\n"
      "  dualpath bench soak --config configs/emu-1p2d.toml --minutes 5 --json soak.json");
  cmd->add_option("--config", args->config_path,
                  "TOML cluster file (default: the embedded 1P2D tiny CPU cluster)");
  cmd->add_option("--minutes", args->soak.minutes, "how long to run (default 30)");
  cmd->add_option("--concurrency", args->soak.concurrency, "client threads (default 8)");
  cmd->add_option("--turns", args->soak.turns, "turns per conversation (default 8)");
  cmd->add_option("--context-tokens", args->soak.context_tokens,
                  "bytes (= tokens) of a conversation's first message (default 2000)");
  cmd->add_option("--append-tokens", args->soak.append_tokens,
                  "bytes of each later user message (default 128)");
  cmd->add_option("--max-tokens", args->soak.max_tokens, "max_tokens per request (default 16)");
  cmd->add_option("--interval-s", args->soak.interval_s, "seconds between rows (default 10)");
  cmd->add_option("--store-mb", args->store_mb, "the block store's capacity in MiB (default 256)");
  cmd->add_option("--json", args->json_path, "write the samples and verdicts here");
  cmd->callback([args, &exit_code] { exit_code = run(*args); });
}

DP_REGISTER_COMMAND("bench", "soak", setup);

}  // namespace
}  // namespace dualpath::app
