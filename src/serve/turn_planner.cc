#include "serve/turn_planner.h"

#include "engine/engine_config.h"
#include "model/model_spec.h"

namespace dualpath::serve {

sched::SchedRequest TurnPlanner::request(int64_t id,
                                         int64_t prompt_tokens,
                                         int64_t gen_tokens,
                                         int64_t cached_tokens,
                                         const sched::PathRequest& path,
                                         int dram_node,
                                         int64_t dram_tokens) const {
  sched::TurnInputs in;
  in.id = id;
  in.prompt_tokens = prompt_tokens;
  in.gen_tokens = gen_tokens;
  in.cached_tokens = cached_tokens;
  in.path = path;
  in.dram_node = dram_node;
  in.dram_tokens = dram_tokens;
  return sched::make_sched_request(in, costs, cost);
}

Result<TurnPlanner> make_turn_planner(const ServeConfig& config, const model::CostModel* cost) {
  const engine::EngineConfig& cfg = config.engine;
  DP_ASSIGN_OR_RETURN(engine::ModelKvShape shape, engine::model_kv_shape(cfg));
  TurnPlanner p;
  double kv = static_cast<double>(shape.layers * shape.bytes_per_token_per_layer);
  double scale = 1.0;
  if (cfg.compute == "modeled") {
    // The model's own KV size (the emulated rows carry kv_scale of it, rounded per layer).
    DP_ASSIGN_OR_RETURN(model::ModelSpec preset, model::model_preset(cfg.model));
    kv = static_cast<double>(preset.stored_bytes_per_token());
    scale = cfg.kv_scale;
  }
  p.costs = {cfg.block_tokens, kv, static_cast<double>(cfg.hbm_bytes) / scale};
  p.cost = cost;
  p.paths = config.path_policy();
  return p;
}

}  // namespace dualpath::serve
