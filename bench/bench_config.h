#pragma once
// One cluster file, both readers: the simulator's sections ([model], [hardware], [cluster],
// [workload], [scheduler], [online], ...) and the live system's ([store], [live], [transport],
// ...), so that `bench live` and `bench serve --dataset` run the simulator on the same cluster,
// model and workload as the live one, and every key is checked by its reader.

#include <string>

#include "dualpath/result.h"
#include "serve/serve_config.h"
#include "sim/sim_config.h"

namespace dualpath::bench {

struct BenchConfigs {
  sim::SimConfig sim;
  serve::ServeConfig live;
};

// Errors: no path (the simulator needs the file's model), an unreadable file, a bad key (named,
// with its value and the fix).
Result<BenchConfigs> load_bench_configs(const std::string& path);

}  // namespace dualpath::bench
