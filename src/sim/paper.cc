#include "sim/paper.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <map>
#include <mutex>
#include <thread>

#include "workload/dataset_spec.h"
#include "workload/replay.h"

namespace dualpath::sim {
namespace {

bool wanted(const PaperOptions& o, const std::string& fig) {
  return std::find(o.figures.begin(), o.figures.end(), fig) != o.figures.end();
}

SimConfig base(const std::string& model, const std::string& dataset, int p, int d, int agents,
               Mode mode, uint64_t seed) {
  SimConfig c = *default_sim_config(model);
  c.dataset = dataset;
  c.prefill_nodes = p;
  c.decode_nodes = d;
  c.fit_ep_groups();
  c.agents = agents;
  c.mode = mode;
  c.seed = seed;
  return c;
}

std::string label_of(const SimConfig& c, const std::string& extra = {}) {
  return fmt::format("{} {} {} {} {}{}", c.model.name, c.dataset, c.pd_label(), c.agents,
                     mode_name(c.mode), extra);
}

}  // namespace

std::vector<PaperRun> paper_runs(const PaperOptions& o) {
  std::vector<PaperRun> runs;
  auto add = [&](const std::string& fig, SimConfig cfg, const std::string& extra = {}) {
    if (o.adjust) o.adjust(cfg);
    runs.push_back({fig, label_of(cfg, extra), std::move(cfg), {}});
  };
  const Mode fig7_modes[] = {Mode::kBasic, Mode::kFull, Mode::kOracle};
  if (wanted(o, "fig7")) {
    // PAPER.md §10.1: rows DS 27B (1P1D), DS 660B (2P4D), Qwen 32B (1P2D); columns 32K/48K/64K.
    struct Row { const char* model; int p, d; int agents[3]; };
    const Row rows[] = {{"ds27b", 1, 1, {512, 1024, 2048}},
                        {"ds660b", 2, 4, {1024, 2048, 4096}},
                        {"qwen32b", 1, 2, {128, 256, 512}}};
    for (const auto& row : rows)
      for (const char* ds : {"32k", "48k", "64k"})
        for (int agents : row.agents)
          for (Mode m : fig7_modes) add("fig7", base(row.model, ds, row.p, row.d, agents, m, o.seed));
  }
  if (wanted(o, "fig8")) {
    // PAPER.md §10.2: DS 27B, 1P1D / 2P1D / 1P2D, 512/1024/2048 agents, 32K/48K/64K.
    for (auto [p, d] : {std::pair{1, 1}, std::pair{2, 1}, std::pair{1, 2}})
      for (const char* ds : {"32k", "48k", "64k"})
        for (int agents : {512, 1024, 2048})
          for (Mode m : {Mode::kBasic, Mode::kFull})
            add("fig8", base("ds27b", ds, p, d, agents, m, o.seed));
  }
  if (wanted(o, "fig9")) {
    // PAPER.md §10.3: DS 660B, 64K, 1024 agents, append (or generation) x1, x1.5, x2, x3.
    for (const char* what : {"append", "gen"})
      for (double s : {1.0, 1.5, 2.0, 3.0})
        for (Mode m : fig7_modes) {
          SimConfig c = base("ds660b", "64k", 2, 4, 1024, m, o.seed);
          (std::string(what) == "append" ? c.append_scale : c.gen_scale) = s;
          add("fig9", c, fmt::format(" {}x{}", what, s));
        }
  }
  if (wanted(o, "fig12")) {
    // PAPER.md §10.5: the ablation at 1024 and 2048 agents.
    for (int agents : {1024, 2048})
      for (Mode m : {Mode::kBasic, Mode::kLayerwise, Mode::kDualPath, Mode::kFull, Mode::kOracle})
        add("fig12", base("ds660b", "64k", 2, 4, agents, m, o.seed));
  }
  if (wanted(o, "table3")) {
    // PAPER.md §10.7 offline: 2P4D with 2,048 agents vs 48P96D with 49,152. The dataset is not
    // stated, so all three are run.
    for (const char* ds : {"32k", "48k", "64k"}) {
      add("table3", base("ds660b", ds, 2, 4, 2048, Mode::kFull, o.seed));
      add("table3", base("ds660b", ds, 48, 96, 49152, Mode::kFull, o.seed));
    }
  }
  return runs;
}

Result<PaperReport> run_paper(const PaperOptions& o) {
  PaperReport rep;
  rep.runs = paper_runs(o);
  // Longest runs first, so that two workers finish together.
  std::vector<size_t> order(rep.runs.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return rep.runs[a].cfg.agents > rep.runs[b].cfg.agents;
  });
  std::atomic<size_t> next{0};
  std::atomic<size_t> done{0};
  std::mutex mu;  // guards `first_error` and the on_run callback
  Status first_error;
  auto worker = [&] {
    for (;;) {
      size_t k = next.fetch_add(1, std::memory_order_relaxed);  // a work counter only
      if (k >= order.size()) return;
      PaperRun& run = rep.runs[order[k]];
      auto r = run_experiment(run.cfg);
      std::lock_guard lock(mu);
      if (!r.is_ok()) {
        if (first_error.is_ok()) first_error = r.status().with_context(run.label);
        continue;
      }
      run.result = std::move(r).value();
      size_t n = done.fetch_add(1, std::memory_order_relaxed) + 1;
      if (o.on_run) o.on_run(run, n, rep.runs.size());
    }
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < std::max(1, o.threads); ++t) threads.emplace_back(worker);
  for (auto& t : threads) t.join();
  if (!first_error.is_ok()) return first_error;
  rep.checks = paper_checks(rep.runs);
  return rep;
}

