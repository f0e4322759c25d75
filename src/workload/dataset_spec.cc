#include "workload/dataset_spec.h"

#include <fmt/format.h>

#include <string>

#include "workload/table2.h"
#include "workload/weka_reader.h"

namespace dualpath::workload {

Result<Dataset> load_dataset(std::string_view spec, uint64_t seed) {
  constexpr std::string_view kWeka = "weka:";
  if (spec.substr(0, kWeka.size()) == kWeka) {
    const std::string path(spec.substr(kWeka.size()));
    if (path.empty()) {
      return Status::invalid_argument(
          "dataset 'weka:' names no file; use weka:PATH, e.g. "
          "weka:../shared/traces/weka_claude_code/weka_traces_compact.jsonl");
    }
    return read_weka(path);
  }
  if (find_table2_target(spec) != nullptr) return generate_table2(spec, seed);
  return Status::invalid_argument(fmt::format(
      "unknown dataset '{}'; valid: 32k, 48k, 64k (PAPER.md Table 2 generator) or weka:PATH "
      "(WEKA Claude-Code trace file)",
      spec));
}

}  // namespace dualpath::workload
