#include "bench/overlap_bench.h"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>

#include "common/percentiles.h"
#include "compute/init_rng.h"
#include "engine/engine_config.h"

namespace dualpath::bench {

Status validate_overlap_options(const OverlapOptions& options, const engine::EngineConfig& cfg) {
  if (cfg.compute != "modeled") {
    return Status::invalid_argument(
        "the overlap benchmark compares against compute-only prefills (the oracle path), which "
        "needs live.compute = \"modeled\"");
  }
  const int64_t bt = cfg.block_tokens;
  if (options.hit_tokens < bt || options.hit_tokens % bt != 0 || options.append_tokens < 1 ||
      options.repeats < 1) {
    return Status::invalid_argument(fmt::format(
        "--hit-tokens {} must be a positive multiple of the block size {}, --append-tokens and "
        "--repeats at least 1",
        options.hit_tokens, bt));
  }
  return Status::ok();
}

Result<OverlapResult> run_overlap_bench(serve::Cluster& cluster, const OverlapOptions& options) {
  const engine::EngineConfig& cfg = cluster.config().engine;
  DP_RETURN_IF_ERROR(validate_overlap_options(options, cfg));
  DP_ASSIGN_OR_RETURN(engine::ModelKvShape shape, engine::model_kv_shape(cfg));
  compute::SplitMix64 rng(compute::mix64(options.seed));
  auto random_tokens = [&](int64_t n) {
    std::vector<int32_t> t(static_cast<size_t>(n));
    for (auto& x : t) x = static_cast<int32_t>(rng.next() % shape.vocab);
    return t;
  };
  // Turn 0: the prefix, recomputed and persisted.
  const std::vector<int32_t> prefix = random_tokens(options.hit_tokens);
  {
    TurnRequest first;
    first.tokens = prefix;
    first.tokens.push_back(0);
    first.gen_tokens = 1;
    first.path = sched::PathRequest(sched::ReadPath::kRecompute);
    DP_RETURN_IF_ERROR(cluster.run_turn(first).status(), "overlap benchmark: the first turn");
  }
  OverlapResult out;
  out.layers = shape.layers;
  out.hit_tokens = options.hit_tokens;
  out.prompt_tokens = options.hit_tokens + options.append_tokens;
  out.layer_load_bytes = options.hit_tokens * shape.bytes_per_token_per_layer;
  for (auto [name, path] : {std::pair{"oracle", sched::PathRequest(sched::ReadPath::kOracle)},
                            std::pair{"de", sched::PathRequest(sched::ReadPath::kDe)}, std::pair{"pe", sched::PathRequest(sched::ReadPath::kPe)}}) {
    OverlapPathResult pr;
    pr.path = name;
    std::vector<std::vector<std::pair<double, double>>> timelines;
    for (int r = 0; r < options.repeats; ++r) {
      // A fresh append each time, so the blocks the previous repeat persisted never hit.
      TurnRequest req;
      req.tokens = prefix;
      const auto append = random_tokens(options.append_tokens);
      req.tokens.insert(req.tokens.end(), append.begin(), append.end());
      req.gen_tokens = 1;
      req.path = path;
      req.oracle_hit_tokens = options.hit_tokens;
      DP_ASSIGN_OR_RETURN(TurnResult t, cluster.run_turn(req));
      if (t.hit_tokens != options.hit_tokens) {
        return Status::internal(fmt::format("overlap benchmark: {} path hit {} tokens, not {}",
                                            name, t.hit_tokens, options.hit_tokens));
      }
      std::vector<std::pair<double, double>> tl = t.layer_timeline;
      double loop = 0;
      for (const auto& [load, compute] : tl) loop += load + compute;
      pr.loop_s.push_back(loop);
      timelines.push_back(std::move(tl));
    }
    std::vector<size_t> order(pr.loop_s.size());
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return pr.loop_s[a] < pr.loop_s[b]; });
    const size_t mid = order[order.size() / 2];
    pr.loop_median_s = pr.loop_s[mid];
    pr.timeline = timelines[mid];
    double compute = 0;
    for (const auto& [load, comp] : pr.timeline) {
      pr.max_layer_load_s = std::max(pr.max_layer_load_s, load);
      compute += comp;
    }
    pr.layer0_load_s = pr.timeline.empty() ? 0 : pr.timeline[0].first;
    pr.compute_per_layer_s = pr.timeline.empty() ? 0 : compute / static_cast<double>(pr.timeline.size());
    out.paths.push_back(std::move(pr));
  }
  for (auto& pr : out.paths) {
    pr.ratio_to_compute_only = pr.loop_median_s / out.paths[0].loop_median_s;
  }
  return out;
}

Json OverlapResult::to_json() const {
  Json paths_json = Json::array();
  for (const auto& p : paths) {
    Json tl = Json::array();
    for (const auto& [load, comp] : p.timeline) tl.push_back({load, comp});
    paths_json.push_back(Json{{"path", p.path},
                              {"loop_s", p.loop_s},
                              {"loop_median_s", p.loop_median_s},
                              {"ratio_to_compute_only", p.ratio_to_compute_only},
                              {"layer0_load_s", p.layer0_load_s},
                              {"max_layer_load_s", p.max_layer_load_s},
                              {"compute_per_layer_s", p.compute_per_layer_s},
                              {"layer_timeline_s", tl}});
  }
  return Json{{"layers", layers},
              {"hit_tokens", hit_tokens},
              {"prompt_tokens", prompt_tokens},
              {"layer_load_bytes", layer_load_bytes},
              {"paths", paths_json}};
}

std::string OverlapResult::table() const {
  std::string out = fmt::format(
      "{} layers, {} hit + {} new tokens, {:.1f} KiB of hit KV per layer (real seconds)\n",
      layers, hit_tokens, prompt_tokens - hit_tokens, static_cast<double>(layer_load_bytes) / 1024);
  out += fmt::format("{:>8} {:>14} {:>16} {:>16} {:>18} {:>12}\n", "path", "layers ms (p50)",
                     "x compute-only", "layer-0 load ms", "max load wait ms", "compute/layer");
  for (const auto& p : paths) {
    out += fmt::format("{:>8} {:>14.2f} {:>16.3f} {:>16.3f} {:>18.3f} {:>10.3f}ms\n", p.path,
                       1e3 * p.loop_median_s, p.ratio_to_compute_only, 1e3 * p.layer0_load_s,
                       1e3 * p.max_layer_load_s, 1e3 * p.compute_per_layer_s);
  }
  out += "\nper-layer timeline, ms (load wait / compute), median run of each path:\n";
  out += fmt::format("{:>5}", "layer");
  for (const auto& p : paths) out += fmt::format(" {:>17}", p.path);
  out += "\n";
  for (int64_t l = 0; l < layers; ++l) {
    out += fmt::format("{:>5}", l);
    for (const auto& p : paths) {
      if (l < static_cast<int64_t>(p.timeline.size())) {
        out += fmt::format(" {:>8.3f}/{:>8.3f}", 1e3 * p.timeline[l].first,
                           1e3 * p.timeline[l].second);
      }
    }
    out += "\n";
  }
  return out;
}

}  // namespace dualpath::bench
