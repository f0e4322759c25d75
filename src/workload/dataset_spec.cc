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
  if (spec.substr(0, 9) == "mooncake:") {
    return Status::invalid_argument(fmt::format(
        "dataset '{}' is a trace of timestamped requests, not of agent trajectories; dualpath sim "
        "replays it (workload.dataset = {}), dualpath workload summarises it; the live system "
        "and offline runs need 32k, 48k, 64k or weka:PATH",
        spec, spec));
  }
  return Status::invalid_argument(fmt::format(
      "unknown dataset '{}'; valid: 32k, 48k, 64k (PAPER.md Table 2 generator), weka:PATH "
      "(WEKA Claude-Code trace file) or mooncake:PATH (Mooncake FAST'25 requests, dualpath sim)",
      spec));
}

}  // namespace dualpath::workload
