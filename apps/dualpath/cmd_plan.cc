// `dualpath plan`: the bottleneck-free P/D range (PAPER.md §6) and a simulated recommendation.

#include <fmt/format.h>

#include <cmath>
#include <cstdio>
#include <optional>
#include <nlohmann/json.hpp>

#include "apps/dualpath/cli_util.h"
#include "apps/dualpath/command.h"
#include "dualpath/units.h"
#include "model/pd_range.h"
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

int run(const PlanArgs& a) {
  if (a.seed < 0) return usage_error(fmt::format("--seed {}: use a non-negative integer", a.seed));
  if (Status s = check_output_file_if_given("--json", a.json_path); !s.is_ok()) {
    return usage_error(s.message());
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
                                 });
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
      "also simulates every split of N nodes for a workload and recommends the fastest.\n"
      "Bandwidths are in Gb/s, DRAM too (4000 Gb/s = 500 GB/s). Examples:\n"
      "  dualpath plan --gpus-per-node 8 --snics-per-node 1 --snic-gbps 400 --dram-gbps 4000\n"
      "  dualpath plan --nodes 6 --model ds660b --dataset 64k --agents 1024");
  cmd->add_option("--gpus-per-node", args->gpus_per_node, "g: GPUs (and CNICs) per node")
      ->capture_default_str();
  cmd->add_option("--snics-per-node", args->snics_per_node, "s: storage NICs per node")
      ->capture_default_str();
  cmd->add_option("--snic-gbps", args->snic_gbps, "one storage NIC, Gb/s")->capture_default_str();
  cmd->add_option("--cnic-gbps", args->cnic_gbps, "one compute NIC, Gb/s (B)")
      ->capture_default_str();
  cmd->add_option("--dram-gbps", args->dram_gbps, "node DRAM bandwidth, Gb/s (M)")
      ->capture_default_str();
  cmd->add_option("--json", args->json_path, "write pd_min, pd_max, constraints (and candidates)");
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
