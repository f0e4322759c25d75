#include "sim/sim_config.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <tuple>

#include "model/cost_config.h"
#include "sched/cluster_scheduler.h"

namespace dualpath::sim {

void SimConfig::fit_ep_groups() {
  // Adaptive P/D keeps the full sizes: each layout it may move to groups its own nodes by them
  // (sched::static_pd_layout clamps per layout), as that split run statically would.
  if (adaptive.enabled) return;
  pe_ep_nodes = std::min(pe_ep_nodes, prefill_nodes);
  de_ep_nodes = std::min(de_ep_nodes, decode_nodes);
}

std::string SimConfig::pd_label() const {
  return fmt::format("{}P{}D", prefill_nodes, decode_nodes);
}

Result<std::pair<int, int>> parse_pd(std::string_view text) {
  auto bad = [&] {
    return Status::invalid_argument(fmt::format(
        "--pd '{}' is not a P/D layout; write it as <prefill nodes>P<decode nodes>D, e.g. 2P4D",
        text));
  };
  size_t p = text.find_first_of("Pp");
  if (p == std::string_view::npos || p == 0 || text.size() < p + 3) return bad();
  char last = text.back();
  if (last != 'D' && last != 'd') return bad();
  int pn = 0, dn = 0;
  auto r1 = std::from_chars(text.data(), text.data() + p, pn);
  auto r2 = std::from_chars(text.data() + p + 1, text.data() + text.size() - 1, dn);
  constexpr int kMaxNodes = 100000;  // cluster.prefill_nodes / decode_nodes take the same
  if (r1.ec == std::errc::result_out_of_range || r2.ec == std::errc::result_out_of_range ||
      (r1.ec == std::errc() && r2.ec == std::errc() && (pn > kMaxNodes || dn > kMaxNodes)))
    return Status::invalid_argument(fmt::format(
        "--pd '{}': at most {} prefill and {} decode nodes", text, kMaxNodes, kMaxNodes));
  if (r1.ec != std::errc() || r1.ptr != text.data() + p || r2.ec != std::errc() ||
      r2.ptr != text.data() + text.size() - 1)
    return bad();
  if (pn <= 0 || dn <= 0)
    return Status::invalid_argument(fmt::format(
        "--pd '{}': both node counts must be at least 1 (e.g. 1P1D)", text));
  return std::pair<int, int>{pn, dn};
}

Result<SimConfig> default_sim_config(std::string_view model_name) {
  SimConfig cfg;
  DP_ASSIGN_OR_RETURN(cfg.model, model::model_preset(model_name));
  DP_ASSIGN_OR_RETURN(cfg.hw, model::hardware_preset("h800"));
  if (model_name == "ds660b") {
    cfg.prefill_nodes = 2;
    cfg.decode_nodes = 4;
    cfg.pe_ep_nodes = 2;  // 671 GB of FP8 weights need >= 16 GPUs
    cfg.de_ep_nodes = 4;
  } else if (model_name == "qwen32b") {
    cfg.prefill_nodes = 1;
    cfg.decode_nodes = 2;
    cfg.pe_ep_nodes = 1;
    cfg.de_ep_nodes = 1;
    cfg.pe_buffer_bytes = cfg.de_buffer_bytes = 320e9;
  } else {
    cfg.prefill_nodes = 1;
    cfg.decode_nodes = 1;
    cfg.pe_ep_nodes = 1;
    cfg.de_ep_nodes = 1;
  }
  return cfg;
}

namespace {

Status validate_online(const OnlineConfig& o) {
  auto need = [](bool ok, std::string msg) { return ok ? Status::ok() : Status::invalid_argument(msg); };
  DP_RETURN_IF_ERROR(need(o.aps >= 0 && o.aps <= 1e6 && std::isfinite(o.aps),
                          fmt::format("online.aps = {}: the arrival rate must be positive "
                                      "and at most 1e6 agents per second, e.g. 0.4; leave it "
                                      "out for an offline run",
                                      o.aps)));
  DP_RETURN_IF_ERROR(need(o.duration_s > 0 && o.duration_s <= 1e7,
                          fmt::format("online.duration_s = {}: give the simulated "
                                      "seconds to run at most, in (0, 1e7], e.g. 10800 (3 hours)",
                                      o.duration_s)));
  DP_RETURN_IF_ERROR(need(o.slo_ttft_s > 0 && o.slo_ttft_s <= 1e6,
                          fmt::format("online.slo_ttft_s = {}: the TTFT SLO must be "
                                      "positive seconds, e.g. 4 (the paper's)",
                                      o.slo_ttft_s)));
  DP_RETURN_IF_ERROR(need(o.slo_tpot_s > 0 && o.slo_tpot_s <= 1e3,
                          fmt::format("online.slo_tpot_ms = {}: the TPOT SLO must be "
                                      "positive milliseconds, e.g. 50 (the paper's)",
                                      o.slo_tpot_s * 1e3)));
  DP_RETURN_IF_ERROR(need(o.slo_statistic == "mean" || o.slo_statistic == "p50" ||
                              o.slo_statistic == "p90" || o.slo_statistic == "p99",
                          fmt::format("online.slo_statistic = '{}': use mean "
                                      "(the paper's), p50, p90 or p99",
                                      o.slo_statistic)));
  DP_RETURN_IF_ERROR(need(o.window_s > 0 && o.window_s <= 1e6 && o.lookback_s > 0 &&
                              o.lookback_s <= 1e6,
                          fmt::format("online.window_s = {}, online.lookback_s = {}: both must be "
                                      "positive seconds (the paper uses 150 and 1800)",
                                      o.window_s, o.lookback_s)));
  DP_RETURN_IF_ERROR(need(o.steady_tolerance > 0 && o.steady_tolerance < 1,
                          fmt::format("online.steady_tolerance = {} must be in (0, 1) (the paper "
                                      "uses 0.05)",
                                      o.steady_tolerance)));
  DP_RETURN_IF_ERROR(need(o.check_interval_s > 0 && o.check_interval_s <= o.window_s,
                          fmt::format("online.check_interval_s = {} must be positive and at most "
                                      "the window ({} s); default 10",
                                      o.check_interval_s, o.window_s)));
  DP_RETURN_IF_ERROR(need(o.time_scale > 0 && o.time_scale <= 1e6 && std::isfinite(o.time_scale),
                          fmt::format("online.time_scale = {} must be positive: "
                                      "trace timestamps are multiplied by it (0.5 replays twice "
                                      "as fast)",
                                      o.time_scale)));
  return Status::ok();
}

}  // namespace

bool is_timestamped_trace(std::string_view dataset) {
  return dataset.substr(0, std::string_view("mooncake:").size()) == "mooncake:";
}

Status SimConfig::validate() const {
  DP_RETURN_IF_ERROR(model.validate());
  DP_RETURN_IF_ERROR(hw.validate());
  DP_RETURN_IF_ERROR(eff.validate());
  auto need = [](bool ok, std::string msg) { return ok ? Status::ok() : Status::invalid_argument(msg); };
  DP_RETURN_IF_ERROR(need(prefill_nodes >= 1 && decode_nodes >= 1,
                          fmt::format("cluster {}: needs at least one prefill and one decode node",
                                      pd_label())));
  DP_RETURN_IF_ERROR(need(agents >= 1 && agents <= kMaxAgents,
                          fmt::format("workload.agents = {}: run between 1 and {} agents",
                                      agents, kMaxAgents)));
  DP_RETURN_IF_ERROR(need(block_tokens >= 1, fmt::format("block_tokens = {} must be >= 1; 64 is "
                                                         "the paper's", block_tokens)));
  DP_RETURN_IF_ERROR(need(hbm_reserved_bytes >= 0,
                          fmt::format("cluster.hbm_reserved_gb = {} must be "
                                      ">= 0; it is HBM kept per GPU for activations (default 10)",
                                      hbm_reserved_bytes / 1e9)));
  DP_RETURN_IF_ERROR(need(basic_prefill_kv_bytes > 0,
                          fmt::format("cluster.basic_prefill_kv_gb = {} "
                                      "must be positive; it is the HBM per PE GPU a Basic batch may "
                                      "fill with KV (default {})",
                                      basic_prefill_kv_bytes / 1e9,
                                      SimConfig{}.basic_prefill_kv_bytes / 1e9)));
  DP_RETURN_IF_ERROR(need(pe_buffer_bytes > 0 && de_buffer_bytes > 0,
                          "cluster.pe_buffer_gb and cluster.de_buffer_gb must be positive"));
  // Upper bounds keep typos (1e300, inf) from overflowing token counts or stalling the run.
  DP_RETURN_IF_ERROR(scheduler.validate());
  for (auto [v, name] : {std::pair{append_scale, "workload.append_scale"},
                         std::pair{gen_scale, "workload.gen_scale"}}) {
    DP_RETURN_IF_ERROR(need(v >= 1e-3 && v <= 1000,
                            fmt::format("{} = {} must be between 0.001 and 1000 (1 = unscaled)",
                                        name, v)));
  }
  DP_RETURN_IF_ERROR(need(think_time_scale >= 0 && think_time_scale <= 1e6,
                          fmt::format("workload.think_time_scale = {} must be between 0 (back to "
                                      "back) and 1e6 (1 = the recorded think times)",
                                      think_time_scale)));
  for (auto [v, name] : {std::pair{pe_buffer_bytes, "cluster.pe_buffer_gb"},
                         std::pair{de_buffer_bytes, "cluster.de_buffer_gb"},
                         std::pair{basic_prefill_kv_bytes, "cluster.basic_prefill_kv_gb"},
                         std::pair{hbm_reserved_bytes, "cluster.hbm_reserved_gb"}}) {
    DP_RETURN_IF_ERROR(need(v <= 1e15, fmt::format("{} = {} GB is more than 1e6 GB; give GB, "
                                                   "e.g. 80",
                                                   name, v / 1e9)));
  }
  DP_RETURN_IF_ERROR(need(read_queue_depth >= 1, "scheduler.read_queue_depth must be >= 1"));
  DP_RETURN_IF_ERROR(validate_online(online));
  if (pe_ep_nodes < 1 || de_ep_nodes < 1)
    return Status::invalid_argument("cluster.pe_ep_nodes and de_ep_nodes must be >= 1");
  // The weights must fit in the HBM of an EP group, with the reserve and room for KV.
  model::CostModel cost(model, hw, eff);
  for (auto [role, ep_nodes, nodes, key] :
       {std::tuple{"prefill", pe_ep_nodes, prefill_nodes, "cluster.pe_ep_nodes"},
        std::tuple{"decode", de_ep_nodes, decode_nodes, "cluster.de_ep_nodes"}}) {
    // Groups of ep_nodes consecutive nodes (sched::ep_group_sizes); where that does not divide
    // the nodes, the last group is smaller, and it must hold the weights too.
    const int whole = std::min(ep_nodes, nodes);
    const int smallest = sched::ep_group_sizes(nodes, whole).back();
    const int last = smallest < whole ? smallest : 0;
    int gpus = smallest * hw.gpus_per_node;
    if (cost.hbm_kv_budget_bytes(gpus, hbm_reserved_bytes) <= 0) {
      if (last > 0 && cost.hbm_kv_budget_bytes(whole * hw.gpus_per_node, hbm_reserved_bytes) > 0)
        return Status::invalid_argument(fmt::format(
            "{}: {} {} nodes in EP groups of {} ({} = {}) leave a last group of {} node(s), whose "
            "{} GPUs cannot hold {:.0f} GB of {} weights each plus the {:.0f} GB reserve; use a "
            "{} node count that is a multiple of {}, or set {} to {}",
            model.name, nodes, role, whole, key, ep_nodes, last, gpus,
            model.weight_bytes_per_gpu(gpus) / 1e9, model.name, hbm_reserved_bytes / 1e9, role,
            whole, key, nodes));
      // Each GPU holds the replicated weights whole and its share of the sharded ones.
      double replicated = model.replicated_weight_bytes();
      double room = hw.hbm_bytes - hbm_reserved_bytes - replicated;
      if (room <= 0)
        return Status::invalid_argument(fmt::format(
            "{}: the {:.0f} GB of weights every GPU holds whole plus the {:.0f} GB reserve "
            "exceed a GPU's {:.0f} GB of HBM at any EP size; lower cluster.hbm_reserved_gb or "
            "use GPUs with more HBM ([hardware] hbm_gb)",
            model.name, replicated / 1e9, hbm_reserved_bytes / 1e9, hw.hbm_bytes / 1e9));
      int need_gpus = static_cast<int>(std::ceil((model.weight_bytes() - replicated) / room));
      return Status::invalid_argument(fmt::format(
          "{}: {} = {} gives {} GPUs, whose {:.0f} GB of HBM each cannot hold {:.0f} GB of {} "
          "weights plus the {:.0f} GB reserve; use an EP group of at least {} GPUs "
          "({} nodes, with at least that many {} nodes)",
          model.name, key, ep_nodes, gpus, hw.hbm_bytes / 1e9,
          model.weight_bytes_per_gpu(gpus) / 1e9, model.name, hbm_reserved_bytes / 1e9,
          need_gpus, (need_gpus + hw.gpus_per_node - 1) / hw.gpus_per_node, role));
    }
  }
  DP_RETURN_IF_ERROR(need(
      !(store_capacity_bytes > 0 && is_timestamped_trace(dataset)),
      fmt::format("cache.store_capacity_gb (--store-capacity) evicts agent sessions; '{}' is a "
                  "content-addressed trace whose blocks are shared across requests, which the "
                  "bounded store does not model: drop it or use an agent dataset (64k, weka:PATH)",
                  dataset)));
  DP_RETURN_IF_ERROR(need(prefetch == "never" || de_dram_bytes > 0,
                          fmt::format("cache.prefetch = {} (--prefetch) stages sessions into the "
                                      "DE DRAM tier: give it one with cache.de_dram_gb "
                                      "(--dram-tier), or use --prefetch never",
                                      prefetch)));
  if (de_dram_bytes > 0 || recompute != "never") {
    DP_RETURN_IF_ERROR(need(
        sched::cache_policies_apply(scheduler.mode),
        fmt::format("cache.de_dram_gb (--dram-tier) and cache.recompute = {} (--recompute) need a read path the scheduler chooses with layerwise prefill; mode '{}' "
                    "does not: use mode full or split",
                    recompute, mode_name(scheduler.mode))));
    DP_RETURN_IF_ERROR(need(!adaptive.enabled,
                            "cache.de_dram_gb and cache.recompute are not modelled with "
                            "adaptive P/D (a node changing role would drop its tier): turn one "
                            "of them off"));
  }
  if (adaptive.enabled) {
    DP_RETURN_IF_ERROR(need(uses_paper_scheduler(scheduler.mode),
                            fmt::format("adaptive P/D (adaptive.enabled, --adaptive-pd) needs the "
                                        "paper's scheduler, whose queues it reads; mode '{}' "
                                        "places round robin: use mode full, split or oracle",
                                        mode_name(scheduler.mode))));
    const auto& a = adaptive.controller;
    for (auto [v, name] : {std::pair{a.interval_s, "adaptive.interval_s"},
                           std::pair{a.prefill_high_s, "adaptive.prefill_high_s"},
                           std::pair{a.prefill_low_s, "adaptive.prefill_low_s"}})
      DP_RETURN_IF_ERROR(need(v > 0, fmt::format("{} = {} must be > 0 (seconds)", name, v)));
    DP_RETURN_IF_ERROR(need(a.prefill_low_s <= a.prefill_high_s,
                            fmt::format("adaptive.prefill_low_s = {} is above adaptive."
                                        "prefill_high_s = {}: the low mark must not exceed the "
                                        "high one, or the controller would flip back and forth",
                                        a.prefill_low_s, a.prefill_high_s)));
    DP_RETURN_IF_ERROR(need(a.decode_room > 0 && a.decode_room <= 1,
                            fmt::format("adaptive.decode_room = {}: give a share of DE HBM in "
                                        "(0, 1], e.g. 0.5", a.decode_room)));
    DP_RETURN_IF_ERROR(need(a.hold_s >= 0 && adaptive.switch_s >= 0,
                            "adaptive.hold_s and adaptive.switch_s must be >= 0 (seconds)"));
  }
  return Status::ok();
}

Status apply_config(Config& f, SimConfig& c) {
  if (f.has("model.preset")) {
    std::string name = f.choice("model.preset", c.model.name, model::model_preset_names());
    auto m = model::model_preset(name);
    if (m.is_ok()) {
      auto d = default_sim_config(name);
      if (d.is_ok()) {
        SimConfig fresh = *d;
        fresh.scheduler.mode = c.scheduler.mode;
        c = fresh;
      }
    }
  }
  // [hardware] and [efficiency]: read as the live system's modeled backend reads them.
  model::apply_hardware_config(f, c.hw);
  c.prefill_nodes = static_cast<int>(f.integer("cluster.prefill_nodes", c.prefill_nodes, 1, 100000,
                                               "prefill nodes"));
  c.decode_nodes = static_cast<int>(f.integer("cluster.decode_nodes", c.decode_nodes, 1, 100000,
                                              "decode nodes"));
  c.pe_ep_nodes = static_cast<int>(f.integer("cluster.pe_ep_nodes", c.pe_ep_nodes, 1, 1000,
                                             "nodes per prefill EP group"));
  c.de_ep_nodes = static_cast<int>(f.integer("cluster.de_ep_nodes", c.de_ep_nodes, 1, 1000,
                                             "nodes per decode EP group"));
  c.pe_buffer_bytes =
      f.positive_number("cluster.pe_buffer_gb", c.pe_buffer_bytes / 1e9, "PE DRAM buffer, GB") * 1e9;
  c.de_buffer_bytes =
      f.positive_number("cluster.de_buffer_gb", c.de_buffer_bytes / 1e9, "DE DRAM buffer, GB") * 1e9;
  c.hbm_reserved_bytes = f.non_negative_number("cluster.hbm_reserved_gb",
                                               c.hbm_reserved_bytes / 1e9, "GB per GPU") * 1e9;
  c.basic_prefill_kv_bytes =
      f.positive_number("cluster.basic_prefill_kv_gb", c.basic_prefill_kv_bytes / 1e9,
                        "HBM a non-layerwise prefill batch may fill with KV, GB") * 1e9;
  c.block_tokens = static_cast<int>(
      f.integer("store.block_tokens", c.block_tokens, 1, 1 << 20, "tokens per KV block"));

  DP_RETURN_IF_ERROR(sched::read_scheduler_settings(f, c.scheduler));
  c.read_queue_depth = static_cast<int>(
      f.integer("scheduler.read_queue_depth", c.read_queue_depth, 1, 4096, "reads in flight"));

  c.dataset = f.string("workload.dataset", c.dataset, "32k, 48k, 64k, weka:PATH or mooncake:PATH");
  c.agents = static_cast<int>(f.integer("workload.agents", c.agents, 1, kMaxAgents, "agents"));
  c.seed = static_cast<uint64_t>(f.integer("workload.seed", static_cast<int64_t>(c.seed), 0,
                                           INT64_MAX));
  c.append_scale = f.positive_number("workload.append_scale", c.append_scale);
  c.gen_scale = f.positive_number("workload.gen_scale", c.gen_scale);
  c.think_time = f.boolean("workload.think_time", c.think_time);
  c.think_time_scale = f.number("workload.think_time_scale", c.think_time_scale,
                                "a factor on the recorded think times (0: back to back)");

  OnlineConfig& o = c.online;
  if (f.has("online.aps")) o.aps = f.positive_number("online.aps", o.aps, "agents per second");
  o.duration_s = f.positive_number("online.duration_s", o.duration_s, "simulated seconds");
  o.slo_ttft_s = f.positive_number("online.slo_ttft_s", o.slo_ttft_s, "seconds");
  o.slo_tpot_s = f.positive_number("online.slo_tpot_ms", o.slo_tpot_s * 1e3, "ms") / 1e3;
  o.slo_statistic = f.choice("online.slo_statistic", o.slo_statistic, {"mean", "p50", "p90", "p99"});
  o.window_s = f.positive_number("online.window_s", o.window_s, "seconds");
  o.lookback_s = f.positive_number("online.lookback_s", o.lookback_s, "seconds");
  o.steady_tolerance = f.positive_number("online.steady_tolerance", o.steady_tolerance);
  o.check_interval_s = f.positive_number("online.check_interval_s", o.check_interval_s, "seconds");
  o.time_scale = f.positive_number("online.time_scale", o.time_scale);
  o.slo_turns = f.choice("online.slo_turns", o.slo_turns, {"all", "hit"});

  c.de_dram_bytes = f.non_negative_number("cache.de_dram_gb", c.de_dram_bytes / 1e9,
                                          "GB of DRAM per decode node kept for sessions' KV "
                                          "(0: off)") * 1e9;
  c.de_dram_ttl_s = f.positive_number("cache.de_dram_ttl_s", c.de_dram_ttl_s, "seconds");
  {
    c.recompute = f.choice("cache.recompute", c.recompute, {"never", "auto", "always"});
    c.store_capacity_bytes =
        f.non_negative_number("cache.store_capacity_gb", c.store_capacity_bytes / 1e9,
                              "GB the KV store may hold (0: unbounded)") * 1e9;
    c.evict = f.choice("cache.evict", c.evict, {"lru", "session"});
    c.prefetch = f.choice("cache.prefetch", c.prefetch, {"never", "always", "predict"});
  }

  AdaptivePdConfig& ad = c.adaptive;
  ad.enabled = f.boolean("adaptive.enabled", ad.enabled);
  ad.switch_s = f.non_negative_number("adaptive.switch_s", ad.switch_s,
                                      "seconds to restart an engine in its new role");
  auto& ctl = ad.controller;
  ctl.interval_s = f.positive_number("adaptive.interval_s", ctl.interval_s, "seconds");
  ctl.prefill_high_s = f.positive_number("adaptive.prefill_high_s", ctl.prefill_high_s,
                                         "seconds of prefill backlog");
  ctl.prefill_low_s = f.positive_number("adaptive.prefill_low_s", ctl.prefill_low_s,
                                        "seconds of prefill backlog");
  ctl.decode_room = f.positive_number("adaptive.decode_room", ctl.decode_room,
                                      "share of DE HBM, e.g. 0.5");
  ctl.hold_s = f.non_negative_number("adaptive.hold_s", ctl.hold_s, "seconds");

  model::apply_efficiency_config(f, c.eff);
  return Status::ok();
}

void ignore_live_sections(Config& file) {
  for (const char* section : {"store", "live", "transport", "emulation"}) {
    file.ignore_section(section);
  }
  // The scheduler service's keys of the shared [scheduler] section (serve/serve_config.h).
  for (const char* key : {"scheduler.host", "scheduler.port", "scheduler.report_interval_ms",
                          "scheduler.lease_ttl_ms", "scheduler.register_timeout_s",
                          "scheduler.max_attempts", "scheduler.cluster_key"}) {
    file.ignore_key(key);
  }
}

}  // namespace dualpath::sim
