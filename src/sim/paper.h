#pragma once
// Experiment presets for the paper's offline figures (PAPER.md §10) and the checks of each
// against the paper's numbers. `dualpath paper` runs them and writes docs/results/.

#include <functional>
#include <string>
#include <vector>

#include "sim/experiment.h"

namespace dualpath::sim {

// One simulated point of a figure.
struct PaperRun {
  std::string figure;  // "fig7", "fig8", "fig9", "fig12", "table3"
  std::string label;   // e.g. "ds660b 64k 2P4D 1024 full"
  SimConfig cfg;
  SimResult result;
};

// One comparison with the paper: ours vs theirs, and whether it is within tolerance.
struct PaperCheck {
  std::string name;
  double ours = 0;
  double paper = 0;
  double low = 0, high = 0;  // the accepted range for `ours`
  bool pass = false;
  std::string note;
};

struct PaperReport {
  std::vector<PaperRun> runs;
  std::vector<PaperCheck> checks;
};

struct PaperOptions {
  std::vector<std::string> figures = {"fig7", "fig8", "fig9", "fig12", "table3"};
  int threads = 2;
  uint64_t seed = 1;
  // Applied to every run's config before it is simulated (e.g. a calibration factor to try).
  std::function<void(SimConfig&)> adjust;
  std::function<void(const PaperRun&, size_t done, size_t total)> on_run;
};

// Lists every run of the selected figures (without simulating them).
std::vector<PaperRun> paper_runs(const PaperOptions& options);
// Simulates the runs (in `threads` worker threads; results are independent of the count) and
// evaluates the checks.
Result<PaperReport> run_paper(const PaperOptions& options);
std::vector<PaperCheck> paper_checks(const std::vector<PaperRun>& runs);

}  // namespace dualpath::sim
