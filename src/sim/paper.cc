#include "sim/paper.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <map>
#include <thread>

#include "common/mutex.h"
#include "common/percentiles.h"
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
  c.scheduler.mode = mode;
  c.seed = seed;
  return c;
}

std::string label_of(const SimConfig& c, const std::string& extra = {}) {
  if (c.online.enabled()) return online_label(c) + extra;
  return fmt::format("{} {} {} {} {}{}", c.model.name, c.dataset, c.pd_label(), c.agents,
                     mode_name(c.scheduler.mode), extra);
}

// The online experiments (PAPER.md §10.4, §10.7, §10.8) use the 64K dataset: the paper does not
// name one, and its working-set figures (T = 616 s at 0.1 APS, 1,350 s at 0.45) fit 64K's
// 157 turns (PAPER.md §10.8).
constexpr const char* kOnlineDataset = "64k";

SimConfig online_base(const std::string& model, int p, int d, double aps, Mode mode,
                      uint64_t seed) {
  SimConfig c = base(model, kOnlineDataset, p, d, 1024, mode, seed);
  c.online.aps = aps;
  return c;
}

// Fig. 11's two rows: the default P/D of each model (PAPER.md §9).
struct OnlineRow {
  const char* model;
  int p, d;
};
constexpr OnlineRow kOnlineRows[] = {{"ds660b", 2, 4}, {"ds27b", 1, 1}};

// Runs job(0) .. job(n - 1) on `threads` threads (at least one), each index once; returns when
// all are done. Results do not depend on the thread count: each job writes its own slot.
template <class Job>
void run_parallel(size_t n, int threads, Job job) {
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (;;) {
      size_t k = next.fetch_add(1, std::memory_order_relaxed);  // a work counter only
      if (k >= n) return;
      job(k);
    }
  };
  std::vector<std::thread> pool;
  for (int t = 0; t < std::max(1, threads); ++t) pool.emplace_back(worker);
  for (auto& t : pool) t.join();
}

std::string capacity_label(const SimConfig& c) {
  return fmt::format("{} {} {} {}", c.model.name, c.dataset, c.pd_label(), mode_name(c.scheduler.mode));
}

// The SLO capacities (APS) the searches found for `model`'s P/D in `mode`, by seed.
std::map<uint64_t, double> capacities_by_seed(const std::vector<PaperCapacity>& caps,
                                              const std::string& model, int p, int d, Mode mode) {
  const std::string label = capacity_label(online_base(model, p, d, 1, mode, 1));
  std::map<uint64_t, double> out;
  for (const auto& c : caps)
    if (c.label == label) out[c.seed] = c.result.aps_capacity;
  return out;
}

// A comparison listed with its deviation and never failed (PaperCheck::informational); skipped
// when its figure was not run.
void add_informational(std::vector<PaperCheck>& checks, std::string name, double ours,
                       double paper, std::string note) {
  if (std::isnan(ours)) return;
  checks.push_back({std::move(name), ours, paper, std::nan(""), std::nan(""), true,
                    std::move(note), /*informational=*/true});
}

}  // namespace

const std::vector<std::string>& paper_figure_names() {
  static const std::vector<std::string> kNames = {"fig7",  "fig8",      "fig9",
                                                  "fig12", "table3",    "fig10",
                                                  "fig11", "fig12left", "table3online",
                                                  "workingset"};
  return kNames;
}

const std::vector<double>& fig10_aps(const std::string& model) {
  // Up to past each model's capacity, so that the SLO's edge is on the plot.
  static const std::vector<double> kDs660b = {0.05, 0.1,  0.15, 0.2,  0.25, 0.3,  0.35,
                                              0.4,  0.45, 0.5,  0.55, 0.6,  0.65, 0.7};
  static const std::vector<double> kDs27b = {0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7,
                                             0.8, 0.9, 1.0, 1.1, 1.2, 1.3, 1.4};
  return model == "ds660b" ? kDs660b : kDs27b;
}

const std::vector<double>& fig12left_aps() {
  // PAPER.md §10.4: Basic's scheduling share at three rates, the last 0.25 APS.
  static const std::vector<double> kAps = {0.1, 0.2, 0.25};
  return kAps;
}

