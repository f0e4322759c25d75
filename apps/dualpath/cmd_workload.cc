// `dualpath workload`: generates or reads a dataset (--dataset 32k|48k|64k|weka:PATH|mooncake:PATH) and prints
// its statistics; for the Table-2 datasets next to PAPER.md Table 2 with the deviation, and the
// fitted generator parameters (docs/workload.md).

#include <fmt/format.h>

#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "apps/dualpath/cli_util.h"
#include "apps/dualpath/command.h"
#include "workload/dataset_spec.h"
#include "common/percentiles.h"
#include "workload/dataset_stats.h"
#include "workload/mooncake_reader.h"
#include "workload/scale.h"
#include "workload/table2.h"

namespace dualpath::app {
namespace {

using workload::DatasetStats;

struct WorkloadArgs {
  std::string dataset = "64k";
  int64_t seed = 1;
  int trajectories = 500;
  double append_scale = 1.0;
  double gen_scale = 1.0;
  std::string json_path;
};

double deviation_pct(double measured, double target) { return 100.0 * (measured / target - 1.0); }

void print_table2(const DatasetStats& st, const workload::Table2Target& t) {
  std::printf("%-10s %12s %12s %9s\n", "column", "measured", "Table 2", "dev %");
  const struct {
    const char* name;
    double measured, target;
  } rows[] = {{"Turns", st.turns_mean, t.turns},
              {"Append", st.append_mean, t.append},
              {"Gen", st.gen_mean, t.gen},
              {"Total", st.total_mean, t.total},
              {"Context", st.context_mean, t.context}};
  for (const auto& r : rows) {
    std::printf("%-10s %12.1f %12.0f %+9.2f\n", r.name, r.measured, r.target,
                deviation_pct(r.measured, r.target));
  }
}

void print_common(const DatasetStats& st, int64_t max_len_tokens) {
  std::printf("%-28s %lld\n", "trajectories", static_cast<long long>(st.trajectories));
  std::printf("%-28s %lld\n", "turns (all trajectories)", static_cast<long long>(st.turns_total));
  std::printf("%-28s %.1f\n", "turns per trajectory", st.turns_mean);
  std::printf("%-28s %lld / %lld / %lld\n", "  p50 / p90 / max",
              static_cast<long long>(st.turns_p50), static_cast<long long>(st.turns_p90),
              static_cast<long long>(st.max_turns));
  std::printf("%-28s %.0f\n", "prompt tokens per turn", st.prompt_per_turn_mean);
  std::printf("%-28s %.1f\n", "append tokens per turn", st.append_per_turn_mean);
  std::printf("%-28s %.1f\n", "gen tokens per turn", st.gen_per_turn_mean);
  std::printf("%-28s %.2f %%\n", "hit rate (1-append/prompt)", 100.0 * st.hit_rate);
  std::printf("%-28s %lld\n", "longest prompt", static_cast<long long>(st.max_prompt_tokens));
  std::printf("%-28s %lld\n", "longest trajectory", static_cast<long long>(st.max_total_tokens));
  std::printf("%-28s %lld%s\n", "MaxLen", static_cast<long long>(max_len_tokens),
              max_len_tokens == 0 ? " (unbounded)" : "");
  std::printf("%-28s %.1f s\n", "think time per turn", st.think_time_mean_s);
}

nlohmann::json stats_json(const DatasetStats& st) {
  return {{"trajectories", st.trajectories},
          {"turns_total", st.turns_total},
          {"turns_mean", st.turns_mean},
          {"turns_p50", st.turns_p50},
          {"turns_p90", st.turns_p90},
          {"max_turns", st.max_turns},
          {"append_mean", st.append_mean},
          {"gen_mean", st.gen_mean},
          {"total_mean", st.total_mean},
          {"context_mean", st.context_mean},
          {"append_per_turn_mean", st.append_per_turn_mean},
          {"gen_per_turn_mean", st.gen_per_turn_mean},
          {"prompt_per_turn_mean", st.prompt_per_turn_mean},
          {"hit_rate", st.hit_rate},
          {"think_time_mean_s", st.think_time_mean_s},
          {"max_total_tokens", st.max_total_tokens},
          {"max_prompt_tokens", st.max_prompt_tokens}};
}

// A Mooncake trace is requests, not trajectories: its rate, sizes and own prefix hit ratio.
int run_mooncake(const WorkloadArgs& a, const std::string& path) {
  auto t = workload::read_mooncake(path);
  if (!t.is_ok()) return usage_error(t.status().message());
  std::vector<double> in, out;
  for (const auto& r : t->requests) {
    in.push_back(static_cast<double>(r.input_tokens));
    out.push_back(static_cast<double>(r.output_tokens));
  }
  const LatencyStats si = summarize(in), so = summarize(out);
  const double span = t->requests.back().arrival_s - t->requests.front().arrival_s;
  const double hit = workload::static_prefix_hit_ratio(*t);
  std::printf("dataset %s\n", t->name.c_str());
  std::printf("%-28s %zu\n", "requests", t->requests.size());
  std::printf("%-28s %.0f s, %.2f requests/s\n", "span / rate", span,
              span > 0 ? static_cast<double>(t->requests.size()) / span : 0.0);
  std::printf("%-28s %.0f / %.0f / %.0f (mean %.0f)\n", "input p50/p90/p99", si.p50, si.p90,
              si.p99, si.mean);
  std::printf("%-28s %.0f / %.0f / %.0f (mean %.0f)\n", "output p50/p90/p99", so.p50, so.p90,
              so.p99, so.mean);
  std::printf("%-28s %u of %lld tokens each\n", "distinct blocks", t->distinct_blocks,
              static_cast<long long>(t->block_tokens));
  std::printf("%-28s %.1f %% (leading full blocks an earlier request held)\n",
              "prefix-token hit ratio", 100 * hit);
  if (!a.json_path.empty()) {
    nlohmann::json j = {{"dataset", t->name},
                        {"requests", t->requests.size()},
                        {"span_s", span},
                        {"input_tokens", {{"mean", si.mean}, {"p50", si.p50}, {"p90", si.p90},
                                          {"p99", si.p99}}},
                        {"output_tokens", {{"mean", so.mean}, {"p50", so.p50}, {"p90", so.p90},
                                           {"p99", so.p99}}},
                        {"distinct_blocks", t->distinct_blocks},
                        {"block_tokens", t->block_tokens},
                        {"prefix_hit_ratio", hit}};
    Status s = write_text_file(a.json_path, j.dump(2) + "\n");
    if (!s.is_ok()) return usage_error(s.message());
  }
  return 0;
}

int run(const WorkloadArgs& a) {
  if (a.dataset.rfind("mooncake:", 0) == 0) {
    if (Status s = check_output_file_if_given("--json", a.json_path); !s.is_ok())
      return usage_error(s.message());
    return run_mooncake(a, a.dataset.substr(9));
  }
  if (a.seed < 0) return usage_error(fmt::format("--seed {}: use a non-negative integer", a.seed));
  if (Status s = check_output_file_if_given("--json", a.json_path); !s.is_ok()) {
    return usage_error(s.message());
  }
  const auto seed = static_cast<uint64_t>(a.seed);
  const workload::Table2Target* target = workload::find_table2_target(a.dataset);
  std::optional<workload::Table2Fit> fit;
  Result<workload::Dataset> ds = Status::internal("unset");
  if (target != nullptr) {
    // Same as load_dataset/generate_table2, but keeps the fit to print its parameters.
    auto checked = workload::generate_table2(a.dataset, seed, a.trajectories);
    if (!checked.is_ok()) return usage_error(checked.status().message());
    fit = workload::calibrate_table2(*target, seed, a.trajectories);
    ds = std::move(checked);
  } else {
    ds = workload::load_dataset(a.dataset, seed);
    if (!ds.is_ok()) return usage_error(ds.status().message());
  }
  if (a.append_scale != 1.0 || a.gen_scale != 1.0) {
    ds = workload::scale(*ds, a.append_scale, a.gen_scale);
    if (!ds.is_ok()) return usage_error(ds.status().message());
  }
  const DatasetStats st = workload::stats(*ds);
  const bool scaled = a.append_scale != 1.0 || a.gen_scale != 1.0;

  std::printf("dataset %s (seed %llu)\n", ds->name.c_str(),
              static_cast<unsigned long long>(seed));
  if (target != nullptr) {
    print_table2(st, *target);
    if (scaled) std::printf("(scaled: Table 2 describes the unscaled dataset)\n");
    std::printf(
        "fitted: turns_median %.1f, step_median %.1f tok, step_sigma %.3f, "
        "first_append_median %.0f tok, gen_share %.3f (%d iterations, max error %.2f %%)\n",
        fit->params.turns_median, fit->params.step_median_tokens, fit->params.step_sigma,
        fit->params.first_append_median_tokens, fit->params.gen_share, fit->iterations,
        100.0 * fit->max_rel_error);
  } else {
    std::printf("%-28s %.1f / %.1f / %.1f / %.0f / %.0f\n", "turns/append/gen/total/ctx",
                st.turns_mean, st.append_mean, st.gen_mean, st.total_mean, st.context_mean);
  }
  print_common(st, ds->max_len_tokens);

  if (!a.json_path.empty()) {
    nlohmann::json j = stats_json(st);
    j["dataset"] = ds->name;
    j["seed"] = a.seed;
    j["max_len_tokens"] = ds->max_len_tokens;
    j["append_scale"] = a.append_scale;
    j["gen_scale"] = a.gen_scale;
    if (target != nullptr) {
      j["table2"] = {{"turns", target->turns},
                     {"append", target->append},
                     {"gen", target->gen},
                     {"total", target->total},
                     {"context", target->context}};
      j["fit"] = {{"turns_median", fit->params.turns_median},
                  {"step_median_tokens", fit->params.step_median_tokens},
                  {"step_sigma", fit->params.step_sigma},
                  {"first_append_median_tokens", fit->params.first_append_median_tokens},
                  {"gen_share", fit->params.gen_share},
                  {"iterations", fit->iterations},
                  {"max_rel_error", fit->max_rel_error}};
    }
    Status s = write_text_file(a.json_path, j.dump(2) + "\n");
    if (!s.is_ok()) return usage_error(s.message());
  }
  return 0;
}

void setup(CLI::App& parent, int& exit_code) {
  auto args = std::make_shared<WorkloadArgs>();
  CLI::App* cmd = parent.add_subcommand(
      "workload",
      "Generate or read a dataset and print its statistics (Table 2 comparison for 32k/48k/64k)");
  cmd->add_option("--dataset", args->dataset,
                  std::string("dataset: ") + std::string(workload::kDatasetSpecHelp))
      ->capture_default_str();
  cmd->add_option("--seed", args->seed, "generator seed")->capture_default_str();
  cmd->add_option("--trajectories", args->trajectories,
                  "trajectories to generate (Table-2 datasets)")
      ->capture_default_str();
  cmd->add_option("--append-scale", args->append_scale, "multiply every append (Fig. 9)")
      ->capture_default_str();
  cmd->add_option("--gen-scale", args->gen_scale, "multiply every generation length (Fig. 9)")
      ->capture_default_str();
  cmd->add_option("--json", args->json_path, "also write the statistics as JSON to this file");
  cmd->callback([args, &exit_code] { exit_code = run(*args); });
}

DP_REGISTER_COMMAND("", "workload", setup);

}  // namespace
}  // namespace dualpath::app
