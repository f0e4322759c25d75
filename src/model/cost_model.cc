#include "model/cost_model.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <vector>

namespace dualpath::model {

Status Efficiency::validate() const {
  auto frac = [](double v, const char* key) -> Status {
    if (v > 0 && v <= 1) return Status::ok();
    return Status::invalid_argument(
        fmt::format("efficiency.{} = {} must be in (0, 1]; it is a fraction of peak", key, v));
  };
  DP_RETURN_IF_ERROR(frac(linear_mfu, "linear_mfu"));
  DP_RETURN_IF_ERROR(frac(attention_mfu, "attention_mfu"));
  DP_RETURN_IF_ERROR(frac(decode_mbu, "decode_mbu"));
  DP_RETURN_IF_ERROR(frac(storage_efficiency, "storage_efficiency"));
  if (!(decode_mfu == 0 || (decode_mfu > 0 && decode_mfu <= 1)))
    return Status::invalid_argument(fmt::format(
        "efficiency.decode_mfu = {} must be 0 (none) or in (0, 1]; it is a fraction of peak",
        decode_mfu));
  // Up to 10 s: larger values are typos (a cost per layer, request or decode step).
  auto non_negative_ms = [](double s, const char* key) -> Status {
    if (s >= 0 && s <= 10.0) return Status::ok();
    return Status::invalid_argument(fmt::format(
        "efficiency.{} = {} must be in [0, 10000]; it is a fixed cost in milliseconds (0 = none)",
        key, s * 1e3));
  };
  DP_RETURN_IF_ERROR(non_negative_ms(layer_overhead_s, "layer_overhead_ms"));
  DP_RETURN_IF_ERROR(non_negative_ms(intra_node_layer_overhead_s, "intra_node_layer_overhead_ms"));
  DP_RETURN_IF_ERROR(non_negative_ms(request_overhead_s, "request_overhead_ms"));
  DP_RETURN_IF_ERROR(non_negative_ms(decode_step_overhead_s, "decode_step_overhead_ms"));
  return Status::ok();
}

CostModel::CostModel(ModelSpec model, HardwareSpec hw, Efficiency eff)
    : model_(std::move(model)), hw_(std::move(hw)), eff_(eff) {}

double CostModel::linear_peak() const {
  // FP8 weights run on the FP8 tensor cores; BF16/fp32 models on BF16 ones.
  return model_.weight_bytes_per_param <= 1.0 ? hw_.fp8_flops : hw_.bf16_flops;
}

double usable_snic_bytes_per_s(const HardwareSpec& hw, const Efficiency& eff) {
  return hw.node_snic_bytes_per_s() * eff.storage_efficiency;
}

double CostModel::attention_s(const PrefillWork& w) const {
  const double fixed = w.new_tokens > 0 ? eff_.request_overhead_s * model_.layers : 0.0;
  return fixed + model_.attention_flops_for(w.cached_tokens, w.new_tokens) /
                     (eff_.attention_mfu * hw_.bf16_flops);
}

double CostModel::attention_s(std::span<const PrefillWork> batch) const {
  double s = 0;
  for (const auto& w : batch) s += attention_s(w);
  return s;
}

double CostModel::linear_s(double new_tokens) const {
  return 2.0 * static_cast<double>(model_.active_params) * new_tokens /
         (eff_.linear_mfu * linear_peak());
}

double CostModel::pass_overhead_s(int group_gpus) const {
  bool spans_nodes = group_gpus > hw_.gpus_per_node;
  return model_.layers *
         (spans_nodes ? eff_.layer_overhead_s : eff_.intra_node_layer_overhead_s);
}

double CostModel::prefill_s(std::span<const PrefillWork> batch, int group_gpus) const {
  double tokens = 0;
  for (const auto& w : batch) tokens += static_cast<double>(w.new_tokens);
  // Every GPU of the group runs the same batch: the group's pass with its total new tokens.
  return group_pass_s(attention_s(batch), tokens * std::max(group_gpus, 1), group_gpus);
}

double CostModel::group_pass_s(double max_attention_s, double total_new_tokens,
                               int group_size) const {
  return pass_overhead_s(group_size) + max_attention_s +
         linear_s(total_new_tokens / std::max(group_size, 1));
}

double CostModel::decode_step_s(int batch, double context_tokens_sum, int ep_size) const {
  if (batch <= 0) return 0.0;
  double weights = model_.weight_bytes_per_gpu(ep_size);
  // Per request and layer, attention reads the selected keys' cache (all of them unless sparse)
  // and, with DSA, the indexer keys of the whole context.
  double avg_ctx = context_tokens_sum / batch;
  double attended = model_.topk > 0 ? std::min<double>(avg_ctx, model_.topk) : avg_ctx;
  double kv_read = batch * attended * static_cast<double>(model_.kv_bytes_per_token()) +
                   context_tokens_sum * model_.indexer_bytes_per_token_per_layer * model_.layers;
  double mem_s = (weights + kv_read) / (eff_.decode_mbu * hw_.hbm_bytes_per_s);
  double flops = 2.0 * static_cast<double>(model_.active_params) * batch +
                 batch * model_.attention_flops_per_token(static_cast<int64_t>(avg_ctx));
  if (eff_.decode_mfu > 0)
    return eff_.decode_step_overhead_s + mem_s + flops / (eff_.decode_mfu * linear_peak());
  double compute_s = flops / (eff_.linear_mfu * linear_peak());
  return eff_.decode_step_overhead_s + std::max(mem_s, compute_s);
}

double CostModel::hbm_kv_budget_bytes(int ep_size, double reserved_bytes) const {
  double weights = model_.weight_bytes_per_gpu(ep_size);
  return std::max(0.0, hw_.hbm_bytes - weights - reserved_bytes);
}

double CostModel::cache_compute_ratio(int64_t ctx, int64_t append) const {
  double kv_gb = static_cast<double>(ctx) * static_cast<double>(model_.kv_bytes_per_token()) / 1e9;
  // PAPER.md §13.1: FLOPs of the appended tokens, each charged attention at the prefix length.
  double pflop = static_cast<double>(append) *
                 (2.0 * static_cast<double>(model_.active_params) +
                  model_.attention_flops_per_token(ctx)) /
                 1e15;
  return kv_gb / pflop;
}

double CostModel::prefill_tokens_per_s(int64_t cached, int64_t new_tokens, int batch,
                                       int group_gpus) const {
  std::vector<PrefillWork> b(static_cast<size_t>(std::max(batch, 1)), PrefillWork{cached, new_tokens});
  double t = prefill_s(b, group_gpus);
  return t > 0 ? static_cast<double>(batch) * static_cast<double>(cached + new_tokens) / t : 0.0;
}

}  // namespace dualpath::model
