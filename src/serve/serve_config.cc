#include "serve/serve_config.h"

#include <fmt/format.h>

#include "serve/serve_guide.h"

namespace dualpath::serve {

std::string_view serve_mode_name(ServeMode m) {
  switch (m) {
    case ServeMode::kBasic:
      return "basic";
    case ServeMode::kFull:
      return "full";
    case ServeMode::kOracle:
      return "oracle";
    case ServeMode::kSplit:
      return "split";
  }
  return "?";
}

Result<ServeMode> parse_serve_mode(std::string_view name) {
  for (ServeMode m : {ServeMode::kBasic, ServeMode::kFull, ServeMode::kOracle, ServeMode::kSplit}) {
    if (serve_mode_name(m) == name) return m;
  }
  return Status::invalid_argument(fmt::format(
      "scheduler.mode = '{}': the live system runs basic (PE read path only, round robin), full "
      "(DualPath: both read paths, the paper's scheduler), split (full, with one request's hit "
      "read by both sides) or oracle (no KV I/O); layerwise and dualpath are simulator "
      "ablations",
      name));
}

sched::EnginePolicy ServeConfig::engine_policy() const {
  return scheduler.mode == ServeMode::kBasic ? sched::EnginePolicy::kRoundRobin
                                             : sched::EnginePolicy::kPaper;
}

sched::PathPolicy ServeConfig::path_policy() const {
  switch (scheduler.mode) {
    case ServeMode::kBasic:
      return sched::PathPolicy::kPeOnly;
    case ServeMode::kFull:
      return sched::PathPolicy::kShortestQueue;
    case ServeMode::kOracle:
      return sched::PathPolicy::kNoIo;
    case ServeMode::kSplit:
      return sched::PathPolicy::kSplit;
  }
  return sched::PathPolicy::kShortestQueue;
}

namespace {

Duration ms(int64_t v) { return std::chrono::milliseconds(v); }
int64_t to_ms(Duration d) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(d).count();
}

Status apply_scheduler_keys(Config& f, SchedulerSettings& s) {
  const std::string mode =
      f.string("scheduler.mode", std::string(serve_mode_name(s.mode)), "basic, full, split or oracle");
  auto parsed = parse_serve_mode(mode);
  if (!parsed.is_ok()) return parsed.status();
  s.mode = *parsed;
  s.host = f.string("scheduler.host", s.host, "the address nodes connect to");
  s.port = static_cast<uint16_t>(
      f.integer("scheduler.port", s.port, 0, 65535, "the port nodes connect to (0: any)"));
  s.report_interval = ms(f.integer("scheduler.report_interval_ms", to_ms(s.report_interval), 1,
                                   60'000, "ms between a node's load reports"));
  s.lease_ttl = ms(f.integer("scheduler.lease_ttl_ms", to_ms(s.lease_ttl), 1, 3'600'000,
                             "ms without a report after which a node is dead"));
  s.fetch_interval = ms(f.integer("scheduler.fetch_interval_ms", to_ms(s.fetch_interval), 1, 60'000,
                                  "ms between fetches"));
  s.register_timeout = std::chrono::seconds(
      f.integer("scheduler.register_timeout_s",
                std::chrono::duration_cast<std::chrono::seconds>(s.register_timeout).count(), 1,
                86'400, "seconds to wait for the nodes"));
  s.max_attempts = static_cast<int>(
      f.integer("scheduler.max_attempts", s.max_attempts, 1, 100, "tries of one turn"));
  s.alpha_s = f.positive_number("scheduler.alpha_s", s.alpha_s, "seconds of reading");
  s.beta_s = f.positive_number("scheduler.beta_s", s.beta_s, "seconds of prefill");
  s.z_factor = f.positive_number("scheduler.z_factor", s.z_factor);
  s.quota_s = f.positive_number("scheduler.quota_ms", s.quota_s * 1e3, "ms") / 1e3;
  DP_ASSIGN_OR_RETURN(s.pe_policy, sched::parse_pe_policy(f.choice(
                                        "scheduler.pe_policy",
                                        std::string(sched::pe_policy_name(s.pe_policy)),
                                        {"paper", "tail"})));
  s.split_min_tokens = f.integer("scheduler.split_min_tokens", s.split_min_tokens, 1, INT64_MAX,
                                 "tokens: a smaller part of a split read is not split off");
  f.ignore_key("scheduler.read_queue_depth");  // the simulator's storage NIC model
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
