#pragma once
// The flags that describe one simulated cluster and workload, shared by `dualpath sim` (one run)
// and `dualpath capacity` (a search over the arrival rate): the config file, model, dataset,
// P/D, mode, seed, scaling, the online flags and the calibration overrides.

#include <CLI/CLI.hpp>

#include <optional>
#include <string>

#include "apps/dualpath/calibration_flags.h"
#include "apps/dualpath/online_flags.h"
#include "sim/sim_config.h"

namespace dualpath::app {

// Each flag is applied only when given (std::optional), so any given value is checked by
// SimConfig::validate() like the same key in a TOML file; none doubles as "unset".
struct SimFlags {
  std::optional<std::string> config_path;
  std::optional<std::string> model;
  std::optional<std::string> dataset;
  std::optional<std::string> pd;
  std::optional<std::string> mode;
  std::optional<std::string> pe_policy;
  std::optional<int> agents;  // offline runs only
  std::optional<int64_t> seed;
  std::optional<double> append_scale;
  std::optional<double> gen_scale;
  bool think_time = false;
  bool adaptive_pd = false;
  std::optional<double> switch_s;
  // Beyond the paper (issue 35): the DE DRAM tier and read-or-recompute.
  std::optional<std::string> dram_tier;  // bytes per decode node, e.g. 400G
  std::optional<double> dram_ttl_s;
  std::optional<std::string> recompute;  // never | auto | always
  std::optional<std::string> store_capacity;  // bytes, e.g. 2T
  std::optional<std::string> evict;           // lru | session
  std::optional<std::string> prefetch;        // never | always | predict
  OnlineFlags online;
  CalibrationFlags calibration;

  // `offline`: the command runs offline too (--agents); `with_aps`: it takes --aps.
  void add_to(CLI::App* cmd, bool offline, bool with_aps);
};

// Builds the config: the model's defaults, then the file, then the flags (flags win). Errors name
// the key or flag and the fix.
Result<sim::SimConfig> make_sim_config(const SimFlags& flags);

}  // namespace dualpath::app
