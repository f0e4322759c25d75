#pragma once
// ServeConfig: what the scheduler service reads from a dualpath TOML config: the live system's
// sections (engine/engine_config.h: [model], [cluster], [store], [live], [transport],
// [emulation], [hardware], [efficiency]) and the service's own keys of [scheduler], the
// section the simulator's scheduler reads too (it shares mode, fetch_interval_ms, alpha_s,
// beta_s and z_factor with it):
//
//   [scheduler]
//   mode = "full"               # full (DualPath), basic (PE reads only, round robin), oracle
//   host = "127.0.0.1"          # where nodes connect (a non-loopback address needs the
//   port = 8100                 #   cluster credential); port 0: any free port
//   cluster_key = "FILE"        # the cluster credential (`dualpath keygen`): mutual TLS
//   report_interval_ms = 100    # how often nodes send their load report (their lease)
//   lease_ttl_ms = 1000         # a node whose reports stop this long is dead
//   fetch_interval_ms = 50      # how often the engine groups fetch work (PAPER.md §8)
//   register_timeout_s = 120    # how long `serve` waits for the config's nodes
//   max_attempts = 4            # a turn's tries (retries and migrations included)
//   alpha_s = 3  beta_s = 5  z_factor = 1.05
//
// Errors name the key, the value and the fix. Thread-compatible (a value type).

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "common/config.h"
#include "dualpath/result.h"
#include "dualpath/units.h"
#include "engine/engine_config.h"
#include "sched/cluster_scheduler.h"
#include "sched/scheduler_settings.h"

namespace dualpath::serve {

// The live system's modes are the simulator's (sched/scheduler_settings.h: one table); it runs
// basic, full, split and oracle.
using ServeMode = sched::Mode;
inline std::string_view serve_mode_name(ServeMode m) { return sched::mode_name(m); }
inline Result<ServeMode> parse_serve_mode(std::string_view name) {
  return sched::parse_mode(name, /*live=*/true);
}

// The [scheduler] section: the keys shared with the simulator (sched::SchedulerSettings, read by
// sched::read_scheduler_settings) and the service's own.
struct SchedulerSettings : sched::SchedulerSettings {
  std::string host = "127.0.0.1";
  uint16_t port = 8100;
  Duration report_interval = std::chrono::milliseconds(100);
  Duration lease_ttl = std::chrono::milliseconds(1000);
  Duration register_timeout = std::chrono::seconds(120);
  int max_attempts = 4;
  // The cluster credential (control/credential.h): with it the scheduler's port speaks mutual TLS
  // only; without it, plain TCP on a loopback host only.
  std::string cluster_key;
  Duration fetch_interval() const { return from_seconds(fetch_interval_s); }
};

// How often a node whose load has not changed still reports (NodeSetup::heartbeat): a quarter of
// the lease, and never less than the report interval. An idle node renews its lease at least
// three times before it could expire; a busy one reports every interval as before.
inline Duration heartbeat_of(const SchedulerSettings& s) {
  return std::max(s.report_interval, s.lease_ttl / 4);
}

// The [cache] section's keys the live system has (issue 35; the simulator reads the same keys):
// a DRAM tier on each decode node (store/dram_tier.h).
struct CacheSettings {
  // cache.de_dram_gb: per decode node, in the model's bytes (0: off). The nodes keep kv_scale of
  // it under modeled compute, as they keep kv_scale of the model's KV (tier_bytes()).
  double de_dram_bytes = 0;
  double de_dram_ttl_s = 480;  // cache.de_dram_ttl_s, emulated seconds
  // cache.recompute: never | auto (the scheduler recomputes a hit when the cost model says that
  // is sooner than reading it behind its node's read queue: modeled compute only, the CPU model
  // has no cost model) | always (every hit recomputed: a baseline).
  std::string recompute = "never";
};

struct ServeConfig {
  engine::EngineConfig engine;
  SchedulerSettings scheduler;
  CacheSettings cache;
  std::string origin = "<defaults>";  // the config file, for messages
  // The storage NIC's device ("mlx5_0:1"; the guide's [storage_node] rdma_device and
  // rdma_port), for `dualpath doctor`'s checks; empty when the config does not name it.
  std::string storage_device;
  // What the guide's keys mapped onto, and those with no effect here (serve_guide.h); printed
  // as `warning:` lines by `serve` and `doctor`.
  std::vector<std::string> warnings;
  // The workload's typical turn, at which the scheduler prices beta (sched::TypicalTurn): the
  // paper's agent turn unless the caller knows its workload (`bench live` gives the simulator's).
  sched::TypicalTurn typical_turn;
  // No cluster_key: make an ephemeral credential for the nodes this process starts itself
  // (`serve` without --external-nodes), written owner-only to the service's temporary directory.
  bool ephemeral_credential = false;

  // [cache] applies under modes whose read path the scheduler chooses (full, split), as the
  // simulator's check; under basic, layerwise and oracle it is off.
  bool cache_applies() const;
  // A decode node's DRAM tier in the nodes' bytes (0 where the cache does not apply), and its
  // TTL in real time.
  uint64_t tier_bytes() const;
  Duration tier_ttl() const;

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
