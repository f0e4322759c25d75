// `dualpath plan`: the bottleneck-free P/D range (PAPER.md §6) and a simulated recommendation.

#include <fmt/format.h>

#include <cmath>
#include <cstdio>
#include <optional>
#include <nlohmann/json.hpp>

#include "apps/dualpath/cli_util.h"
#include "apps/dualpath/command.h"
#include "apps/dualpath/gnuplot.h"
#include "dualpath/units.h"
#include "model/pd_range.h"
#include "sim/experiment.h"
#include "sim/plan.h"

namespace dualpath::app {
namespace {

struct PlanArgs {
  int gpus_per_node = 8;
  int snics_per_node = 1;
  double snic_gbps = 400;
  double cnic_gbps = 400;
  double dram_gbps = 4000;
  std::string json_path;
  std::string png_path;
  // Recommendation (optional): simulate every split of --nodes.
  std::optional<int> nodes;
  std::string model = "ds660b";
  std::string dataset = "64k";
  int agents = 1024;
  int64_t seed = 1;
};

nlohmann::json number_or_null(double v) {
  return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr);
}

// The adaptive run's split over time (steps) above its prompt throughput next to the best
// static split's, per 10 s bucket.
Status write_adaptive_png(const std::string& path, const sim::PlanRecommendation& rec) {
  const auto& ad = rec.adaptive[static_cast<size_t>(rec.best_adaptive)];
  const auto& st = rec.candidates[static_cast<size_t>(rec.best)];
  std::string pd, tput;
  for (const sim::PdPoint& p : ad.result.pd_over_time)
    pd += fmt::format("{:.1f} {} {} {}\n", p.t_s, p.prefill_nodes, p.decode_nodes, p.switching_nodes);
  const size_t n = std::max(ad.result.timeseries.size(), st.result.timeseries.size());
  for (size_t i = 0; i < n; ++i) {
    auto at = [&](const sim::SimResult& r) {
      return i < r.timeseries.size() ? r.timeseries[i].prompt_tokens_per_s / 1e6 : 0.0;
    };
    tput += fmt::format("{:.0f} {:.4f} {:.4f}\n", static_cast<double>(i) * 10, at(ad.result),
                        at(st.result));
  }
  const std::string start = fmt::format("{}P{}D", ad.start_prefill_nodes, ad.start_decode_nodes);
  const std::string best = fmt::format("{}P{}D", st.prefill_nodes, st.decode_nodes);
  return run_gnuplot(fmt::format(
      "set terminal pngcairo size 1100,700 font 'Sans,11'\nset output '{}'\n"
      "$pd << EOD\n{}EOD\n$tp << EOD\n{}EOD\n"
      "set multiplot layout 2,1 title '{} {} {} agents: adaptive P/D from {} (JCT {:.0f} s) vs static "
      "{} (JCT {:.0f} s)'\n"
      "set grid\nset key outside right\nset ylabel 'nodes'\nset yrange [0:*]\n"
      "set xrange [0:{:.0f}]\n"
      "plot $pd u 1:2 w steps lw 3 lc rgb '#3b75af' t 'prefill', '' u 1:3 w steps lw 3 "
      "lc rgb '#ef8636' t 'decode', '' u 1:4 w steps lw 2 dt 2 lc rgb '#888888' t 'switching'\n"
      "set xlabel 'simulated time (s)'\nset ylabel 'prompt tokens/s (M)'\n"
      "plot $tp u 1:2 w lines lw 2 lc rgb '#3b75af' t 'adaptive', '' u 1:3 w lines lw 2 "
      "lc rgb '#519e3e' t 'static {}'\n"
      "unset multiplot\n",
      path, pd, tput, ad.result.model, ad.result.dataset, ad.result.agents, start, ad.result.jct_s,
      best, st.result.jct_s, std::max(ad.result.jct_s, st.result.jct_s), best));
}

int run(const PlanArgs& a) {
  if (a.seed < 0) return usage_error(fmt::format("--seed {}: use a non-negative integer", a.seed));
  for (const auto& [flag, path] : {std::pair{"--json", a.json_path}, {"--png", a.png_path}}) {
    if (Status s = check_output_file_if_given(flag, path); !s.is_ok()) return usage_error(s.message());
  }
  model::PdRangeInput in;
  in.gpus_per_node = a.gpus_per_node;
  in.snics_per_node = a.snics_per_node;
  in.snic_bytes_per_s = gbps_to_bytes_per_s(a.snic_gbps);
  in.cnic_bytes_per_s = gbps_to_bytes_per_s(a.cnic_gbps);
  in.dram_bytes_per_s = gbps_to_bytes_per_s(a.dram_gbps);
  auto range = model::bottleneck_free_range(in);
  if (!range.is_ok()) return usage_error(range.status().message());

  std::printf("Bottleneck-free P/D range (PAPER.md §6): g=%d GPUs/node, s=%d SNIC x %.0f Gb/s, "
              "CNIC %.0f Gb/s, DRAM %.0f Gb/s (%.0f GB/s)\n",
              a.gpus_per_node, a.snics_per_node, a.snic_gbps, a.cnic_gbps, a.dram_gbps,
              a.dram_gbps / 8);
  std::printf("  %-20s %-26s %10s  %s\n", "constraint", "condition", "P/D bound", "");
  nlohmann::json constraints = nlohmann::json::array();
  for (const auto& c : range->constraints) {
    std::string bound = std::isnan(c.bound)
                            ? (c.satisfiable ? "holds" : "VIOLATED")
                            : fmt::format("{} {}", c.lower ? ">=" : "<=", model::as_fraction(c.bound));
    std::printf("  %-20s %-26s %10s  %s\n", c.name.c_str(), c.formula.c_str(), bound.c_str(),
                c.binds ? "<- binds" : "");
    constraints.push_back({{"name", c.name},
                           {"condition", c.formula},
                           {"bound", number_or_null(c.bound)},
                           {"lower", c.lower},
                           {"holds", c.satisfiable},
                           {"binds", c.binds}});
  }
  std::printf("  => %s <= P/D <= %s (%.3f .. %.3f)%s\n", model::as_fraction(range->pd_min).c_str(),
              model::as_fraction(range->pd_max).c_str(), range->pd_min, range->pd_max,
              range->feasible ? "" : "  INFEASIBLE: no P/D ratio avoids a bottleneck");
  nlohmann::json out = {{"pd_min", number_or_null(range->pd_min)},
                        {"pd_max", number_or_null(range->pd_max)},
                        {"pd_min_fraction", model::as_fraction(range->pd_min)},
                        {"pd_max_fraction", model::as_fraction(range->pd_max)},
                        {"feasible", range->feasible},
                        {"constraints", constraints}};

  if (a.nodes) {
    auto base = sim::default_sim_config(a.model);
    if (!base.is_ok()) return usage_error(base.status().message());
    base->dataset = a.dataset;
    base->agents = a.agents;
    base->seed = static_cast<uint64_t>(a.seed);
    base->hw.gpus_per_node = a.gpus_per_node;
    base->hw.snics_per_node = a.snics_per_node;
    base->hw.snic_bytes_per_s = in.snic_bytes_per_s;
    base->hw.cnic_bytes_per_s = in.cnic_bytes_per_s;
    base->hw.dram_bytes_per_s = in.dram_bytes_per_s;
    std::printf("\nSimulating every split of %d nodes (%s, %s, %d agents, DualPath):\n", *a.nodes,
                a.model.c_str(), a.dataset.c_str(), a.agents);
    auto rec = sim::recommend_pd(*base, *a.nodes, range->pd_min, range->pd_max,
                                 [](const sim::PlanCandidate& c) {
                                   std::fprintf(stderr, "dualpath plan: %dP%dD %s\n",
                                                c.prefill_nodes, c.decode_nodes,
                                                c.infeasible.empty() ? "simulated" : "skipped");
                                 },
                                 /*adaptive=*/true);
    if (!rec.is_ok()) return usage_error(rec.status().message());
    std::printf("  %-8s %8s %10s %12s %10s %s\n", "P/D", "ratio", "JCT s", "TTFT p50 s", "in range",
                "");
    nlohmann::json cands = nlohmann::json::array();
    for (size_t i = 0; i < rec->candidates.size(); ++i) {
      const auto& c = rec->candidates[i];
      std::string pd = fmt::format("{}P{}D", c.prefill_nodes, c.decode_nodes);
      if (!c.infeasible.empty()) {
        std::printf("  %-8s %8.3f %10s %12s %10s cannot run: %s\n", pd.c_str(),
                    static_cast<double>(c.prefill_nodes) / c.decode_nodes, "-", "-",
                    c.in_bottleneck_free_range ? "yes" : "no", c.infeasible.c_str());
        cands.push_back({{"pd", pd},
                         {"jct_s", nullptr},
                         {"ttft_p50_s", nullptr},
                         {"in_bottleneck_free_range", c.in_bottleneck_free_range},
                         {"infeasible", c.infeasible}});
        continue;
      }
      std::printf("  %-8s %8.3f %10.1f %12.2f %10s %s\n",
                  pd.c_str(),
                  static_cast<double>(c.prefill_nodes) / c.decode_nodes, c.result.jct_s,
                  c.result.ttft_p50_s, c.in_bottleneck_free_range ? "yes" : "no",
                  static_cast<int>(i) == rec->best ? "<- recommended" : "");
      cands.push_back({{"pd", pd},
                       {"jct_s", c.result.jct_s},
                       {"ttft_p50_s", c.result.ttft_p50_s},
                       {"in_bottleneck_free_range", c.in_bottleneck_free_range}});
    }
    const auto& best = rec->candidates[static_cast<size_t>(rec->best)];
    out["candidates"] = cands;
    out["recommended_pd"] = fmt::format("{}P{}D", best.prefill_nodes, best.decode_nodes);

    // Adaptive P/D from each feasible split; the fastest is "the adaptive run".
    std::printf("\nAdaptive P/D (the controller re-splits during the run; docs/sched.md):\n");
    std::printf("  %-8s %10s %10s %8s  %s\n", "start", "JCT s", "vs best", "changes",
                "split over time");
    nlohmann::json starts = nlohmann::json::array();
    for (size_t i = 0; i < rec->adaptive.size(); ++i) {
      const auto& ad = rec->adaptive[i];
      std::string pd_text;
      for (const auto& p : ad.result.pd_over_time) {
        if (p.switching_nodes > 0) continue;
        pd_text += fmt::format("{}{:.0f}s {}P{}D", pd_text.empty() ? "" : ", ", p.t_s,
                               p.prefill_nodes, p.decode_nodes);
      }
      std::string start = fmt::format("{}P{}D", ad.start_prefill_nodes, ad.start_decode_nodes);
      std::printf("  %-8s %10.1f %9.3fx %8zu  %s%s\n", start.c_str(), ad.result.jct_s,
                  ad.result.jct_s / best.result.jct_s, ad.result.role_changes.size(),
                  pd_text.c_str(), static_cast<int>(i) == rec->best_adaptive ? "  <- adaptive run" : "");
      starts.push_back({{"start_pd", start},
                        {"jct_s", ad.result.jct_s},
                        {"role_changes", ad.result.role_changes.size()}});
    }
    const auto& ad = rec->adaptive[static_cast<size_t>(rec->best_adaptive)];
    nlohmann::json aj = sim::result_to_json(ad.result);
    out["adaptive"] = {
        {"start_pd", fmt::format("{}P{}D", ad.start_prefill_nodes, ad.start_decode_nodes)},
        {"jct_s", ad.result.jct_s},
        {"jct_over_best_static", ad.result.jct_s / best.result.jct_s},
        {"role_changes", aj["role_changes"]},
        {"ep_regroups", aj["ep_regroups"]},
        {"pd_over_time", aj["pd_over_time"]},
        {"starts", starts}};
    std::printf("  => adaptive from %dP%dD: JCT %.1f s, %.3fx the best static split (%s, %.1f s)\n",
                ad.start_prefill_nodes, ad.start_decode_nodes, ad.result.jct_s,
                ad.result.jct_s / best.result.jct_s, out["recommended_pd"].get<std::string>().c_str(),
                best.result.jct_s);
    if (!a.png_path.empty()) {
      if (Status s = write_adaptive_png(a.png_path, *rec); !s.is_ok()) return usage_error(s.message());
      std::printf("  wrote %s\n", a.png_path.c_str());
    }
  } else if (!a.png_path.empty()) {
    return usage_error("--png draws the adaptive P/D run of --nodes: give --nodes N too");
  }
  if (!a.json_path.empty()) {
    Status s = write_text_file(a.json_path, out.dump(2) + "\n");
    if (!s.is_ok()) return usage_error(s.message());
  }
  return 0;
}

void setup(CLI::App& parent, int& exit_code) {
  auto args = std::make_shared<PlanArgs>();
  CLI::App* cmd = parent.add_subcommand(
      "plan",
      "Which prefill/decode node ratios keep every NIC and DRAM out of the bottleneck?\n"
      "Prints PAPER.md §6's inequalities, which ones bind, and the range; with --nodes N it\n"
      "also simulates every split of N nodes for a workload and recommends the fastest, then runs\n"
      "adaptive P/D (nodes change role during the run) from each split and reports the best.\n"
      "Bandwidths are in Gb/s, DRAM too (4000 Gb/s = 500 GB/s). Examples:\n"
      "  dualpath plan --gpus-per-node 8 --snics-per-node 1 --snic-gbps 400 --dram-gbps 4000\n"
      "  dualpath plan --nodes 6 --model ds660b --dataset 64k --agents 1024 --png pd.png");
  cmd->add_option("--gpus-per-node", args->gpus_per_node, "g: GPUs (and CNICs) per node")
      ->capture_default_str();
  cmd->add_option("--snics-per-node", args->snics_per_node, "s: storage NICs per node")
      ->capture_default_str();
  cmd->add_option("--snic-gbps", args->snic_gbps, "one storage NIC, Gb/s")->capture_default_str();
  cmd->add_option("--cnic-gbps", args->cnic_gbps, "one compute NIC, Gb/s (B)")
      ->capture_default_str();
  cmd->add_option("--dram-gbps", args->dram_gbps, "node DRAM bandwidth, Gb/s (M)")
      ->capture_default_str();
  cmd->add_option("--json", args->json_path,
                  "write pd_min, pd_max, constraints (and with --nodes: candidates, adaptive)");
  cmd->add_option("--png", args->png_path,
                  "with --nodes: draw the adaptive run's split over time and its throughput "
                  "next to the best static split's");
  CLI::Option* nodes = cmd->add_option(
      "--nodes", args->nodes, "also simulate every P/D split of this many nodes (2..1000)");
  // The workload flags only mean something with --nodes: given alone, they are an error rather
  // than silently ignored.
  for (CLI::Option* o :
       {cmd->add_option("--model", args->model, "model preset for --nodes"),
        cmd->add_option("--dataset", args->dataset, "workload for --nodes: 32k|48k|64k|weka:PATH"),
        cmd->add_option("--agents", args->agents, "agents for --nodes"),
        cmd->add_option("--seed", args->seed, "workload seed for --nodes (non-negative)")}) {
    o->capture_default_str()->needs(nodes);
  }
  cmd->callback([args, &exit_code] { exit_code = run(*args); });
}

DP_REGISTER_COMMAND("", "plan", setup);

}  // namespace
}  // namespace dualpath::app