std::string online_label(const SimConfig& c) {
  return fmt::format("{} {} {} aps{} {}", c.model.name, c.dataset, c.pd_label(), c.online.aps,
                     mode_name(c.scheduler.mode));
}

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
  if (wanted(o, "fig10")) {
    // PAPER.md §10.4: TTFT, TTST and TPOT against APS, Basic / DualPath / Oracle.
    for (const OnlineRow& row : kOnlineRows)
      for (double aps : fig10_aps(row.model))
        for (Mode m : fig7_modes) add("fig10", online_base(row.model, row.p, row.d, aps, m, o.seed));
  }
  if (wanted(o, "fig12left")) {
    for (double aps : fig12left_aps())
      for (Mode m : {Mode::kBasic, Mode::kFull})
        add("fig12left", online_base("ds660b", 2, 4, aps, m, o.seed));
  }
  if (wanted(o, "table3online")) {
    // PAPER.md §10.7 online: 2P4D at 0.4 APS and 44P88D at 8.8 APS (22 x the nodes and rate).
    add("table3online", online_base("ds660b", 2, 4, 0.4, Mode::kFull, o.seed));
    add("table3online", online_base("ds660b", 2, 4, 0.4, Mode::kBasic, o.seed));
    add("table3online", online_base("ds660b", 44, 88, 8.8, Mode::kFull, o.seed));
  }
  if (wanted(o, "workingset")) {
    // PAPER.md §10.8: DS 660B with DualPath, 69 GB at 0.1 APS and 681 GB at 0.45 APS.
    for (double aps : {0.1, 0.45})
      add("workingset", online_base("ds660b", 2, 4, aps, Mode::kFull, o.seed));
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

std::vector<PaperCapacity> paper_capacities(const PaperOptions& o) {
  std::vector<PaperCapacity> caps;
  if (!wanted(o, "fig11")) return caps;
  // PAPER.md §10.4, Fig. 11: SLO capacity per mode (DualPath/Basic 2.25x DS 660B, 1.67x DS 27B).
  for (const OnlineRow& row : kOnlineRows) {
    for (Mode m : {Mode::kBasic, Mode::kFull, Mode::kOracle}) {
      for (int k = 0; k < std::max(1, o.capacity_seeds); ++k) {
        const uint64_t seed = o.seed + static_cast<uint64_t>(k);
        SimConfig c = online_base(row.model, row.p, row.d, 1.0, m, seed);
        if (o.adjust) o.adjust(c);
        caps.push_back({capacity_label(c), seed, std::move(c), {}});
      }
    }
  }
  return caps;
}

std::vector<Fig11Row> fig11_rows(const std::vector<PaperCapacity>& caps) {
  auto spread = [](const std::vector<double>& v) {
    if (v.empty()) return Spread{};
    return Spread{median(v), *std::min_element(v.begin(), v.end()),
                 *std::max_element(v.begin(), v.end())};
  };
  auto values = [](const std::map<uint64_t, double>& m) {
    std::vector<double> v;
    for (const auto& [seed, x] : m) v.push_back(x);
    return v;
  };
  // Seed by seed: the modes of one seed replay the same agents arriving at the same times.
  auto ratios = [](const std::map<uint64_t, double>& num, const std::map<uint64_t, double>& den) {
    std::vector<double> v;
    for (const auto& [seed, x] : num) {
      auto it = den.find(seed);
      if (it != den.end()) v.push_back(x / it->second);
    }
    return v;
  };
  // One row per model of kOnlineRows, in its order (NaN where it was not searched).
  std::vector<Fig11Row> rows;
  for (const OnlineRow& r : kOnlineRows) {
    const auto b = capacities_by_seed(caps, r.model, r.p, r.d, Mode::kBasic);
    const auto f = capacities_by_seed(caps, r.model, r.p, r.d, Mode::kFull);
    const auto o = capacities_by_seed(caps, r.model, r.p, r.d, Mode::kOracle);
    Fig11Row row;
    row.model = r.model;
    row.p = r.p;
    row.d = r.d;
    row.seeds = static_cast<int>(std::max({b.size(), f.size(), o.size()}));
    row.basic = spread(values(b));
    row.full = spread(values(f));
    row.oracle = spread(values(o));
    row.full_over_basic = spread(ratios(f, b));
    row.full_over_oracle = spread(ratios(f, o));
    rows.push_back(row);
  }
  return rows;
}

Result<PaperReport> run_paper(const PaperOptions& o) {
  PaperReport rep;
  rep.runs = paper_runs(o);
  rep.capacities = paper_capacities(o);
  // Longest runs first, so that two workers finish together: offline by agents, online by the
  // agents that arrive in a typical ~3,000 s run; the capacity searches (several runs each) last.
  auto cost = [&](size_t i) {
    const SimConfig& c = rep.runs[i].cfg;
    return c.online.enabled() ? c.online.aps * 3000 : static_cast<double>(c.agents);
  };
  std::vector<size_t> order(rep.runs.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return cost(a) > cost(b); });
  // What the worker threads share; `mu` also serialises the progress callbacks.
  struct Shared {
    Mutex mu;
    Status first_error DP_GUARDED_BY(mu);
    size_t runs_done DP_GUARDED_BY(mu) = 0;
    size_t caps_done DP_GUARDED_BY(mu) = 0;
  } shared;
  run_parallel(order.size(), o.threads, [&](size_t k) {
    PaperRun& run = rep.runs[order[k]];
    auto r = run_experiment(run.cfg);
    MutexLock lock(shared.mu);
    if (!r.is_ok()) {
      if (shared.first_error.is_ok()) shared.first_error = r.status().with_context(run.label);
      return;
    }
    run.result = std::move(r).value();
    if (o.on_run) o.on_run(run, ++shared.runs_done, rep.runs.size());
  });
  {
    MutexLock lock(shared.mu);
    if (!shared.first_error.is_ok()) return shared.first_error;
  }
  run_parallel(rep.capacities.size(), o.threads, [&](size_t k) {
    PaperCapacity& cap = rep.capacities[k];
    auto r = find_capacity(cap.cfg);
    MutexLock lock(shared.mu);
    if (!r.is_ok()) {
      if (shared.first_error.is_ok()) shared.first_error = r.status().with_context(cap.label);
      return;
    }
    cap.result = std::move(r).value();
    if (o.on_capacity) o.on_capacity(cap, ++shared.caps_done, rep.capacities.size());
  });
  {
    MutexLock lock(shared.mu);
    if (!shared.first_error.is_ok()) return shared.first_error;
  }
  rep.checks = paper_checks(rep.runs, rep.capacities);
  return rep;
}

