#include "serve/serve_config.h"

#include <fmt/format.h>

#include "serve/serve_guide.h"

namespace dualpath::serve {

sched::EnginePolicy ServeConfig::engine_policy() const {
  return sched::mode_policy(scheduler.mode).engines;
}

sched::PathPolicy ServeConfig::path_policy() const {
  return sched::mode_policy(scheduler.mode).paths;
}

bool ServeConfig::cache_applies() const { return sched::cache_policies_apply(scheduler.mode); }

uint64_t ServeConfig::tier_bytes() const {
  if (!cache_applies()) return 0;
  return static_cast<uint64_t>(cache.de_dram_bytes * engine.live_kv_scale());
}

Duration ServeConfig::tier_ttl() const {
  return from_seconds(cache.de_dram_ttl_s * engine.live_time_dilation());
}

namespace {

Duration ms(int64_t v) { return std::chrono::milliseconds(v); }
int64_t to_ms(Duration d) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(d).count();
}

Status apply_scheduler_keys(Config& f, SchedulerSettings& s) {
  DP_RETURN_IF_ERROR(sched::read_scheduler_settings(f, s, /*live=*/true));
  s.host = f.string("scheduler.host", s.host, "the address nodes connect to");
  s.cluster_key = f.string("scheduler.cluster_key", s.cluster_key,
                           "the cluster credential file (`dualpath keygen --out FILE`)");
  s.port = static_cast<uint16_t>(
      f.integer("scheduler.port", s.port, 0, 65535, "the port nodes connect to (0: any)"));
  s.report_interval = ms(f.integer("scheduler.report_interval_ms", to_ms(s.report_interval), 1,
                                   60'000, "ms between a node's load reports"));
  s.lease_ttl = ms(f.integer("scheduler.lease_ttl_ms", to_ms(s.lease_ttl), 1, 3'600'000,
                             "ms without a report after which a node is dead"));
  s.register_timeout = std::chrono::seconds(
      f.integer("scheduler.register_timeout_s",
                std::chrono::duration_cast<std::chrono::seconds>(s.register_timeout).count(), 1,
                86'400, "seconds to wait for the nodes"));
  s.max_attempts = static_cast<int>(
      f.integer("scheduler.max_attempts", s.max_attempts, 1, 100, "tries of one turn"));
  f.ignore_key("scheduler.read_queue_depth");  // the simulator's storage NIC model
  DP_RETURN_IF_ERROR(s.validate());
  if (s.lease_ttl <= s.report_interval) {
    return Status::invalid_argument(fmt::format(
        "scheduler.lease_ttl_ms = {} must be longer than scheduler.report_interval_ms = {}: a "
        "node reporting on time would miss its lease; make it several report intervals",
        to_ms(s.lease_ttl), to_ms(s.report_interval)));
  }
  return Status::ok();
}

}  // namespace

Status apply_serve_config(Config& file, ServeConfig& cfg) {
  cfg.origin = file.origin();
  // [cache] (issue 35): the DE DRAM tier is live; the rest is the simulator's so far: say so
  // rather than "unknown key".
  for (const char* key : {"cache.store_capacity_gb", "cache.evict", "cache.prefetch"}) {
    if (file.has(key))
      return Status::invalid_argument(fmt::format(
          "{}: {} is modelled by the simulator only (dualpath sim, dualpath capacity; "
          "docs/sched.md \"For agents\"): the live system has the DE DRAM tier "
          "(cache.de_dram_gb, cache.de_dram_ttl_s) and cache.recompute, but no prefetch or "
          "bounded store yet; remove the key for serve, node and the live benchmarks",
          file.origin(), key));
  }
  cfg.cache.de_dram_bytes =
      file.non_negative_number("cache.de_dram_gb", cfg.cache.de_dram_bytes / 1e9,
                               "GB of DRAM per decode node kept for sessions' KV (0: off)") *
      1e9;
  cfg.cache.de_dram_ttl_s = file.positive_number(
      "cache.de_dram_ttl_s", cfg.cache.de_dram_ttl_s,
      "seconds a decode node keeps a session's KV in its DRAM tier after its turn");
  cfg.cache.recompute =
      file.choice("cache.recompute", cfg.cache.recompute, {"never", "auto", "always"});
  DP_RETURN_IF_ERROR(engine::apply_engine_config(file, cfg.engine));
  return apply_scheduler_keys(file, cfg.scheduler);
}

Result<ServeConfig> load_serve_config(const std::string& path) {
  DP_ASSIGN_OR_RETURN(ServeConfig cfg, read_serve_config(path));
  DP_RETURN_IF_ERROR(cfg.engine.validate());
  return cfg;
}

Result<ServeConfig> read_serve_config(const std::string& path) {
  Config file;
  ServeConfig cfg;
  if (!path.empty()) {
    DP_ASSIGN_OR_RETURN(file, Config::from_file(path));
  }
  // The embedded default: the tiny CPU model on 1P2D.
  cfg.engine.decode_nodes = 2;
  DP_RETURN_IF_ERROR(apply_serve_config(file, cfg));
  DP_RETURN_IF_ERROR(apply_guide_config(file, cfg));
  // The simulator's sections and keys, read by `dualpath sim` from the same file.
  for (const char* section : {"workload", "online", "adaptive"}) file.ignore_section(section);
  for (const char* key : {"cluster.pe_buffer_gb", "cluster.de_buffer_gb", "cluster.hbm_reserved_gb",
                          "cluster.basic_prefill_kv_gb"}) {
    file.ignore_key(key);
  }
  DP_RETURN_IF_ERROR(file.finish());
  return cfg;
}

}  // namespace dualpath::serve
