#pragma once
// Experiment presets for the paper's figures (PAPER.md §10), offline and online, and the checks
// of each against the paper's numbers. `dualpath paper` runs them and writes docs/results/.

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "sim/capacity.h"
#include "sim/experiment.h"

namespace dualpath::sim {

// One simulated point of a figure.
struct PaperRun {
  // Offline: "fig7", "fig8", "fig9", "fig12", "table3"; online: "fig10", "fig12left",
  // "table3online", "workingset".
  std::string figure;
  std::string label;  // e.g. "ds660b 64k 2P4D 1024 full", online "ds660b 64k 2P4D aps0.4 full"
  SimConfig cfg;
  SimResult result;
};

// One SLO-capacity search of Fig. 11, for one seed (each model and mode is searched at
// PaperOptions::capacity_seeds seeds; the checks take medians over them).
struct PaperCapacity {
  std::string label;  // e.g. "ds660b 64k 2P4D full"
  uint64_t seed = 1;
  SimConfig cfg;
  CapacityResult result;
};

// One comparison with the paper: ours vs theirs, and whether it is within tolerance.
struct PaperCheck {
  std::string name;
  double ours = 0;
  double paper = 0;
  double low = 0, high = 0;  // the accepted range for `ours`
  bool pass = false;
  std::string note;
  // A comparison of an absolute value the calibration does not target (seconds, GB): listed
  // with its deviation, never failed. Ratios and SLO verdicts are the checks.
  bool informational = false;
};

struct PaperReport {
  std::vector<PaperRun> runs;
  std::vector<PaperCapacity> capacities;
  std::vector<PaperCheck> checks;
};

// Every figure `dualpath paper` knows, in its default order.
const std::vector<std::string>& paper_figure_names();

struct PaperOptions {
  std::vector<std::string> figures = paper_figure_names();
  int threads = 2;
  uint64_t seed = 1;
  // Fig. 11's capacities are searched at seeds seed .. seed + capacity_seeds - 1 and compared by
  // their median: one seed's DualPath/Basic ratio moves by ~3.5 % (one standard deviation) with
  // the workload's draw (docs/calibration.md).
  int capacity_seeds = 7;
  // Applied to every run's config before it is simulated (e.g. a calibration factor to try).
  std::function<void(SimConfig&)> adjust;
  std::function<void(const PaperRun&, size_t done, size_t total)> on_run;
  std::function<void(const PaperCapacity&, size_t done, size_t total)> on_capacity;
};

// The APS grids of Fig. 10 (per model) and the three rates of Fig. 12 left.
const std::vector<double>& fig10_aps(const std::string& model);
const std::vector<double>& fig12left_aps();
std::string online_label(const SimConfig& c);

// Lists every run of the selected figures (without simulating them).
std::vector<PaperRun> paper_runs(const PaperOptions& options);
std::vector<PaperCapacity> paper_capacities(const PaperOptions& options);
// Simulates the runs (in `threads` worker threads; results are independent of the count) and
// evaluates the checks.
Result<PaperReport> run_paper(const PaperOptions& options);
std::vector<PaperCheck> paper_checks(const std::vector<PaperRun>& runs,
                                     const std::vector<PaperCapacity>& capacities = {});

// Fig. 11 over the seeds searched: each model's capacities per mode and the DualPath/Basic and
// DualPath/Oracle ratios, taken seed by seed (the modes of one seed replay the same agents and
// arrivals), each summarised as a Spread; NaN where a mode was not searched.
struct Spread {
  double median = NAN, min = NAN, max = NAN;
};
struct Fig11Row {
  std::string model;
  int p = 0, d = 0;
  int seeds = 0;
  Spread basic, full, oracle;             // capacities (APS)
  Spread full_over_basic, full_over_oracle;  // ratios, seed by seed
};
std::vector<Fig11Row> fig11_rows(const std::vector<PaperCapacity>& capacities);

}  // namespace dualpath::sim
