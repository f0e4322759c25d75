// `dualpath paper`: reruns the paper's offline experiments in the simulator and writes
// docs/results/ (JSON, data files, PNG figures, a README with every check against the paper).

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>

#include "apps/dualpath/calibration_flags.h"
#include "apps/dualpath/cli_util.h"
#include "apps/dualpath/command.h"
#include "apps/dualpath/gnuplot.h"
#include "sim/paper.h"

namespace dualpath::app {
namespace {

constexpr const char* kCommittedResults = "docs/results";

struct PaperArgs {
  std::optional<std::string> out;  // docs/results when absent, for the full committed run only
  std::vector<std::string> figures;
  int threads = 2;
  int capacity_seeds = 7;
  bool no_plots = false;
  CalibrationFlags calibration;
};

using sim::PaperRun;

// The JCT of the run whose label starts with `prefix` within a figure, or NaN.
double find_jct(const std::vector<PaperRun>& runs, const std::string& fig, const std::string& label) {
  for (const auto& r : runs)
    if (r.figure == fig && r.label == label) return r.result.jct_s;
  return std::nan("");
}

std::string label(const std::string& model, const std::string& ds, int p, int d, int agents,
                  const char* mode, const std::string& extra = {}) {
  return fmt::format("{} {} {}P{}D {} {}{}", model, ds, p, d, agents, mode, extra);
}

const char* kPlotHeader =
    "set terminal pngcairo size 1500,1000 font 'Sans,11'\n"
    "set style data linespoints\nset grid\nset key top left\n";

// A bar chart into dir/NAME.png: the common header (size, output, title, clustered or stacked
// histogram style), then `body` (labels, ranges and the plot line).
Status bar_chart(const std::string& dir,
                 const char* name,
                 const std::string& title,
                 bool stacked,
                 const std::string& body) {
  return run_gnuplot(
      fmt::format("set terminal pngcairo size 900,550 font 'Sans,11'\nset output '{}/{}.png'\n"
                  "set title '{}'\nset style data histograms\nset style histogram {}\n"
                  "set style fill solid 0.8\n{}",
                  dir, name, title, stacked ? "rowstacked" : "clustered gap 1", body));
}

Status write_fig7(const std::string& dir, const std::vector<PaperRun>& runs) {
  struct Row { const char* model; int p, d; int agents[3]; };
  const Row rows[] = {{"ds27b", 1, 1, {512, 1024, 2048}},
                      {"ds660b", 2, 4, {1024, 2048, 4096}},
                      {"qwen32b", 1, 2, {128, 256, 512}}};
  std::string plot = std::string(kPlotHeader) + fmt::format("set output '{}/fig7.png'\n", dir) +
                     "set multiplot layout 3,3 title 'Fig. 7 (simulated): offline JCT vs agents'\n";
  for (const auto& row : rows) {
    for (const char* ds : {"32k", "48k", "64k"}) {
      std::string data = "# agents basic_s dualpath_s oracle_s\n";
      for (int a : row.agents) {
        data += fmt::format("{} {:.1f} {:.1f} {:.1f}\n", a,
                            find_jct(runs, "fig7", label(row.model, ds, row.p, row.d, a, "basic")),
                            find_jct(runs, "fig7", label(row.model, ds, row.p, row.d, a, "full")),
                            find_jct(runs, "fig7", label(row.model, ds, row.p, row.d, a, "oracle")));
      }
      std::string file = fmt::format("{}/fig7_{}_{}.dat", dir, row.model, ds);
      DP_RETURN_IF_ERROR(write_text_file(file, data));
      plot += fmt::format(
          "set title '{} {}P{}D, {}'\nset xlabel 'agents'\nset ylabel 'JCT (s)'\nset logscale x 2\n"
          "plot '{}' u 1:2 t 'Basic', '' u 1:3 t 'DualPath', '' u 1:4 t 'Oracle'\n",
          row.model, row.p, row.d, ds, file);
    }
  }
  plot += "unset multiplot\n";
  return run_gnuplot(plot);
}

Status write_fig8(const std::string& dir, const std::vector<PaperRun>& runs) {
  std::string plot = std::string(kPlotHeader) + fmt::format("set output '{}/fig8.png'\n", dir) +
                     "set terminal pngcairo size 1500,500\nset output '" + dir + "/fig8.png'\n"
                     "set multiplot layout 1,3 title 'Fig. 8 (simulated): DS 27B P/D sweep'\n";
  for (const char* ds : {"32k", "48k", "64k"}) {
    std::string data = "# agents basic_1P1D full_1P1D basic_2P1D full_2P1D basic_1P2D full_1P2D\n";
    for (int a : {512, 1024, 2048}) {
      data += fmt::format("{}", a);
      for (auto [p, d] : {std::pair{1, 1}, std::pair{2, 1}, std::pair{1, 2}})
        for (const char* m : {"basic", "full"})
          data += fmt::format(" {:.1f}", find_jct(runs, "fig8", label("ds27b", ds, p, d, a, m)));
      data += "\n";
    }
    std::string file = fmt::format("{}/fig8_{}.dat", dir, ds);
    DP_RETURN_IF_ERROR(write_text_file(file, data));
    plot += fmt::format(
        "set title 'DS 27B, {}'\nset xlabel 'agents'\nset ylabel 'JCT (s)'\nset logscale x 2\n"
        "plot '{}' u 1:2 t 'Basic 1P1D', '' u 1:3 t 'DualPath 1P1D', '' u 1:4 t 'Basic 2P1D', "
        "'' u 1:5 t 'DualPath 2P1D', '' u 1:6 t 'Basic 1P2D', '' u 1:7 t 'DualPath 1P2D'\n",
        ds, file);
  }
  plot += "unset multiplot\n";
  return run_gnuplot(plot);
}

Status write_fig9(const std::string& dir, const std::vector<PaperRun>& runs) {
  std::string plot = std::string(kPlotHeader) + "set terminal pngcairo size 1200,500\n" +
                     fmt::format("set output '{}/fig9.png'\n", dir) +
                     "set multiplot layout 1,2 title 'Fig. 9 (simulated): DS 660B 64K 2P4D, 1024 "
                     "agents'\n";
  for (const char* what : {"append", "gen"}) {
    std::string data = "# scale basic_s dualpath_s oracle_s\n";
    for (double s : {1.0, 1.5, 2.0, 3.0}) {
      std::string extra = fmt::format(" {}x{}", what, s);
      data += fmt::format("{} {:.1f} {:.1f} {:.1f}\n", s,
                          find_jct(runs, "fig9", label("ds660b", "64k", 2, 4, 1024, "basic", extra)),
                          find_jct(runs, "fig9", label("ds660b", "64k", 2, 4, 1024, "full", extra)),
                          find_jct(runs, "fig9", label("ds660b", "64k", 2, 4, 1024, "oracle", extra)));
    }
    std::string file = fmt::format("{}/fig9_{}.dat", dir, what);
    DP_RETURN_IF_ERROR(write_text_file(file, data));
    plot += fmt::format(
        "set title '{} length scaled'\nset xlabel 'scale'\nset ylabel 'JCT (s)'\nunset logscale\n"
        "plot '{}' u 1:2 t 'Basic', '' u 1:3 t 'DualPath', '' u 1:4 t 'Oracle'\n",
        what, file);
  }
  plot += "unset multiplot\n";
  return run_gnuplot(plot);
}

Status write_fig12(const std::string& dir, const std::vector<PaperRun>& runs) {
  std::string data = "# step sim_1024_pct sim_2048_pct paper_mean_pct\n";
  const std::pair<const char*, double> steps[] = {
      {"layerwise", -17.21}, {"dualpath", -38.19}, {"full", -45.62}};
  for (auto [mode, paper] : steps) {
    double pct[2];
    int i = 0;
    for (int a : {1024, 2048}) {
      double b = find_jct(runs, "fig12", label("ds660b", "64k", 2, 4, a, "basic"));
      pct[i++] = 100.0 * (find_jct(runs, "fig12", label("ds660b", "64k", 2, 4, a, mode)) / b - 1);
    }
    data += fmt::format("{} {:.2f} {:.2f} {:.2f}\n", mode, pct[0], pct[1], paper);
  }
  std::string file = dir + "/fig12.dat";
  DP_RETURN_IF_ERROR(write_text_file(file, data));
  return bar_chart(
      dir, "fig12", "Fig. 12 right (simulated): ablation, JCT change vs Basic (DS 660B 64K 2P4D)",
      /*stacked=*/false,
      fmt::format(
          "set ylabel 'JCT vs Basic (%)'\nset yrange [-60:0]\nset grid ytics\nset key bottom left\n"
          "plot '{}' u 2:xtic(1) t 'sim, 1024 agents', '' u 3 t 'sim, 2048 agents', "
          "'' u 4 t 'paper (mean of 1024, 2048)'\n",
          file));
}

Status write_table3(const std::string& dir, const std::vector<PaperRun>& runs) {
  std::string data = "# dataset 2P4D_2048_s 48P96D_49152_s\n";
  for (const char* ds : {"32k", "48k", "64k"}) {
    data += fmt::format("{} {:.1f} {:.1f}\n", ds,
                        find_jct(runs, "table3", label("ds660b", ds, 2, 4, 2048, "full")),
                        find_jct(runs, "table3", label("ds660b", ds, 48, 96, 49152, "full")));
  }
  data += "paper 3167 3201\n";
  std::string file = dir + "/table3.dat";
  DP_RETURN_IF_ERROR(write_text_file(file, data));
  return bar_chart(
      dir, "table3", "Table 3 offline (simulated): 2P4D / 2,048 agents vs 48P96D / 49,152 agents",
      /*stacked=*/false,
      fmt::format("set ylabel 'JCT (s)'\nset grid ytics\nset key top left\nset yrange [0:*]\n"
                  "plot '{}' u 2:xtic(1) t '2P4D, 2048 agents (16+32 GPUs)', "
                  "'' u 3 t '48P96D, 49152 agents (1,152 GPUs)'\n",
                  file));
}

// The SimResult of an online run by figure and label, or nullptr.
const sim::SimResult* find_online(const std::vector<PaperRun>& runs,
                                  const std::string& fig,
                                  const std::string& model,
                                  int p,
                                  int d,
                                  double aps,
                                  const char* mode) {
  const std::string l = fmt::format("{} 64k {}P{}D aps{} {}", model, p, d, aps, mode);
  for (const auto& r : runs)
    if (r.figure == fig && r.label == l) return &r.result;
  return nullptr;
}

Status write_fig10(const std::string& dir, const std::vector<PaperRun>& runs) {
  // One row per model: TTFT, TTST, TPOT (means over the reported window) against APS. Points that
  // miss the SLO are drawn as crosses (PAPER.md §9: the paper omits them from TTST/TPOT plots).
  std::string plot = std::string(kPlotHeader) + "set terminal pngcairo size 1500,900\n" +
                     fmt::format("set output '{}/fig10.png'\n", dir) +
                     "set multiplot layout 2,3 title 'Fig. 10 (simulated): online latency vs "
                     "arrival rate; crosses miss the SLO (mean TTFT <= 4 s, TPOT <= 50 ms)'\n";
  const std::pair<const char*, std::pair<int, int>> rows[] = {{"ds660b", {2, 4}},
                                                              {"ds27b", {1, 1}}};
  for (auto [model, pd] : rows) {
    std::string data = "# aps then per mode (basic, full, oracle): ttft_s ttst_s tpot_s slo_met\n";
    for (double aps : sim::fig10_aps(model)) {
      data += fmt::format("{}", aps);
      for (const char* m : {"basic", "full", "oracle"}) {
        const sim::SimResult* r = find_online(runs, "fig10", model, pd.first, pd.second, aps, m);
        if (r == nullptr) {
          data += " NaN NaN NaN 0";
          continue;
        }
        data += fmt::format(" {:.4f} {:.4f} {:.5f} {}", r->ttft.mean, r->ttst.mean, r->tpot.mean,
                            r->slo_met ? 1 : 0);
      }
      data += "\n";
    }
    std::string file = fmt::format("{}/fig10_{}.dat", dir, model);
    DP_RETURN_IF_ERROR(write_text_file(file, data));
    const char* what[] = {"TTFT (s)", "TTST (s)", "TPOT (s)"};
    for (int k = 0; k < 3; ++k) {
      plot += fmt::format(
          "set title '{} {}P{}D, 64k: {}'\nset xlabel 'APS'\nset ylabel '{}'\n"
          "unset logscale\nset yrange [0:*]\n",
          model, pd.first, pd.second, what[k], what[k]);
      if (k == 0) plot += "set yrange [0:8]\n";
      std::string series;
      const char* names[] = {"Basic", "DualPath", "Oracle"};
      for (int m = 0; m < 3; ++m) {
        const int col = 2 + 4 * m + k, met = 2 + 4 * m + 3;
        if (!series.empty()) series += ", ";
        series += fmt::format(
            "'{}' u 1:(${}==1?${}:1/0) w linespoints lc {} pt 7 t '{}', "
            "'' u 1:(${}==0?${}:1/0) w points lc {} pt 2 ps 1.5 notitle",
            file, met, col, m + 1, names[m], met, col, m + 1);
      }
      plot += "plot " + series + "\n";
    }
  }
  plot += "unset multiplot\n";
  return run_gnuplot(plot);
}

Status write_fig11(const std::string& dir, const std::vector<sim::PaperCapacity>& caps) {
  // Medians over the seeds searched, with each mode's and the ratio's range.
  std::string data =
      "# model basic_aps dualpath_aps oracle_aps dualpath_over_basic seeds basic_min basic_max "
      "dualpath_min dualpath_max ratio_min ratio_max (median capacities; the ratio is the median "
      "of the seeds' ratios)\n";
  for (const sim::Fig11Row& r : sim::fig11_rows(caps)) {
    data += fmt::format(
        "{} {:.4f} {:.4f} {:.4f} {:.3f} {} {:.4f} {:.4f} {:.4f} {:.4f} {:.3f} {:.3f}\n", r.model,
        r.basic.median, r.full.median, r.oracle.median, r.full_over_basic.median, r.seeds,
        r.basic.min, r.basic.max, r.full.min, r.full.max, r.full_over_basic.min,
        r.full_over_basic.max);
  }
  std::string file = dir + "/fig11.dat";
  DP_RETURN_IF_ERROR(write_text_file(file, data));
  return bar_chart(
      dir, "fig11",
      "Fig. 11 (simulated): SLO capacity, median over seeds (DualPath/Basic, paper: 2.25x, 1.67x)",
      /*stacked=*/false,
      fmt::format(
          "set ylabel 'capacity (APS)'\nset grid ytics\nset key top right\nset yrange [0:*]\n"
          "plot '{}' u 2:xtic(1) t 'Basic', '' u 3 t 'DualPath', '' u 4 t 'Oracle', "
          "'' u 0:3:(sprintf('%.2fx (%.2f-%.2f)', $5, $11, $12)) w labels offset 0,1 notitle\n",
          file));
}

Status write_fig12left(const std::string& dir, const std::vector<PaperRun>& runs) {
  std::string data = "# label schedule allocate read prefill (mean seconds)\n";
  for (const char* m : {"basic", "full"}) {
    for (double aps : sim::fig12left_aps()) {
      const sim::SimResult* r = find_online(runs, "fig12left", "ds660b", 2, 4, aps, m);
      if (r == nullptr) continue;
      const auto& b = r->ttft_breakdown;
      data += fmt::format("\"{} {}\" {:.4f} {:.4f} {:.4f} {:.4f}\n",
                          std::string(m) == "full" ? "DualPath" : "Basic", aps, b.schedule,
                          b.allocate, b.read, b.prefill);
    }
  }
  std::string file = dir + "/fig12left.dat";
  DP_RETURN_IF_ERROR(write_text_file(file, data));
  return bar_chart(
      dir, "fig12left",
      "Fig. 12 left (simulated): TTFT breakdown, DS 660B 2P4D 64k (mean s; x = mode "
      "and APS)",
      /*stacked=*/true,
      fmt::format("set boxwidth 0.6\nset ylabel 'TTFT (s)'\nset grid ytics\nset key top left\n"
                  "set yrange [0:*]\n"
                  "plot '{}' u 2:xtic(1) t 'Sch.', '' u 3 t 'A.', '' u 4 t 'R.', '' u 5 t 'PF.'\n",
                  file));
}

std::string checks_markdown(const std::vector<sim::PaperCheck>& checks) {
  std::string s =
      "| check | ours | paper | accepted | result | note |\n|---|---|---|---|---|---|\n";
  for (const auto& c : checks) {
    if (c.informational) {
      s += fmt::format("| {} | {:.3f} | {:.3f} | compared only ({:+.0f} %) | - | {} |\n", c.name,
                       c.ours, c.paper, 100 * (c.ours / c.paper - 1), c.note);
      continue;
    }
    s += fmt::format("| {} | {:.3f} | {:.3f} | [{:.3f}, {:.3f}] | {} | {} |\n", c.name, c.ours,
                     c.paper, c.low, c.high, c.pass ? "pass" : "**FAIL**", c.note);
  }
  return s;
}

int run(const PaperArgs& a) {
  sim::PaperOptions opt;
  if (!a.figures.empty()) opt.figures = a.figures;
  for (const auto& f : opt.figures) {
    const auto& names = sim::paper_figure_names();
    if (std::find(names.begin(), names.end(), f) == names.end())
      return usage_error(fmt::format("--figures: unknown figure '{}'; use {}", f,
                                     fmt::join(names, ", ")));
  }
  if (a.threads < 1 || a.threads > 64) {
    return usage_error(fmt::format("--threads {}: use 1 to 64 (simulations run in parallel; each "
                                   "takes one core and up to ~1 GB)",
                                   a.threads));
  }
  opt.threads = a.threads;
  if (a.capacity_seeds < 1 || a.capacity_seeds > 100) {
    return usage_error(fmt::format(
        "--capacity-seeds {}: use 1 to 100 (Fig. 11 searches each capacity at that many seeds and "
        "compares their median; default 7)",
        a.capacity_seeds));
  }
  opt.capacity_seeds = a.capacity_seeds;
  // The committed results are the full run on the committed calibration: a subset or an override
  // written there would silently replace them, so those runs name their own folder.
  if (!a.out && (!a.figures.empty() || a.calibration.any() || a.capacity_seeds != 7)) {
    return usage_error(fmt::format(
        "--out is required with --figures, --capacity-seeds or a calibration flag: the default, "
        "{}, holds the committed full run; e.g. --out /tmp/paper",
        kCommittedResults));
  }
  const std::string out = a.out.value_or(kCommittedResults);
  if (Status s = prepare_output_dir("--out", out); !s.is_ok()) return usage_error(s.message());
  if (a.calibration.any()) opt.adjust = [c = a.calibration](sim::SimConfig& cfg) { c.apply(cfg); };
  opt.on_run = [](const PaperRun& r, size_t done, size_t total) {
    if (r.result.online) {
      std::fprintf(stderr,
                   "dualpath paper: [%zu/%zu] %s %s: TTFT %.2f s, TPOT %.1f ms, SLO %s (%s; %.1f s "
                   "wall)\n",
                   done, total, r.figure.c_str(), r.label.c_str(), r.result.ttft.mean,
                   r.result.tpot.mean * 1e3, r.result.slo_met ? "met" : "missed",
                   r.result.stop_reason.c_str(), r.result.wall_s);
      return;
    }
    std::fprintf(stderr, "dualpath paper: [%zu/%zu] %s %s: JCT %.0f s (%.1f s wall)\n", done, total,
                 r.figure.c_str(), r.label.c_str(), r.result.jct_s, r.result.wall_s);
  };
  opt.on_capacity = [](const sim::PaperCapacity& c, size_t done, size_t total) {
    std::fprintf(stderr,
                 "dualpath paper: capacity [%zu/%zu] %s seed %llu: %.4f APS (%zu probes, %.1f s "
                 "wall)\n",
                 done, total, c.label.c_str(), static_cast<unsigned long long>(c.seed),
                 c.result.aps_capacity, c.result.probes.size(),
                 c.result.wall_s);
  };
  auto rep = sim::run_paper(opt);
  if (!rep.is_ok()) return usage_error(rep.status().message());

  nlohmann::json runs = nlohmann::json::array();
  for (const auto& r : rep->runs) {
    auto j = sim::result_to_json(r.result);
    j["figure"] = r.figure;
    j["label"] = r.label;
    j.erase("wall_s");  // keep the committed results byte-stable across reruns
    runs.push_back(j);
  }
  nlohmann::json capacities = nlohmann::json::array();
  for (const auto& c : rep->capacities) {
    nlohmann::json probes = nlohmann::json::array();
    for (const auto& p : c.result.probes)
      probes.push_back({{"aps", p.aps}, {"slo_met", p.slo_met}, {"stop_reason", p.stop_reason},
                        {"ttft_mean_s", p.ttft.mean}, {"tpot_mean_s", p.tpot.mean}});
    capacities.push_back({{"label", c.label},
                          {"seed", c.seed},
                          {"aps_capacity", c.result.aps_capacity},
                          {"aps_first_missed", c.result.aps_first_missed},
                          {"probes", probes}});
  }
  nlohmann::json checks = nlohmann::json::array();
  int failed = 0, compared = 0;
  for (const auto& c : rep->checks) {
    nlohmann::json j = {{"name", c.name}, {"ours", c.ours}, {"paper", c.paper}, {"pass", c.pass},
                        {"note", c.note}};
    if (c.informational) {
      j["informational"] = true;
      ++compared;
    } else {
      j["low"] = c.low;
      j["high"] = c.high;
      failed += c.pass ? 0 : 1;
    }
    checks.push_back(j);
  }
  Status s = write_text_file(
      out + "/results.json",
      nlohmann::json{{"runs", runs}, {"capacities", capacities}, {"checks", checks}}.dump(1) +
          "\n");
  if (!s.is_ok()) return usage_error(s.message());

  std::string md = checks_markdown(rep->checks);
  std::fputs(md.c_str(), stdout);
  const size_t n_checks = rep->checks.size() - static_cast<size_t>(compared);
  std::printf("%zu checks, %d failed; %d absolute values compared only\n", n_checks, failed,
              compared);
  if (!a.no_plots) {
    const std::pair<const char*, Status (*)(const std::string&, const std::vector<PaperRun>&)>
        plots[] = {{"fig7", write_fig7}, {"fig8", write_fig8}, {"fig9", write_fig9},
                   {"fig12", write_fig12}, {"table3", write_table3}};
    auto want = [&](const char* fig) {
      return std::find(opt.figures.begin(), opt.figures.end(), fig) != opt.figures.end();
    };
    for (auto [fig, fn] : plots) {
      if (!want(fig)) continue;
      Status ps = fn(out, rep->runs);
      if (!ps.is_ok()) return usage_error(fmt::format("plotting {}: {}", fig, ps.message()));
    }
    if (want("fig10")) {
      if (Status ps = write_fig10(out, rep->runs); !ps.is_ok())
        return usage_error(fmt::format("plotting fig10: {}", ps.message()));
    }
    if (want("fig11")) {
      if (Status ps = write_fig11(out, rep->capacities); !ps.is_ok())
        return usage_error(fmt::format("plotting fig11: {}", ps.message()));
    }
    if (want("fig12left")) {
      if (Status ps = write_fig12left(out, rep->runs); !ps.is_ok())
        return usage_error(fmt::format("plotting fig12left: {}", ps.message()));
    }
  }
  std::string readme =
      "# Simulated reproduction of the paper's experiments, offline and online\n\n"
      "Generated by `dualpath paper --out docs/results` (see docs/simulator.md and "
      "docs/calibration.md). Every number below is a simulation of this repository's model; the "
      "efficiency factors were fitted once or taken from published rates, as docs/calibration.md "
      "says, and everything else is a prediction.\n\n" +
      (a.calibration.any() ? std::string("**This run overrode calibration factors on the command "
                                         "line; it is not the committed calibration.**\n\n")
                           : std::string()) +
      "Checks are ratios, orderings and SLO verdicts; absolute seconds and GB are listed as "
      "\"compared only\" with their deviation, because the calibration's absolute speed differs "
      "from the paper's (docs/calibration.md says by how much and why). The online experiments "
      "(Fig. 10, 11, 12 left, Table 3 online, the working set) are predictions of the offline "
      "calibration: nothing was fitted to them. Every check that misses is explained, with its "
      "cause, in docs/calibration.md, section \"Online: predictions and misses\".\n\n" +
      md +
      fmt::format("\n{} checks, {} failed; {} absolute values compared only.\n\n", n_checks,
                  failed, compared) +
      "![Fig. 7](fig7.png)\n![Fig. 8](fig8.png)\n![Fig. 9](fig9.png)\n![Fig. 12](fig12.png)\n"
      "![Table 3](table3.png)\n![Fig. 10](fig10.png)\n![Fig. 11](fig11.png)\n"
      "![Fig. 12 left](fig12left.png)\n";
  s = write_text_file(out + "/README.md", readme);
  if (!s.is_ok()) return usage_error(s.message());
  return failed == 0 ? 0 : 1;
}

void setup(CLI::App& parent, int& exit_code) {
  auto args = std::make_shared<PaperArgs>();
  CLI::App* cmd = parent.add_subcommand(
      "paper",
      "Rerun the paper's experiments in the simulator, offline (Fig. 7, 8, 9, 12 right, Table 3)\n"
      "and online (Fig. 10, 11, 12 left, Table 3 online, the working set), compare each with the\n"
      "paper, and write results.json, data files, PNG figures and a README into --out. Exit\n"
      "status 1 when a check fails. Takes a few minutes on 2 cores.");
  cmd->add_option("--out", args->out,
                  "output folder (default docs/results, the committed run; required with "
                  "--figures or a calibration flag)");
  cmd->add_option("--figures", args->figures,
                  "subset: fig7 fig8 fig9 fig12 table3 fig10 fig11 fig12left table3online "
                  "workingset")
      ->delimiter(',');
  cmd->add_option("--threads", args->threads, "simulations run in parallel")->capture_default_str();
  cmd->add_option("--capacity-seeds", args->capacity_seeds,
                  "Fig. 11: search each capacity at this many seeds (1, 2, ...) and "
                  "compare the median; one seed's ratio moves ~3.5 % with the workload's draw")
      ->capture_default_str();
  cmd->add_flag("--no-plots", args->no_plots, "skip gnuplot");
  args->calibration.add_to(cmd);
  cmd->callback([args, &exit_code] { exit_code = run(*args); });
}

DP_REGISTER_COMMAND("", "paper", setup);

}  // namespace
}  // namespace dualpath::app
