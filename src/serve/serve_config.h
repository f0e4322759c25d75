#pragma once
// ServeConfig: what the scheduler service reads from a dualpath TOML config: the live system's
// sections (engine/engine_config.h: [model], [cluster], [store], [live], [transport],
// [emulation], [hardware], [efficiency]) and the service's own keys of [scheduler], the
// section the simulator's scheduler reads too (it shares mode, fetch_interval_ms, alpha_s,
// beta_s and z_factor with it):
//
//   [scheduler]
//   mode = "full"               # full (DualPath), basic (PE reads only, round robin), oracle
//   host = "127.0.0.1"          # where nodes connect (nothing binds a non-loopback address
//   port = 8100                 #   unless asked); port 0: any free port
//   report_interval_ms = 100    # how often nodes send their load report (their lease)
//   lease_ttl_ms = 1000         # a node whose reports stop this long is dead
//   fetch_interval_ms = 50      # how often the engine groups fetch work (PAPER.md §8)
//   register_timeout_s = 120    # how long `serve` waits for the config's nodes
//   max_attempts = 4            # a turn's tries (retries and migrations included)
//   alpha_s = 3  beta_s = 5  z_factor = 1.05
//
// Errors name the key, the value and the fix. Thread-compatible (a value type).

#include <cstdint>
#include <string>
#include <vector>

#include "common/config.h"
#include "dualpath/result.h"
#include "dualpath/units.h"
#include "engine/engine_config.h"
#include "sched/cluster_scheduler.h"

namespace dualpath::serve {

// The live system's modes, named as the simulator's (sim/sim_config.h) for the same policy.
enum class ServeMode { kBasic, kFull, kOracle, kSplit };
std::string_view serve_mode_name(ServeMode m);
Result<ServeMode> parse_serve_mode(std::string_view name);

struct SchedulerSettings {
  ServeMode mode = ServeMode::kFull;
  std::string host = "127.0.0.1";
  uint16_t port = 8100;
  Duration report_interval = std::chrono::milliseconds(100);
  Duration lease_ttl = std::chrono::milliseconds(1000);
  Duration fetch_interval = std::chrono::milliseconds(50);
  Duration register_timeout = std::chrono::seconds(120);
  int max_attempts = 4;
  double alpha_s = 3.0;
  double beta_s = 5.0;
  double z_factor = 1.05;
  double quota_s = 0.3;  // for beta's typical batch (sched::derive_pe_params)
  int64_t split_min_tokens = 1024;  // mode split: a smaller part is not split off (split_read)
  sched::PePolicy pe_policy = sched::PePolicy::kPaper;  // how Algorithm 1 ranks PE engines
};

struct ServeConfig {
  engine::EngineConfig engine;
  SchedulerSettings scheduler;
  std::string origin = "<defaults>";  // the config file, for messages
  // The storage NIC's device ("mlx5_0:1"; the guide's [storage_node] rdma_device and
  // rdma_port), for `dualpath doctor`'s checks; empty when the config does not name it.
  std::string storage_device;
  // What the guide's keys mapped onto, and those with no effect here (serve_guide.h); printed
  // as `warning:` lines by `serve` and `doctor`.
  std::vector<std::string> warnings;

  // The engine policy and read-path policy of the mode (as the simulator's modes map them).
  sched::EnginePolicy engine_policy() const;
  sched::PathPolicy path_policy() const;
};

// Reads the live system's sections and the service's [scheduler] keys from `file` (other
// sections are left to the simulator's reader: call file.finish() once every reader has run).
Status apply_serve_config(Config& file, ServeConfig& cfg);

// Reads a config file (empty path: the embedded defaults: the tiny CPU model on 1P2D with a
// temporary store) and validates it. The seed deployment guide's sections are read too
// (serve_guide.h). Unknown keys are errors, except the simulator's sections
// and keys, which it reads from the same file.
Result<ServeConfig> load_serve_config(const std::string& path);
// The same without the checks against this machine (data paths exist, sizes fit): what
// `dualpath doctor` reads before it reports those checks one by one.
Result<ServeConfig> read_serve_config(const std::string& path);

}  // namespace dualpath::serve
