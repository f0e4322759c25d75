#pragma once
// load_dataset(): the `--dataset` flag of `dualpath sim` / `dualpath workload`.
//   32k | 48k | 64k   the Table-2 generator (500 trajectories, seeded)
//   weka:PATH         the WEKA Claude-Code sessions at PATH (read_weka, default options)

#include <cstdint>
#include <string_view>

#include "dualpath/result.h"
#include "workload/trajectory.h"

namespace dualpath::workload {

// The valid spec forms, for help texts: "32k|48k|64k|weka:PATH".
inline constexpr std::string_view kDatasetSpecHelp = "32k|48k|64k|weka:PATH|mooncake:PATH";

// Errors: an unknown spec (invalid_argument listing the valid ones), or the generator's /
// reader's error.
Result<Dataset> load_dataset(std::string_view spec, uint64_t seed);

}  // namespace dualpath::workload
