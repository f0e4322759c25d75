#pragma once
// PAPER.md Table 1: cache-compute ratios (GB/PFLOP) at 16K..64K context, append 429.

#include <string>
#include <vector>

namespace dualpath::model {

struct Table1Row {
  std::string preset;       // our model preset
  std::string paper_model;  // the paper's row
  double paper_low = 0;     // the paper's range at 16K
  double paper_high = 0;    // ... and at 64K
  double ours_16k = 0;
  double ours_32k = 0;
  double ours_64k = 0;
  // Relative deviation of our 16K and 64K values from the paper's range ends.
  double dev_low() const { return ours_16k / paper_low - 1.0; }
  double dev_high() const { return ours_64k / paper_high - 1.0; }
};

std::vector<Table1Row> table1();

}  // namespace dualpath::model