std::vector<PaperCheck> paper_checks(const std::vector<PaperRun>& runs) {
  std::map<std::string, const SimResult*> by;
  for (const auto& r : runs) by[r.figure + "|" + r.label] = &r.result;
  auto jct = [&](const std::string& fig, const SimConfig& c, const std::string& extra = {}) {
    auto it = by.find(fig + "|" + label_of(c, extra));
    return it == by.end() ? std::nan("") : it->second->jct_s;
  };
  std::vector<PaperCheck> checks;
  auto check = [&](std::string name, double ours, double paper, double low, double high,
                   std::string note = {}) {
    if (std::isnan(ours)) return;
    checks.push_back({std::move(name), ours, paper, low, high, ours >= low && ours <= high,
                      std::move(note)});
  };
  auto rel = [&](std::string name, double ours, double paper, double tol, std::string note = {}) {
    check(std::move(name), ours, paper, paper * (1 - tol), paper * (1 + tol), std::move(note));
  };

  // Fig. 7: DS 660B 64K 2P4D speedups and the closeness to Oracle.
  const std::pair<int, double> fig7[] = {{1024, 1.84}, {2048, 1.87}, {4096, 1.87}};
  for (auto [agents, paper] : fig7) {
    auto b = base("ds660b", "64k", 2, 4, agents, Mode::kBasic, 1);
    auto f = b;
    f.mode = Mode::kFull;
    auto orc = b;
    orc.mode = Mode::kOracle;
    // The seed does not enter the label, so any seed's runs are found.
    double jb = jct("fig7", b), jf = jct("fig7", f), jo = jct("fig7", orc);
    rel(fmt::format("fig7 ds660b 64k {} JCT(basic)/JCT(full)", agents), jb / jf, paper, 0.15);
    check(fmt::format("fig7 ds660b 64k {} JCT(full)/JCT(oracle)", agents), jf / jo, 1.0, 0.0, 1.10,
          "DualPath within 10 % of the zero-I/O bound");
  }
  // Fig. 12 right: ablation, JCT change vs Basic in percent.
  for (int agents : {1024, 2048}) {
    auto b = base("ds660b", "64k", 2, 4, agents, Mode::kBasic, 1);
    double jb = jct("fig12", b);
    const std::pair<Mode, double> steps[] = {
        {Mode::kLayerwise, -17.21}, {Mode::kDualPath, -38.19}, {Mode::kFull, -45.62}};
    for (auto [m, paper] : steps) {
      auto c = b;
      c.mode = m;
      double pct = 100.0 * (jct("fig12", c) / jb - 1.0);
      check(fmt::format("fig12 {} agents {} JCT vs basic (%)", agents, mode_name(m)), pct, paper,
            paper - 8, paper + 8, "within 8 points");
    }
  }
  // Fig. 8: equal-storage-bandwidth equivalences (PAPER.md §10.2) and the mean speedup.
  {
    double speedup_sum = 0;
    int n = 0;
    double worst_eq[3] = {1, 1, 1};
    for (const char* ds : {"32k", "48k", "64k"}) {
      for (int agents : {512, 1024, 2048}) {
        auto J = [&](int p, int d, Mode m) {
          return jct("fig8", base("ds27b", ds, p, d, agents, m, 1));
        };
        double b11 = J(1, 1, Mode::kBasic), f11 = J(1, 1, Mode::kFull);
        double b21 = J(2, 1, Mode::kBasic), f21 = J(2, 1, Mode::kFull);
        double b12 = J(1, 2, Mode::kBasic), f12 = J(1, 2, Mode::kFull);
        if (std::isnan(b11)) continue;
        for (auto [b, f] : {std::pair{b11, f11}, std::pair{b21, f21}, std::pair{b12, f12}}) {
          speedup_sum += b / f;
          ++n;
        }
        const double eq[3] = {b11 / b12, f11 / b21, f21 / f12};
        for (int i = 0; i < 3; ++i) {
          if (std::abs(eq[i] - 1) > std::abs(worst_eq[i] - 1)) worst_eq[i] = eq[i];
        }
      }
    }
    if (n > 0) {
      rel("fig8 ds27b mean speedup basic/full over 27 points", speedup_sum / n, 1.64, 0.15);
      const char* names[3] = {"fig8 worst Basic 1P1D / Basic 1P2D", "fig8 worst DualPath 1P1D / Basic 2P1D",
                              "fig8 worst DualPath 2P1D / DualPath 1P2D"};
      for (int i = 0; i < 3; ++i)
        rel(names[i], worst_eq[i], 1.0, 0.10, "equal storage bandwidth performs alike");
    }
  }
  // Fig. 9: append scaling; the paper's Basic/DualPath ratios and the trend.
  {
    const std::pair<double, double> fig9[] = {{1.0, 1.83}, {1.5, 1.94}, {2.0, 2.00}, {3.0, 1.91}};
    for (auto [s, paper] : fig9) {
      auto b = base("ds660b", "64k", 2, 4, 1024, Mode::kBasic, 1);
      b.append_scale = s;
      auto f = b;
      f.mode = Mode::kFull;
      std::string extra = fmt::format(" appendx{}", s);
      rel(fmt::format("fig9 append x{} JCT(basic)/JCT(full)", s), jct("fig9", b, extra) /
                                                                      jct("fig9", f, extra),
          paper, 0.15);
    }
  }
  {
    auto ratio_at = [&](double s) {
      auto b = base("ds660b", "64k", 2, 4, 1024, Mode::kBasic, 1);
      b.append_scale = s;
      auto f = b;
      f.mode = Mode::kFull;
      std::string extra = fmt::format(" appendx{}", s);
      return jct("fig9", b, extra) / jct("fig9", f, extra);
    };
    double r2 = ratio_at(2.0), r3 = ratio_at(3.0);
    check("fig9 basic approaches full from append x2 to x3 (ratio x3 / ratio x2)", r3 / r2, 1.91 / 2.0,
          0.0, 1.0, "the bottleneck moves to GPU compute");
  }
  // Table 3 offline: 2P4D/2,048 agents vs 48P96D/49,152 agents. The paper does not name the
  // dataset. Its 3,167 s is compared scale-free, against the same system's Fig. 7 point (DS 660B
  // 64K 2P4D DualPath, 1,024 agents: 2,917 s), because the simulator's absolute seconds are not
  // fitted to the paper's (docs/calibration.md: its linear MFU is DeepSeek's published rate);
  // the dataset whose ratio comes closest is named, with its absolute JCT.
  {
    constexpr double kTarget = 3167.0 / 2917.0;  // Table 3 / Fig. 7 DualPath at 1,024 agents
    const double fig7_full = jct("fig7", base("ds660b", "64k", 2, 4, 1024, Mode::kFull, 1));
    std::string best_ds;
    double best = std::nan(""), best_abs = std::nan("");
    for (const char* ds : {"32k", "48k", "64k"}) {
      double small = jct("table3", base("ds660b", ds, 2, 4, 2048, Mode::kFull, 1));
      double large = jct("table3", base("ds660b", ds, 48, 96, 49152, Mode::kFull, 1));
      check(fmt::format("table3 {} JCT(48P96D, 49152)/JCT(2P4D, 2048)", ds), large / small,
            3201.0 / 3167.0, 0.95, 1.05, "within 5 % of each other");
      const double r = small / fig7_full;
      if (!std::isnan(r) &&
          (std::isnan(best) || std::abs(r - kTarget) < std::abs(best - kTarget))) {
        best = r;
        best_abs = small;
        best_ds = ds;
      }
    }
    rel(fmt::format("table3 JCT(2P4D, 2048) of the closest dataset ({}) / "
                    "JCT(fig7 full, 64k, 1024)",
                    best_ds),
        best, kTarget, 0.15,
        fmt::format("the paper does not say which dataset Table 3 used; ours {:.0f} s vs 3,167 s, "
                    "DualPath 64k 1,024 agents {:.0f} s vs 2,917 s",
                    best_abs, fig7_full));
  }
  return checks;
}

}  // namespace dualpath::sim
