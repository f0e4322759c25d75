#include "model/table1.h"

#include "model/cost_model.h"

namespace dualpath::model {

std::vector<Table1Row> table1() {
  struct Ref {
    const char* preset;
    const char* paper_model;
    double low, high;
  };
  // PAPER.md §1 Table 1 (paper): append 429, context 16K -> 64K.
  static const Ref kRefs[] = {
      {"qwen32b", "Qwen2.5-32B (FP16)", 117, 267},
      {"gptoss120b", "GPT-OSS-120B", 47, 95},
      {"qwen3_235b", "Qwen3-235B-A22B", 39, 60},
      {"ds660b", "DeepSeek-V3.2 660B", 13, 36},
      {"dsv3", "DeepSeek-V3 660B", 4.8, 5.8},
  };
  std::vector<Table1Row> rows;
  auto hw = hardware_preset("h800");
  for (const auto& r : kRefs) {
    auto m = model_preset(r.preset);
    if (!m.is_ok() || !hw.is_ok()) continue;
    CostModel cm(*m, *hw);
    Table1Row row;
    row.preset = r.preset;
    row.paper_model = r.paper_model;
    row.paper_low = r.low;
    row.paper_high = r.high;
    row.ours_16k = cm.cache_compute_ratio(16 * 1024);
    row.ours_32k = cm.cache_compute_ratio(32 * 1024);
    row.ours_64k = cm.cache_compute_ratio(64 * 1024);
    rows.push_back(row);
  }
  return rows;
}

}  // namespace dualpath::model
