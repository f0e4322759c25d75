// `dualpath bench serve`: the seed guide's on/off verification through the HTTP API: the same
// multi-turn chat sessions against a fresh cluster with DualPath off (basic) and on (full),
// measured by real HTTP clients. The logic lives in bench/serve_bench.{h,cc}; docs/bench.md
// explains it.

#include <fmt/format.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "apps/dualpath/cli_util.h"
#include "apps/dualpath/command.h"
#include "apps/dualpath/gnuplot.h"
#include "bench/bench_config.h"
#include "bench/serve_bench.h"
#include "serve/serve_config.h"

namespace dualpath::app {
namespace {

using Json = nlohmann::json;

struct ServeBenchArgs {
  std::string config_path;
  std::string modes = "basic,full";
  std::string dram_tier;  // --dram-tier
  std::string json_path;
  std::string png_path;
  std::string save_result_path;
  std::vector<std::string> goodput;
  bench::ServeBenchOptions bench;
  bench::TraceSpec trace;  // with --dataset
  bool no_sim = false;
  bool quiet = false;
  CLI::Option* turns_flag = nullptr;
  std::map<std::string, CLI::Option*> trace_flags;  // the flags that go with --dataset
  bool flag_given(const std::string& f) const {
    auto it = trace_flags.find(f);
    return it != trace_flags.end() && it->second->count() > 0;
  }
};

Status write_png(const std::string& path, const std::vector<bench::ServeBenchRun>& runs) {
  std::string data;
  for (const auto& r : runs) {
    data += fmt::format("{} {:.2f} {:.2f} {:.2f} {:.3f}\n", r.mode, r.output_tokens_per_s,
                        r.ttft_s.p50 * 1e3, r.ttft_s.p99 * 1e3, r.tpot_s.p50 * 1e3);
  }
  return run_gnuplot(fmt::format(
      "set terminal pngcairo size 1200,450 font 'Sans,11'\nset output '{}'\n"
      "$d << EOD\n{}EOD\n"
      "set style data histograms\nset style histogram clustered gap 1\n"
      "set style fill solid 0.8\nset grid ytics\nset boxwidth 0.8\nset yrange [0:*]\n"
      "set multiplot layout 1,3 title 'dualpath bench serve: the same sessions through the API'\n"
      "set title 'output tokens/s (higher is better)'\nplot $d u 2:xtic(1) notitle lc rgb '#3b75af'\n"
      "set title 'TTFT (ms, lower is better)'\nset key outside bottom center horizontal\n"
      "plot $d u 3:xtic(1) t 'p50' lc rgb '#3b75af', '' u 4 t 'p99' lc rgb '#ef8636'\n"
      "set title 'TPOT p50 (ms)'\nplot $d u 5:xtic(1) notitle lc rgb '#519e3e'\n"
      "unset multiplot\n",
      path, data));
}

int run(const ServeBenchArgs& a) {
  std::vector<serve::ServeMode> modes;
  {
    std::stringstream ss(a.modes);
    for (std::string m; std::getline(ss, m, ',');) {
      auto p = serve::parse_serve_mode(m);
      if (!p.is_ok()) return usage_error(fmt::format("--mode: {}", p.status().message()));
      modes.push_back(*p);
    }
  }
  if (modes.empty()) return usage_error("--mode: name at least one of basic, full, oracle");
  for (const auto& [flag, path] : {std::pair{"--json", a.json_path}, {"--png", a.png_path},
                                   {"--save-result", a.save_result_path}}) {
    if (Status s = check_output_file_if_given(flag, path); !s.is_ok()) return usage_error(s.message());
  }
  bench::ServeBenchOptions b = a.bench;
  for (const std::string& g : a.goodput) {
    // vLLM's spelling: --goodput ttft:500 tpot:50 (milliseconds).
    const size_t colon = g.find(':');
    const std::string name = g.substr(0, colon);
    double ms = 0;
    bool ok = colon != std::string::npos;
    if (ok) {
      const std::string v = g.substr(colon + 1);
      char* end = nullptr;
      ms = std::strtod(v.c_str(), &end);
      ok = !v.empty() && end != nullptr && *end == '\0' && ms > 0 && std::isfinite(ms);
    }
    double* slot = name == "ttft" ? &b.goodput.ttft_ms
                   : name == "tpot" ? &b.goodput.tpot_ms
                   : name == "e2el" ? &b.goodput.e2el_ms
                                    : nullptr;
    if (!ok || slot == nullptr) {
      return usage_error(fmt::format(
          "--goodput '{}': give NAME:MS with NAME ttft, tpot or e2el and MS a positive number of "
          "milliseconds (vLLM's spelling), e.g. --goodput ttft:500 tpot:50",
          g));
    }
    *slot = ms;
  }
  const bool replay = !a.trace.dataset.empty();
  if (!replay) {
    for (const char* f : {"--sessions-per-s", "--think-time-scale", "--length-scale", "--time-scale",
                          "--no-sim"}) {
      if (a.flag_given(f)) {
        return usage_error(fmt::format("{} goes with --dataset (a trace's replay)", f));
      }
    }
  }
  if (replay) {
    // A trace's sessions run all their turns unless --turns caps them; the synthetic sessions'
    // lengths do not apply.
    b.turns = a.turns_flag->count() ? b.turns : 0;
    b.context_tokens = b.append_tokens = 1;
  }
  if (b.sessions < 1 || b.turns < (replay ? 0 : 1) || b.concurrency < 0) {
    return usage_error(fmt::format(
        "--sessions {} --turns {} --concurrency {}: give at least one session of one turn, and a "
        "concurrency of 1 or more (0: every session at once)",
        b.sessions, b.turns, b.concurrency));
  }
  if (b.context_tokens < 1 || b.append_tokens < 1 || b.max_tokens < 1) {
    return usage_error(fmt::format(
        "--context-tokens {} --append-tokens {} --max-tokens {}: each must be at least 1",
        b.context_tokens, b.append_tokens, b.max_tokens));
  }
  auto cfg = serve::load_serve_config(a.config_path);
  if (!cfg.is_ok()) return usage_error(cfg.status().message());
  const auto& e = cfg->engine;
  if (replay) {
    auto both = bench::load_bench_configs(a.config_path);
    if (!both.is_ok()) return usage_error(fmt::format("--dataset: {}", both.status().message()));
    bench::TraceSpec spec = a.trace;
    spec.sessions = b.sessions;
    spec.max_turns = b.turns;
    spec.sim = !a.no_sim;
    const double dilation = e.live_time_dilation();
    auto t = bench::make_trace_replay(both->sim, spec, dilation);
    if (!t.is_ok()) return usage_error(t.status().message());
    b.trace = std::move(t).value();
    b.sessions = static_cast<int>(b.trace->plans.size());
  }
  const int concurrency = b.concurrency > 0 ? std::min(b.concurrency, b.sessions) : b.sessions;
  int64_t trace_turns = 0, trace_prompt_tokens = 0, trace_longest = 0;
  if (b.trace) {
    for (const auto& p : b.trace->plans) {
      for (size_t i = 0; i < p.turns.size(); ++i) {
        trace_turns += 1;
        trace_prompt_tokens += p.turns[i].prompt_tokens;
        trace_longest = std::max(trace_longest, p.turns[i].prompt_tokens);
      }
    }
  }
  const double trace_hits = b.trace ? bench::trace_hit_ratio(b.trace->plans) : 0.0;
  if (b.trace && !a.quiet) {
    std::fprintf(stderr,
                 "dualpath bench serve: replaying %s: %d sessions, %lld turns, %s; lengths x%g "
                 "(longest prompt %lld tokens), think times x%g; the trace's hit ratio %.3f\n",
                 a.trace.dataset.c_str(), b.sessions, static_cast<long long>(trace_turns),
                 a.trace.sessions_per_s > 0
                     ? fmt::format("Poisson arrivals at {} per emulated s", a.trace.sessions_per_s).c_str()
                     : "all at once",
                 a.trace.length_scale, static_cast<long long>(trace_longest),
                 a.trace.think_time_scale, trace_hits);
  }

  // --dram-tier: each mode whose read path the scheduler chooses runs again with the tier.
  std::vector<std::pair<serve::ServeMode, double>> plan;  // (mode, tier bytes; < 0: config's)
  double tier_bytes = -1;
  if (!a.dram_tier.empty()) {
    auto bytes = parse_size_bytes(a.dram_tier);
    if (!bytes.is_ok() || *bytes <= 0) {
      return usage_error(fmt::format(
          "--dram-tier '{}': give the DRAM per decode node with an optional K, M, G or T suffix "
          "(the model's bytes, as cache.de_dram_gb), e.g. --dram-tier 400G",
          a.dram_tier));
    }
    tier_bytes = static_cast<double>(*bytes);
  }
  for (serve::ServeMode m : modes) {
    const bool tier_mode = m == serve::ServeMode::kFull || m == serve::ServeMode::kSplit;
    plan.emplace_back(m, tier_bytes > 0 ? 0.0 : (tier_mode ? -1.0 : 0.0));
    if (tier_bytes > 0 && tier_mode) plan.emplace_back(m, tier_bytes);
  }
  std::vector<bench::ServeBenchRun> runs;
  for (const auto& [m, tier] : plan) {
    const std::string name = std::string(serve::serve_mode_name(m)) + (tier > 0 ? "+tier" : "");
    bench::ServeBenchOptions o = b;  // (with --goodput parsed)
    o.dram_tier_bytes = tier;
    double last = -10;
    if (!a.quiet) {
      std::fprintf(stderr,
                   "dualpath bench serve: %s: a fresh %dP%dD cluster (%s, %s compute), %d "
                   "sessions x %s turns, %d at once, through the HTTP API\n",
                   name.c_str(), e.prefill_nodes, e.decode_nodes, e.model.c_str(),
                   e.compute.c_str(), b.sessions,
                   b.trace ? "the trace's" : std::to_string(b.turns).c_str(), concurrency);
      o.progress = [&](int64_t done, int64_t total, double s) {
        if (s - last < 5 && done != total) return;
        last = s;
        std::fprintf(stderr, "dualpath bench serve: %s: %lld/%lld requests, %.0f s\n",
                     name.c_str(), static_cast<long long>(done), static_cast<long long>(total), s);
      };
    }
    auto r = bench::run_serve_bench(*cfg, m, o);
    if (!r.is_ok()) {
      std::fprintf(stderr, "dualpath bench serve: %s: %s\n", name.c_str(),
                   r.status().to_string().c_str());
      return 1;
    }
    runs.push_back(std::move(r).value());
  }
  if (b.trace) {
    std::printf("dualpath bench serve: %s, %dP%dD %s; trace %s: %d sessions (%s), %lld turns, "
                "%d at once; lengths x%g, think times x%g (real seconds)\n",
                a.config_path.c_str(), e.prefill_nodes, e.decode_nodes, e.model.c_str(),
                a.trace.dataset.c_str(), b.sessions,
                a.trace.sessions_per_s > 0
                    ? fmt::format("Poisson, {}/emulated s", a.trace.sessions_per_s).c_str()
                    : "all at once",
                static_cast<long long>(trace_turns), concurrency, a.trace.length_scale,
                a.trace.think_time_scale);
  } else {
    std::printf("dualpath bench serve: %s, %dP%dD %s; %d sessions x %d turns, %d at once; context "
                "%lld, append %lld, max_tokens %lld (real seconds)\n",
                a.config_path.empty() ? "embedded defaults" : a.config_path.c_str(),
                e.prefill_nodes, e.decode_nodes, e.model.c_str(), b.sessions, b.turns,
                concurrency, static_cast<long long>(b.context_tokens),
                static_cast<long long>(b.append_tokens), static_cast<long long>(b.max_tokens));
  }
  std::fputs(bench::serve_bench_table(runs).c_str(), stdout);
  if (b.trace) std::fputs(bench::trace_vs_sim_table(runs, trace_hits).c_str(), stdout);
  bool same_answers = true;
  for (const auto& r : runs) {
    same_answers = same_answers && r.session_digests == runs[0].session_digests;
    for (const auto& err : r.error_samples) std::printf("  %s error: %s\n", r.mode.c_str(), err.c_str());
  }
  if (runs.size() > 1) {
    std::printf("greedy replies: %s across modes\n", same_answers ? "identical" : "DIFFERENT");
  }
  if (!a.json_path.empty()) {
    Json out = {{"config", a.config_path},
                {"model", e.model},
                {"prefill_nodes", e.prefill_nodes},
                {"decode_nodes", e.decode_nodes},
                {"sessions", b.sessions},
                {"turns", b.turns},
                {"concurrency", concurrency},
                {"context_tokens", b.context_tokens},
                {"append_tokens", b.append_tokens},
                {"max_tokens", b.max_tokens},
                {"same_replies_across_modes", same_answers},
                {"runs", Json::array()}};
    if (b.trace) {
      out["dataset"] = a.trace.dataset;
      out["trace"] = {{"dataset", a.trace.dataset},
                      {"sessions", b.sessions},
                      {"turns", trace_turns},
                      {"prompt_tokens", trace_prompt_tokens},
                      {"longest_prompt_tokens", trace_longest},
                      {"hit_ratio", trace_hits},
                      {"sessions_per_s", a.trace.sessions_per_s},
                      {"length_scale", a.trace.length_scale},
                      {"think_time_scale", a.trace.think_time_scale},
                      {"time_scale", a.trace.time_scale},
                      {"time_dilation", b.trace->time_dilation}};
    }
    for (const auto& r : runs) out["runs"].push_back(r.to_json());
    if (runs.size() > 1) {
      Json ratios = Json::array();
      for (size_t i = 1; i < runs.size(); ++i) {
        auto ratio = [](double x, double y) { return y > 0 ? x / y : 0.0; };
        ratios.push_back({{"mode", runs[i].mode},
                          {"over", runs[0].mode},
                          {"output_tokens_per_s", ratio(runs[i].output_tokens_per_s,
                                                        runs[0].output_tokens_per_s)},
                          {"ttft_p50", ratio(runs[i].ttft_s.p50, runs[0].ttft_s.p50)},
                          {"ttft_p99", ratio(runs[i].ttft_s.p99, runs[0].ttft_s.p99)},
                          {"tpot_p50", ratio(runs[i].tpot_s.p50, runs[0].tpot_s.p50)}});
      }
      out["ratios"] = ratios;
    }
    if (Status s = write_text_file(a.json_path, out.dump(2) + "\n"); !s.is_ok()) {
      return usage_error(s.message());
    }
  }
  if (!a.save_result_path.empty()) {
    // vLLM's file is one run: with several modes each gets its own (serve-basic.json, ...), and
    // the path given holds the last mode's (DualPath on, in the default basic,full).
    const std::filesystem::path given(a.save_result_path);
    const bench::VllmResultSetup setup{e.model, e.model, concurrency};
    for (size_t i = 0; i < runs.size(); ++i) {
      const Json j = bench::vllm_result_json(runs[i], setup);
      std::fputs(bench::vllm_result_block(runs[i], j).c_str(), stdout);
      std::vector<std::string> paths;
      if (runs.size() > 1) {
        paths.push_back((given.parent_path() / (given.stem().string() + "-" + runs[i].mode +
                                                 given.extension().string()))
                            .string());
      }
      if (i + 1 == runs.size()) paths.push_back(a.save_result_path);
      for (const std::string& path : paths) {
        if (Status s = write_text_file(path, j.dump(2) + "\n"); !s.is_ok()) {
          return usage_error(s.message());
        }
        std::printf("wrote %s (vLLM's --save-result format, %s)\n", path.c_str(),
                    runs[i].mode.c_str());
      }
    }
  }
  if (!a.png_path.empty()) {
    if (Status s = write_png(a.png_path, runs); !s.is_ok()) {
      std::fprintf(stderr, "dualpath bench serve: no PNG: %s\n", s.message().c_str());
    } else {
      std::printf("wrote %s\n", a.png_path.c_str());
    }
  }
  int64_t errors = 0;
  for (const auto& r : runs) errors += r.errors;
  return errors == 0 && same_answers ? 0 : 1;
}

void setup(CLI::App& parent, int& exit_code) {
  auto args = std::make_shared<ServeBenchArgs>();
  CLI::App* cmd = parent.add_subcommand(
      "serve",
      "The seed guide's verification, measured: the same multi-turn chat sessions go through\n"
      "the OpenAI-compatible HTTP API (streaming, real HTTP clients) of a fresh cluster once\n"
      "per mode, DualPath off (basic: the PE read path only) and on (full: both read paths),\n"
      "with at most --concurrency conversations active at once. A session is one long first\n"
      "message (--context-tokens bytes of text) and --turns turns, each resending the whole\n"
      "conversation plus --append-tokens new bytes, so every turn after the first hits the KV\n"
      "the earlier ones stored. Per mode: requests, errors, output tokens/s, TTFT and TPOT\n"
      "p50/p99 (the client's clock, real seconds), cached tokens; and whether the greedy\n"
      "replies were identical across modes. Exit 1 on any error or differing reply.\n"
      "Examples:\n"
      "  dualpath bench serve --config configs/emu-1p2d.toml --sessions 16 --turns 8\n"
      "  dualpath bench serve --config configs/emu-1p2d.toml --sessions 16 --turns 8 \\\n"
      "      --concurrency 8 --json serve.json --png serve.png\n"
      "  dualpath bench serve --config configs/emu-1p2d.toml \\\n"
      "      --dataset weka:../shared/traces/weka_claude_code/weka_traces_compact.jsonl \\\n"
      "      --sessions 8 --turns 12 --length-scale 0.05 --think-time-scale 0.1 --json w.json");
  cmd->add_option("--config", args->config_path,
                  "TOML cluster file (default: the embedded 1P2D tiny CPU cluster)");
  cmd->add_option("--sessions", args->bench.sessions,
                  "conversations (default 16; with --dataset: the trace's sessions to replay, "
                  "drawn as the simulator draws its agents)");
  args->turns_flag = cmd->add_option(
      "--turns", args->bench.turns,
      "requests per conversation (default 10; with --dataset: at most this many of each "
      "session's, default all)");
  cmd->add_option("--concurrency", args->bench.concurrency,
                  "conversations active at once (default: all of them)");
  cmd->add_option("--mode", args->modes, "comma list of basic, full, oracle (default basic,full)");
  cmd->add_option("--dram-tier", args->dram_tier,
                  "beyond the paper (issue 35): also run each DualPath mode (full, split) with a "
                  "DRAM tier of this much per decode node (the model's bytes, e.g. 400G; as "
                  "cache.de_dram_gb), named MODE+tier, side by side with the same mode without "
                  "one; its simulator twin gets the same tier");
  cmd->add_option("--context-tokens", args->bench.context_tokens,
                  "bytes (= tokens) of a session's first message (default 16000)");
  cmd->add_option("--append-tokens", args->bench.append_tokens,
                  "bytes (= tokens) of each later user message (default 256)");
  cmd->add_option("--max-tokens", args->bench.max_tokens, "max_tokens of every request (default 32)");
  cmd->add_option("--seed", args->bench.seed, "the text's seed (default 1)");
  cmd->add_option("--json", args->json_path,
                  "write `runs` (mode, requests, errors, output_tokens_per_s, ttft_s, tpot_s, "
                  "cached_tokens, ...) and `ratios` here");
  cmd->add_option("--png", args->png_path, "draw tokens/s, TTFT p50/p99 and TPOT per mode here");
  cmd->add_option("--save-result", args->save_result_path,
                  "also write each run as vLLM's `vllm bench serve --save-result` writes it (its "
                  "field names and units: request_throughput, output_throughput, mean/median/std/"
                  "p99 of ttft, tpot, itl and e2el in ms, and per request input_lens, output_lens, "
                  "ttfts, itls, latencies, start_times, generated_texts, errors), so that scripts "
                  "made for vLLM's files read ours; and print vLLM's result block. With several "
                  "modes each goes to FILE-MODE.json and FILE holds the last")
      ->type_name("FILE");
  cmd->add_option("--goodput", args->goodput,
                  "SLOs for vLLM's goodput, in ms: ttft:MS tpot:MS e2el:MS (any of them); a "
                  "request counts when it meets every one given. Adds runs[].goodput, "
                  "request_goodput in --save-result, and a line per mode")
      ->expected(1, 3)
      ->type_name("NAME:MS");
  cmd->add_flag("--direct", args->bench.direct,
                "the API's own cost: right after each request, send the same prompt (tokenized by "
                "the API's own code) to the scheduler service's request interface, without HTTP, "
                "for as many tokens as the API's reply had, in a cache namespace of its own; the "
                "table and the JSON (runs[].direct, runs[].api_overhead) give TTFT and TPOT of "
                "both side by side");
  cmd->add_option("--dataset", args->trace.dataset,
                  "replay a trace through the API instead of the synthetic sessions: "
                  "weka:PATH (Claude-Code sessions, their turns in order with their think "
                  "times), mooncake:PATH (requests at their timestamps; --sessions counts "
                  "requests), table2:32k|48k|64k (the paper's generator). The sessions are the "
                  "simulator's (sim::build_agents on --config), each turn a /v1/completions "
                  "request whose text reproduces the trace's cached prefixes and whose reply has "
                  "the trace's length (ignore_eos); the simulator's prediction for the same "
                  "sessions is printed and written beside the live figures (runs[].sim)")
      ->type_name("SPEC");
  args->trace_flags["--sessions-per-s"] =
      cmd->add_option("--sessions-per-s", args->trace.sessions_per_s,
                      "with --dataset: sessions arrive as a Poisson process at this rate per "
                      "emulated second (default: all at once, at most --concurrency running)");
  args->trace_flags["--think-time-scale"] =
      cmd->add_option("--think-time-scale", args->trace.think_time_scale,
                      "with --dataset: multiply the trace's think times (default 1; 0 replays "
                      "back to back). On an emulated cluster they are emulated seconds");
  args->trace_flags["--length-scale"] =
      cmd->add_option("--length-scale", args->trace.length_scale,
                      "with --dataset: multiply every length (prompt appends, generations, "
                      "prefix blocks) so that a trace of 100k-token contexts fits here, e.g. "
                      "0.05 (default 1; the output states it and the longest prompt)");
  args->trace_flags["--time-scale"] =
      cmd->add_option("--time-scale", args->trace.time_scale,
                      "with --dataset mooncake:PATH: multiply its timestamps (0.5: twice the "
                      "rate; default 1)");
  args->trace_flags["--no-sim"] =
      cmd->add_flag("--no-sim", args->no_sim,
                    "with --dataset: no simulator prediction beside the live run");
  cmd->add_flag("--quiet", args->quiet, "no progress lines on stderr");
  cmd->callback([args, &exit_code] { exit_code = run(*args); });
}

DP_REGISTER_COMMAND("bench", "serve", setup);

}  // namespace
}  // namespace dualpath::app
