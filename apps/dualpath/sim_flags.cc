#include "apps/dualpath/sim_flags.h"

#include <fmt/format.h>

#include "common/config.h"
#include "workload/dataset_spec.h"

namespace dualpath::app {

void SimFlags::add_to(CLI::App* cmd, bool offline, bool with_aps) {
  cmd->add_option("--config", config_path,
                  "TOML cluster file shared with the live system (flags override it)");
  cmd->add_option("--model", model,
                  "model preset: ds660b (default), ds27b, qwen32b, tiny, small, ...");
  cmd->add_option("--dataset", dataset,
                  "workload: 32k, 48k, 64k (PAPER Table 2 generator), weka:PATH or mooncake:PATH "
                  "(replayed at its timestamps) (default 64k)");
  cmd->add_option("--pd", pd, "prefill/decode nodes, e.g. 2P4D (default: the model's)");
  if (offline) {
    cmd->add_option("--agents", agents, "offline: agents started together at t=0 (default 1024)");
  }
  cmd->add_option("--mode", mode,
                  "basic | layerwise | dualpath | full | oracle | split (default full = DualPath; "
                  "split = full + split reads, both sides reading parts of one request)");
  cmd->add_option("--pe-policy", pe_policy,
                  "how the scheduler ranks prefill engines: paper (Algorithm 1, fewest prompt "
                  "tokens; default) or tail (least prefill work, for TTFT p99); the config's "
                  "scheduler.pe_policy");
  cmd->add_option("--seed", seed, "workload seed (default 1)");
  cmd->add_option("--append-scale", append_scale,
                  "multiply every turn's append length (Fig. 9), truncated at MaxLen");
  cmd->add_option("--gen-scale", gen_scale, "multiply every turn's generation length");
  cmd->add_flag("--think-time", think_time,
                "replay recorded think times (weka traces); the paper uses none");
  cmd->add_flag("--adaptive-pd", adaptive_pd,
                "start from --pd and let the P/D controller move nodes between prefill and "
                "decode as the load shifts (a node changes role once drained; [adaptive] "
                "in the config tunes it; docs/sched.md)");
  cmd->add_option("--switch-s", switch_s,
                  "adaptive P/D: seconds a node takes to restart its engine in its new role "
                  "(default 30; a changed EP size adds the weight reload); adaptive.switch_s");
  cmd->add_option("--dram-tier", dram_tier,
                  "beyond the paper: DRAM per decode node that keeps sessions' KV after their "
                  "turn (e.g. 400G; 0 = off, the default); a later turn placed on that node "
                  "gets its hit from there with no storage read; cache.de_dram_gb");
  cmd->add_option("--dram-ttl", dram_ttl_s,
                  "seconds the DRAM tier keeps a session (default 480); cache.de_dram_ttl_s");
  cmd->add_option("--recompute", recompute,
                  "beyond the paper: auto = recompute a hit when the cost model says that is "
                  "sooner than reading it behind the node's read queue; never (default) reads "
                  "every hit; always recomputes every hit (a baseline); cache.recompute");
  cmd->add_option("--store-capacity", store_capacity,
                  "beyond the paper: the KV store holds at most this much (e.g. 2T; default "
                  "unbounded); sessions are evicted whole by --evict; cache.store_capacity_gb");
  cmd->add_option("--evict", evict,
                  "with --store-capacity: lru (least recently used session, default) or session "
                  "(ended sessions first, then those idle beyond twice their mean think time, "
                  "then LRU); cache.evict");
  cmd->add_option("--prefetch", prefetch,
                  "with --dram-tier: when a session between turns loses its DRAM copy (expired, "
                  "evicted), never (default) reads it at its next turn; always stages it again at "
                  "once; predict stages it to land by its expected return; prefetches use only "
                  "idle storage-NIC time and free tier space; cache.prefetch");
  online.add_to(cmd, with_aps);
  calibration.add_to(cmd);
}

// Builds the config: model defaults, then the file, then the flags (flags win).
Result<sim::SimConfig> make_sim_config(const SimFlags& a) {
  std::string model = a.model.value_or("ds660b");
  Config file;
  if (a.config_path) {
    DP_ASSIGN_OR_RETURN(file, Config::from_file(*a.config_path));
    if (!a.model) model = file.string("model.preset", model);
  }
  DP_ASSIGN_OR_RETURN(sim::SimConfig cfg, sim::default_sim_config(model));
  if (a.config_path) {
    DP_RETURN_IF_ERROR(sim::apply_config(file, cfg));
    sim::ignore_live_sections(file);
    DP_RETURN_IF_ERROR(file.finish());
  }
  if (a.dataset) cfg.dataset = *a.dataset;
  if (a.mode) {
    DP_ASSIGN_OR_RETURN(cfg.scheduler.mode, sim::parse_mode(*a.mode));
  }
  if (a.pe_policy) {
    DP_ASSIGN_OR_RETURN(cfg.scheduler.pe_policy, sched::parse_pe_policy(*a.pe_policy));
  }
  if (a.pd) {
    DP_ASSIGN_OR_RETURN(auto pd, sim::parse_pd(*a.pd));
    cfg.prefill_nodes = pd.first;
    cfg.decode_nodes = pd.second;
  }
  if (a.agents) cfg.agents = *a.agents;
  if (a.seed) {
    if (*a.seed < 0)
      return Status::invalid_argument(
          fmt::format("--seed {}: use a non-negative integer (default 1)", *a.seed));
    cfg.seed = static_cast<uint64_t>(*a.seed);
  }
  if (a.append_scale) cfg.append_scale = *a.append_scale;
  if (a.gen_scale) cfg.gen_scale = *a.gen_scale;
  if (a.think_time) cfg.think_time = true;
  if (a.adaptive_pd) cfg.adaptive.enabled = true;
  if (a.switch_s) cfg.adaptive.switch_s = *a.switch_s;
  // A size flag: bytes with an optional K, M, G or T suffix.
  auto size_flag = [](const char* flag, const std::string& value, const char* what,
                      const char* example, double& out) -> Status {
    auto bytes = parse_size_bytes(value);
    if (!bytes.is_ok() || *bytes < 0)
      return Status::invalid_argument(fmt::format(
          "{} '{}': give {} with an optional K, M, G or T suffix, e.g. {} {}", flag, value, what,
          flag, example));
    out = static_cast<double>(*bytes);
    return Status::ok();
  };
  if (a.dram_tier)
    DP_RETURN_IF_ERROR(size_flag("--dram-tier", *a.dram_tier, "bytes per decode node",
                                 "400G (0: off)", cfg.de_dram_bytes));
  if (a.dram_ttl_s) {
    if (!(*a.dram_ttl_s > 0))
      return Status::invalid_argument(
          fmt::format("--dram-ttl {}: give seconds > 0, e.g. --dram-ttl 480", *a.dram_ttl_s));
    cfg.de_dram_ttl_s = *a.dram_ttl_s;
  }
  if (a.store_capacity)
    DP_RETURN_IF_ERROR(size_flag("--store-capacity", *a.store_capacity, "the store's bytes",
                                 "2T (0: unbounded)", cfg.store_capacity_bytes));
  if (a.evict) {
    if (*a.evict != "lru" && *a.evict != "session")
      return Status::invalid_argument(fmt::format(
          "--evict '{}': use lru (least recently used session) or session (ended sessions "
          "first, then idle ones)",
          *a.evict));
    cfg.evict = *a.evict;
  }
  if (a.prefetch) {
    if (*a.prefetch != "never" && *a.prefetch != "always" && *a.prefetch != "predict")
      return Status::invalid_argument(fmt::format(
          "--prefetch '{}': use never, always or predict", *a.prefetch));
    cfg.prefetch = *a.prefetch;
  }
  if (a.recompute) {
    if (*a.recompute != "auto" && *a.recompute != "never" && *a.recompute != "always")
      return Status::invalid_argument(fmt::format(
          "--recompute '{}': use never (read every hit), auto (recompute when sooner than "
          "reading) or always (recompute every hit)",
          *a.recompute));
    cfg.recompute = *a.recompute;
  }
  DP_RETURN_IF_ERROR(a.online.apply(cfg));
  if (a.agents && cfg.online.enabled())
    return Status::invalid_argument(
        "--agents is for offline runs (all agents at t = 0); an online run takes --aps (and "
        "--duration as its cap): drop --agents");
  a.calibration.apply(cfg);
  cfg.fit_ep_groups();
  DP_RETURN_IF_ERROR(cfg.validate());
  return cfg;
}

}  // namespace dualpath::app