namespace {
void online_checks(const std::vector<PaperRun>& runs, const std::vector<PaperCapacity>& caps,
                   std::vector<PaperCheck>& checks);
}  // namespace

std::vector<PaperCheck> paper_checks(const std::vector<PaperRun>& runs,
                                     const std::vector<PaperCapacity>& capacities) {
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
    f.scheduler.mode = Mode::kFull;
    auto orc = b;
    orc.scheduler.mode = Mode::kOracle;
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
      c.scheduler.mode = m;
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
      f.scheduler.mode = Mode::kFull;
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
      f.scheduler.mode = Mode::kFull;
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
  online_checks(runs, capacities, checks);

  // Where Fig. 11's DS 660B ratio comes from, scale-free. (1) Each mode's SLO capacity over its
  // own offline throughput at 4,096 agents (JCT(4096) / 4096 seconds per agent): the capacity
  // ratio DualPath/Basic is Fig. 7's 4,096 ratio times the ratio of these two rows. (2) The same
  // over the offline *marginal* cost of an agent, (JCT(4096) - JCT(1024)) / 3,072: the saturated
  // throughput, without the part of a JCT that does not grow with the agent count (the longest
  // agents' chains, the first turns before anything overlaps). The capacity ratio is then the
  // marginal JCT ratio Basic/DualPath times the ratio of the two (2) rows. The paper's values are
  // derived from approximate figure readings (DualPath ~0.45 APS, Basic 0.45 / 2.25, Fig. 7's
  // 5,365 / 19,309 and 2,917 / 10,312 s): informational.
  {
    struct Row {
      Mode mode;
      const char* name;
      double paper_cap, paper_1024, paper_4096;
    };
    const Row rows[] = {{Mode::kBasic, "Basic", 0.2, 5365.0, 19309.0},
                        {Mode::kFull, "DualPath", 0.45, 2917.0, 10312.0}};
    double marginal[2], paper_marginal[2];
    const Fig11Row ds660b = fig11_rows(capacities).front();  // kOnlineRows[0]: DS 660B 2P4D
    for (size_t i = 0; i < 2; ++i) {
      const Row& row = rows[i];
      const double j1 = jct("fig7", base("ds660b", "64k", 2, 4, 1024, row.mode, 1));
      const double j4 = jct("fig7", base("ds660b", "64k", 2, 4, 4096, row.mode, 1));
      const double cap = row.mode == Mode::kBasic ? ds660b.basic.median : ds660b.full.median;
      marginal[i] = (j4 - j1) / 3072;
      paper_marginal[i] = (row.paper_4096 - row.paper_1024) / 3072;
      add_informational(
          checks,
          fmt::format("fig11 ds660b 2P4D {} capacity over its offline rate at 4,096 agents",
                      row.name),
          cap * j4 / 4096, row.paper_cap * row.paper_4096 / 4096,
          "capacity x JCT(4096)/4096; DualPath/Basic capacity = fig7 4096 ratio x "
          "DualPath row / Basic row (derived from figure readings)");
      add_informational(checks,
                        fmt::format("fig11 ds660b 2P4D {} capacity over its offline marginal "
                                    "rate (1,024 to 4,096 agents)",
                                    row.name),
                        cap * marginal[i], row.paper_cap * paper_marginal[i],
                        "capacity x (JCT(4096) - JCT(1024))/3072; DualPath/Basic capacity = "
                        "fig7 marginal ratio x DualPath row / Basic row (derived from figure "
                        "readings)");
    }
    add_informational(checks,
                      "fig7 ds660b 64k marginal JCT ratio Basic/DualPath (1,024 to 4,096 agents)",
                      marginal[0] / marginal[1], paper_marginal[0] / paper_marginal[1],
                      "(JCT(4096) - JCT(1024)) of Basic over DualPath's: the saturated "
                      "throughput ratio that Fig. 11's capacity ratio follows (derived from "
                      "figure readings)");
  }
  return checks;
}

}  // namespace dualpath::sim

namespace dualpath::sim {
namespace {

// The online checks (PAPER.md §10.4, §10.7, §10.8). Absolute seconds and GB are informational:
// the offline calibration runs 17-28 % faster than the paper in absolute terms
// (docs/calibration.md), so ratios, orderings and SLO verdicts are what is checked.
void online_checks(const std::vector<PaperRun>& runs, const std::vector<PaperCapacity>& caps,
                   std::vector<PaperCheck>& checks) {
  std::map<std::string, const SimResult*> by;
  for (const auto& r : runs) by[r.figure + "|" + r.label] = &r.result;
  auto get = [&](const std::string& fig, const char* model, int p, int d, double aps,
                 Mode m) -> const SimResult* {
    auto it = by.find(fig + "|" + online_label(online_base(model, p, d, aps, m, 1)));
    return it == by.end() ? nullptr : it->second;
  };
  auto check = [&](std::string name, double ours, double paper, double low, double high,
                   std::string note = {}) {
    if (std::isnan(ours)) return;
    checks.push_back({std::move(name), ours, paper, low, high, ours >= low && ours <= high,
                      std::move(note)});
  };
  auto rel = [&](std::string name, double ours, double paper, double tol, std::string note = {}) {
    check(std::move(name), ours, paper, paper * (1 - tol), paper * (1 + tol), std::move(note));
  };
  auto info = [&](std::string name, double ours, double paper, std::string note) {
    add_informational(checks, std::move(name), ours, paper, std::move(note));
  };

  // Fig. 11: SLO capacity and its ratios, as medians over the seeds searched.
  if (!caps.empty()) {
    const double paper_ratio[] = {2.25, 1.67};
    double ratio_sum = 0;
    int n = 0;
    const std::vector<Fig11Row> rows = fig11_rows(caps);
    for (size_t i = 0; i < rows.size(); ++i) {
      const Fig11Row& row = rows[i];
      const std::string seeds =
          row.seeds > 1 ? fmt::format("median of {} seeds", row.seeds) : std::string("one seed");
      rel(fmt::format("fig11 {} {}P{}D capacity DualPath/Basic", row.model, row.p, row.d),
          row.full_over_basic.median, paper_ratio[i], 0.15,
          fmt::format("{}, {:.3f}-{:.3f}; capacities {:.3f} / {:.3f} APS (Oracle {:.3f})", seeds,
                      row.full_over_basic.min, row.full_over_basic.max, row.full.median,
                      row.basic.median, row.oracle.median));
      if (i == 0) {
        check(fmt::format("fig11 {} {}P{}D capacity DualPath/Oracle", row.model, row.p, row.d),
              row.full_over_oracle.median, 1.0, 0.85, 1.02,
              fmt::format("DualPath near the zero-I/O bound (2 % search resolution; {}, lowest "
                          "{:.3f})",
                          seeds, row.full_over_oracle.min));
        info("fig11 ds660b 2P4D DualPath capacity (APS)", row.full.median, 0.45,
             "the paper's DualPath tracks Oracle up to about 0.45 APS; our absolute throughput "
             "runs above the paper's");
      }
      if (!std::isnan(row.full_over_basic.median)) {
        ratio_sum += row.full_over_basic.median;
        ++n;
      }
    }
    if (n == 2) rel("fig11 mean capacity ratio DualPath/Basic", ratio_sum / 2, 1.96, 0.15);
  }

  // Fig. 10: DualPath tracks Oracle up to 0.45 APS on DS 660B; TPOT and TTST as Basic's.
  {
    double worst_track = 0, worst_tpot = 1, worst_ttst = 1;
    bool any = false;
    for (double aps : fig10_aps("ds660b")) {
      const SimResult* f = get("fig10", "ds660b", 2, 4, aps, Mode::kFull);
      const SimResult* o = get("fig10", "ds660b", 2, 4, aps, Mode::kOracle);
      const SimResult* b = get("fig10", "ds660b", 2, 4, aps, Mode::kBasic);
      if (f == nullptr || o == nullptr || b == nullptr) continue;
      any = true;
      if (aps <= 0.45 + 1e-9) worst_track = std::max(worst_track, f->ttft.mean / o->ttft.mean);
      if (f->slo_met && b->slo_met) {
        const double tp = f->tpot.mean / b->tpot.mean, ts = f->ttst.mean / b->ttst.mean;
        if (std::abs(tp - 1) > std::abs(worst_tpot - 1)) worst_tpot = tp;
        if (std::abs(std::log(ts)) > std::abs(std::log(worst_ttst))) worst_ttst = ts;
      }
    }
    if (any) {
      check("fig10 ds660b worst TTFT(DualPath)/TTFT(Oracle) up to 0.45 APS", worst_track, 1.0,
            1.0 - 1e-9, 1.15, "DualPath tracks Oracle up to about 0.45 APS (within 15 %)");
      rel("fig10 ds660b worst TPOT(DualPath)/TPOT(Basic) where both meet the SLO", worst_tpot,
          1.0, 0.05, "DualPath adds no decode overhead");
      check("fig10 ds660b worst TTST(DualPath)/TTST(Basic) where both meet the SLO", worst_ttst,
            1.0, 1.0 / 1.5, 1.5, "TTST comparable to Basic (within 1.5x either way)");
    }
  }

  // Fig. 12 left: Basic's scheduling share explodes with APS; DualPath's parts stay flat.
  {
    const auto& aps = fig12left_aps();
    const SimResult* b0 = get("fig12left", "ds660b", 2, 4, aps.front(), Mode::kBasic);
    const SimResult* b2 = get("fig12left", "ds660b", 2, 4, aps.back(), Mode::kBasic);
    const SimResult* f0 = get("fig12left", "ds660b", 2, 4, aps.front(), Mode::kFull);
    const SimResult* f2 = get("fig12left", "ds660b", 2, 4, aps.back(), Mode::kFull);
    auto share = [](const SimResult* r) {
      return r->ttft_breakdown.total() > 0 ? r->ttft_breakdown.schedule / r->ttft_breakdown.total()
                                           : 0.0;
    };
    if (b0 != nullptr && b2 != nullptr && f0 != nullptr && f2 != nullptr) {
      check("fig12left Basic scheduling share at 0.25 APS", share(b2), 0.73, 0.58, 0.88,
            "paper ~73 % (figure, approx.); within 15 points");
      check("fig12left Basic scheduling share, 0.25 / 0.1 APS", share(b2) / share(b0),
            0.73 / 0.21, 1.5, 1e9, "Basic's queueing grows with the rate (paper 21 % -> 73 %)");
      check("fig12left DualPath TTFT, 0.25 / 0.1 APS", f2->ttft.mean / f0->ttft.mean, 1.0, 0.8,
            1.25, "DualPath's parts stay flat (within 25 %)");
      info("fig12left DualPath allocation share at 0.25 APS",
           f2->ttft_breakdown.total() > 0 ? f2->ttft_breakdown.allocate / f2->ttft_breakdown.total()
                                          : 0.0,
           0.06, "paper ~6 % (figure, approx.)");
    }
  }

  // Table 3 online.
  {
    const SimResult* f = get("table3online", "ds660b", 2, 4, 0.4, Mode::kFull);
    const SimResult* b = get("table3online", "ds660b", 2, 4, 0.4, Mode::kBasic);
    const SimResult* big = get("table3online", "ds660b", 44, 88, 8.8, Mode::kFull);
    if (f != nullptr && b != nullptr) {
      check("table3online 2P4D 0.4 APS DualPath meets the SLO", f->slo_met ? 1 : 0, 1, 1, 1);
      check("table3online 2P4D 0.4 APS Basic misses the SLO", b->slo_met ? 0 : 1, 1, 1, 1);
      rel("table3online 2P4D 0.4 APS DualPath TPOT (s)", f->tpot.mean, 0.039, 0.15);
      info("table3online 2P4D 0.4 APS DualPath TTFT (s)", f->ttft.mean, 1.739,
           "absolute seconds; the calibration runs faster than the paper (docs/calibration.md)");
      info("table3online 2P4D 0.4 APS DualPath TTST (s)", f->ttst.mean, 0.228,
           "the first decode step after the DE's H2D copy; the paper's includes what we do not "
           "model (docs/calibration.md)");
    }
    if (f != nullptr && big != nullptr) {
      check("table3online 44P88D 8.8 APS DualPath meets the SLO", big->slo_met ? 1 : 0, 1, 1, 1);
      check("table3online TTFT(44P88D, 8.8 APS)/TTFT(2P4D, 0.4 APS)", big->ttft.mean / f->ttft.mean,
            1.847 / 1.739, 0.85, 1.15, "22x the nodes and rate at the same latency (within 15 %)");
      rel("table3online 44P88D 8.8 APS DualPath TPOT (s)", big->tpot.mean, 0.036, 0.15);
    }
  }

  // Working set (PAPER.md §10.8).
  {
    const SimResult* lo = get("workingset", "ds660b", 2, 4, 0.1, Mode::kFull);
    const SimResult* hi = get("workingset", "ds660b", 2, 4, 0.45, Mode::kFull);
    if (lo != nullptr && hi != nullptr) {
      rel("workingset formula, 0.45 / 0.1 APS", hi->working_set_formula_bytes /
                                                    lo->working_set_formula_bytes,
          681.0 / 69.0, 0.15, "aps * T * len / 2: the rate and the agents' lifetime grow together");
      for (auto [r, aps, paper] : {std::tuple{lo, 0.1, 69.0}, std::tuple{hi, 0.45, 681.0}}) {
        info(fmt::format("workingset formula at {} APS (GB)", aps),
             r->working_set_formula_bytes / 1e9, paper,
             fmt::format("T = {:.0f} s; measured (KV of the running agents) {:.0f} GB",
                         r->agent_time_mean_s, r->working_set_bytes / 1e9));
      }
    }
  }
}

}  // namespace
}  // namespace dualpath::sim
